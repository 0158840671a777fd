package model

import (
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Precision is how a model's matrix products are computed (docs/method.md
// §13). Whatever it is, the parameters, the optimiser's state, batch norm,
// every softmax, Sinkhorn, the cosine similarities and the losses stay
// float32, and checkpoints and exported encoders are float32.
type Precision string

// The precisions.
const (
	// FP32 multiplies in float32.
	FP32 Precision = "fp32"
	// BF16 multiplies the Linear layers' inputs and weights in bfloat16,
	// accumulating in float32: the GENConv MLPs, the projections and the
	// heads. CPUs with avx512_bf16 or AMX; GPUs from Ampere on.
	BF16 Precision = "bf16"
	// TF32 multiplies float32 matrices on a GPU's TF32 tensor cores
	// (PyTorch's allow_tf32); GPUs from Ampere on, never the CPU.
	TF32 Precision = "tf32"
)

// PrecisionHelp describes the precisions, for every command's --precision.
const PrecisionHelp = "matrix products in fp32, bf16 (bfloat16 with float32 accumulation; CPUs with avx512_bf16 or AMX, " +
	"GPUs from Ampere) or tf32 (GPUs from Ampere); the rest stays float32 (docs/method.md §13)"

// Validate reports a name that is not a precision, as the field "precision".
func (p Precision) Validate() error {
	switch p {
	case FP32, BF16, TF32:
		return nil
	}
	return field.Errorf("precision", string(p), "must be fp32, bf16 or tf32")
}

// Check is nil when dev can compute in p, and otherwise names the reason,
// as the field "precision".
func (p Precision) Check(dev torch.Device) error {
	var err error
	switch p {
	case BF16:
		err = torch.CheckBFloat16(dev)
	case TF32:
		err = torch.CheckTF32(dev)
	default:
		return p.Validate()
	}
	if err != nil {
		return field.Errorf("precision", string(p), "cannot run on %v: %v", dev, err)
	}
	return nil
}

// Apply makes the Linear layers of store s compute in p (nn.Store.SetCompute;
// for TF32, libtorch's process-wide switch). Call Check first.
func (p Precision) Apply(s *nn.Store) error {
	if p == BF16 {
		s.SetCompute(torch.BFloat16)
	} else {
		s.SetCompute(s.DType())
	}
	return torch.SetTF32(p == TF32)
}
