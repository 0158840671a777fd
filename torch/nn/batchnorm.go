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

// ForwardDropout is training-mode Forward followed by d (a dropout, after a
// ReLU when d.ReLU), in one fused kernel where both would run in theirs
// (torch.FusedBatchNormDropout): the same values and generator draws, and
// the normalised x is never stored.
func (b *BatchNorm1d) ForwardDropout(x *torch.Tensor, d torch.NormDropout) *torch.Tensor {
	if x.Dim() == 2 && x.Size(0) > 1 && d.P > 0 && d.P < 1 && torch.FusedKernelsFor(x) {
		b.NumBatchesTracked.AddScalarInPlace(1)
		return torch.FusedBatchNormDropout(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.Momentum, b.Eps, d)
	}
	drop := Dropout{P: d.P}
	if d.ReLU {
		return drop.ForwardReLU(b.Forward(x, true), true)
	}
	return drop.Forward(b.Forward(x, true), true)
}

// ForwardAcross normalises x in training with the statistics of every
// process's rows, where the batch is split across the processes of a
// data-parallel job in group g (synchronised batch norm): the per-process
// sums are completed into sums over all processes, differentiably (the
// backward pass sums the processes' gradients), and every process calls it
// in the same order. The running statistics move as Forward moves them,
// towards the global batch's. 2-d x runs in the fused kernel where it takes
// x (ProcessGroup.BatchNorm), otherwise composed from tensor ops around
// ProcessGroup.AllReduceSumGrad.
func (b *BatchNorm1d) ForwardAcross(x *torch.Tensor, g *torch.ProcessGroup) *torch.Tensor {
	if x.Dim() == 2 && torch.FusedKernelsFor(x) {
		b.NumBatchesTracked.AddScalarInPlace(1)
		return g.BatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.Momentum, b.Eps)
	}
	return b.forwardAcrossComposed(x, g)
}

// forwardAcrossComposed is ForwardAcross from tensor ops, where the fused
// kernel does not take x (a GPU, a CPU without AVX2).
func (b *BatchNorm1d) forwardAcrossComposed(x *torch.Tensor, g *torch.ProcessGroup) *torch.Tensor {
	sum := g.AllReduceSumGrad
	c := x.Size(1)
	rows := torch.Full([]int64{1}, float64(x.Size(0)), x.Options())
	s1 := sum(torch.Cat([]*torch.Tensor{x.SumDim(0, false), rows}, 0))
	n := s1.Narrow(0, c, 1)
	mean := s1.Narrow(0, 0, c).Div(n)
	xc := x.Sub(mean)
	variance := sum(xc.Mul(xc).SumDim(0, false)).Div(n) // biased, as the batch's
	torch.NoGrad(func() {
		m := b.Momentum
		b.RunningMean.CopyFrom(b.RunningMean.MulScalar(1-m).Add(mean.MulScalar(m)), false)
		unbiased := variance.Mul(n).Div(n.AddScalar(-1))
		b.RunningVar.CopyFrom(b.RunningVar.MulScalar(1-m).Add(unbiased.MulScalar(m)), false)
		b.NumBatchesTracked.AddScalarInPlace(1)
	})
	return xc.Div(variance.AddScalar(b.Eps).Sqrt()).Mul(b.Weight).Add(b.Bias)
}
