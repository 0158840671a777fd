package ops

import "github.com/micrograph/micrograph/torch"

// SegmentSoftmax normalises edge scores z (E×d) per channel over the incoming
// edges of each destination node (docs/method.md §2):
//
//	a_ji = exp(z_ji − max_{k→i} z_ki) / Σ_{k→i} exp(z_ki − max_{k→i} z_ki)
//
// The maximum is subtracted for stability and detached: softmax does not
// depend on it, so its gradient would cancel anyway.
func SegmentSoftmax(z, rowPtr, dst *torch.Tensor) *torch.Tensor {
	shift := torch.NoGradValue(func() *torch.Tensor { return z.SegmentReduce(rowPtr, torch.ReduceMax).IndexSelect(0, dst) })
	ex := z.Sub(shift).Exp()
	den := ex.SegmentReduce(rowPtr, torch.ReduceSum).IndexSelect(0, dst)
	return ex.Div(den)
}
