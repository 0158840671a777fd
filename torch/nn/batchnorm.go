package nn

import "github.com/micrograph/micrograph/torch"

// BatchNorm1d normalises each of C channels of x (N×C) (torch.nn.BatchNorm1d):
//
//	y = (x − μ) / √(σ² + ε) · γ + β
//
// In training μ and σ² are the batch's mean and biased variance, and the
// running statistics move towards the batch's (unbiased variance) by Momentum:
// r ← (1 − m)·r + m·batch. In evaluation μ and σ² are the running statistics.
type BatchNorm1d struct {
	Weight, Bias            *torch.Tensor // γ (ones) and β (zeros)
	RunningMean, RunningVar *torch.Tensor // zeros and ones
	NumBatchesTracked       *torch.Tensor // int64 0-d, as PyTorch saves it
	Momentum, Eps           float64
}

// NewBatchNorm1d registers weight, bias, running_mean, running_var and
// num_batches_tracked at p, in PyTorch's order, with momentum 0.1 and ε 1e-5.
func NewBatchNorm1d(p Path, channels int64) *BatchNorm1d {
	o := p.Options()
	shape := []int64{channels}
	return &BatchNorm1d{
		Weight:            p.Param("weight", torch.Ones(shape, o)),
		Bias:              p.Param("bias", torch.Zeros(shape, o)),
		RunningMean:       p.Buffer("running_mean", torch.Zeros(shape, o)),
		RunningVar:        p.Buffer("running_var", torch.Ones(shape, o)),
		NumBatchesTracked: p.Buffer("num_batches_tracked", torch.Zeros(nil, torch.Options{DType: torch.Int64, Device: o.Device})),
		Momentum:          0.1,
		Eps:               1e-5,
	}
}

// Forward normalises x; train selects batch statistics and updates the
// running ones. A training batch of one row has no variance to learn from
// (PyTorch's module refuses it): it is normalised to β and leaves the running
// statistics alone, which would otherwise become NaN. Training on 2-d input
// runs in the fused kernel where it takes x (torch.FusedBatchNorm).
func (b *BatchNorm1d) Forward(x *torch.Tensor, train bool) *torch.Tensor {
	if train && x.Size(0) == 1 {
		return torch.BatchNorm(x, b.Weight, b.Bias, nil, nil, true, b.Momentum, b.Eps)
	}
	if train {
		b.NumBatchesTracked.AddScalarInPlace(1)
		if x.Dim() == 2 && torch.FusedKernelsFor(x) {
			return torch.FusedBatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.Momentum, b.Eps)
		}
	}
	return torch.BatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, train, b.Momentum, b.Eps)
}
