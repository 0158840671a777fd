package ops

import "github.com/micrograph/micrograph/torch"

// SegmentMean averages the rows of x (R×d, sorted by segment) in segments
// given by CSR offsets (S+1):
//
//	out_s = (1/|s|) Σ_{r ∈ s} x_r,   0 for an empty segment.
//
// Segment reductions visit rows in order, so they are deterministic on every
// device, unlike scatter-adds with atomics.
func SegmentMean(x, offsets *torch.Tensor) *torch.Tensor {
	sum := x.SegmentReduce(offsets, torch.ReduceSum)
	n := offsets.Size(0) - 1
	count := offsets.Narrow(0, 1, n).Sub(offsets.Narrow(0, 0, n)).ClampMin(1).ToDType(x.DType())
	return sum.Div(count.Unsqueeze(1))
}

// SegmentMax is the per-channel maximum of the rows of x in each segment, 0
// for an empty segment. Ties share the gradient.
func SegmentMax(x, offsets *torch.Tensor) *torch.Tensor {
	m := x.SegmentReduce(offsets, torch.ReduceMax)
	return m.MaskedFill(m.IsFinite().LogicalNot(), 0)
}
