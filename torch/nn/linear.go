package nn

import (
	"math"

	"github.com/micrograph/micrograph/torch"
)

// Linear is the affine map y = x·Wᵀ + b, with W of shape out×in (torch.nn.Linear).
//
// Initialisation is PyTorch's: W from kaiming_uniform with a = √5, which is
// U(−1/√in, 1/√in), and b from U(−1/√in, 1/√in). The product is computed in
// the store's compute dtype (Store.SetCompute).
type Linear struct {
	Weight *torch.Tensor // out×in
	Bias   *torch.Tensor // out, or nil

	store *Store
}

// NewLinear registers "weight" (and "bias" when bias is true) at p.
func NewLinear(p Path, in, out int64, bias bool) *Linear {
	l := &Linear{Weight: p.Param("weight", torch.Empty([]int64{out, in}, p.Options())), store: p.store}
	KaimingUniform(l.Weight, math.Sqrt(5))
	if bias {
		l.Bias = p.Param("bias", torch.Empty([]int64{out}, p.Options()))
		bound := 1 / math.Sqrt(float64(in))
		Uniform(l.Bias, -bound, bound)
	}
	return l
}

// Forward maps x (…×in) to …×out. In a reduced compute dtype the product
// accumulates in float32 (oneDNN on the CPU, cuBLAS on GPUs) and is rounded
// to the compute dtype once, before the cast back; the casts are
// differentiable, so the weights' gradients arrive in their own dtype.
func (l *Linear) Forward(x *torch.Tensor) *torch.Tensor {
	dt := l.store.compute
	if dt == x.DType() {
		return torch.Linear(x, l.Weight, l.Bias)
	}
	var b *torch.Tensor
	if l.Bias != nil {
		b = l.Bias.ToDType(dt)
	}
	return torch.Linear(x.ToDType(dt), l.Weight.ToDType(dt), b).ToDType(x.DType())
}

// ForwardAdd is Forward(x).Add(residual), in one fused pass after the
// product where the fused kernels take x (torch.FusedLinearResidual): the
// same values.
func (l *Linear) ForwardAdd(x, residual *torch.Tensor) *torch.Tensor {
	if l.Bias != nil && x.Dim() == 2 && l.store.compute == x.DType() && torch.FusedKernelsFor(x) {
		return torch.FusedLinearResidual(x, l.Weight, l.Bias, residual)
	}
	return l.Forward(x).Add(residual)
}
