package nn

import (
	"math"

	"github.com/micrograph/micrograph/torch"
)

// Linear is the affine map y = x·Wᵀ + b, with W of shape out×in (torch.nn.Linear).
//
// Initialisation is PyTorch's: W from kaiming_uniform with a = √5, which is
// U(−1/√in, 1/√in), and b from U(−1/√in, 1/√in).
type Linear struct {
	Weight *torch.Tensor // out×in
	Bias   *torch.Tensor // out, or nil
}

// NewLinear registers "weight" (and "bias" when bias is true) at p.
func NewLinear(p Path, in, out int64, bias bool) *Linear {
	l := &Linear{Weight: p.Param("weight", torch.Empty([]int64{out, in}, p.Options()))}
	KaimingUniform(l.Weight, math.Sqrt(5))
	if bias {
		l.Bias = p.Param("bias", torch.Empty([]int64{out}, p.Options()))
		bound := 1 / math.Sqrt(float64(in))
		Uniform(l.Bias, -bound, bound)
	}
	return l
}

// Forward maps x (…×in) to …×out.
func (l *Linear) Forward(x *torch.Tensor) *torch.Tensor { return torch.Linear(x, l.Weight, l.Bias) }
