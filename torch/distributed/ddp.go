package distributed

import (
	"fmt"

	"github.com/micrograph/micrograph/torch"
)

// BroadcastFrom0 gives every rank rank 0's values of tensors (contiguous,
// in the same order on every rank): a data-parallel job starts from one
// model.
func BroadcastFrom0(g *torch.ProcessGroup, tensors []torch.Named) error {
	for _, n := range tensors {
		if err := g.Broadcast(n.Tensor, 0); err != nil {
			return fmt.Errorf("broadcasting %s from rank 0: %w", n.Name, err)
		}
	}
	return nil
}

// BucketBytes bounds a gradient bucket (torch.GradientSum): small enough
// that the paper-sized model's 3.15 MB of gradients make a few buckets, the
// first of which (the objective's projections and the motif table) starts
// summing while the encoder's backward pass still runs, large enough that
// each all-reduce moves much more than its latency costs (PyTorch DDP's
// first bucket is 1 MiB too).
const BucketBytes = 1 << 20

// GatherRows returns a function that stacks every rank's rows of a matrix
// in rank order as part of the autograd graph (ops.RowGatherer), with where
// this rank's rows start; nil for a group of one. It costs an all-gather of
// the row counts, and an all-reduce of the stacked matrix forward and of its
// gradient backward: each rank's rows are placed at their offset in a
// matrix of zeros, which the ranks sum (exactly: every entry is one rank's
// value plus zeros), and backpropagation sums the ranks' gradients of it.
// They count as the profile's negatives. A failing collective panics with
// its *torch.Error.
func GatherRows(g *torch.ProcessGroup) func(*torch.Tensor) (*torch.Tensor, int64) {
	if g == nil || g.Size() == 1 {
		return nil
	}
	g = g.As(torch.CollectiveNegativesForward)
	return func(x *torch.Tensor) (*torch.Tensor, int64) {
		n := x.Size(0)
		counts, err := g.AllGather(torch.Full([]int64{1}, float64(n), torch.Options{DType: torch.Int64, Device: x.Device()}))
		if err != nil {
			panic(err)
		}
		var offset, total int64
		for r, c := range torch.ToSlice[int64](counts.To(torch.CPU, false)) {
			if r < g.Rank() {
				offset += c
			}
			total += c
		}
		if total == 0 {
			return x, 0 // no rank has a row: nothing to send (the same on every rank)
		}
		opts := torch.Options{DType: x.DType(), Device: x.Device()}
		d := x.Size(1)
		placed := torch.Cat([]*torch.Tensor{torch.Zeros([]int64{offset, d}, opts), x, torch.Zeros([]int64{total - offset - n, d}, opts)}, 0)
		return g.AllReduceSumGrad(placed), offset
	}
}
