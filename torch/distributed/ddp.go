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

// BucketBytes bounds a gradient bucket (PyTorch DDP's default is 25 MiB):
// large enough that each all-reduce moves much more than its latency costs,
// small enough that the flat copy stays a fraction of the model.
const BucketBytes = 25 << 20

// SumGradients replaces every parameter's gradient by the sum of the ranks'
// gradients, through one all-reduce per bucket of at most BucketBytes: the
// gradients are copied into a flat buffer, reduced, and copied back. A
// parameter without a gradient on this rank contributes zeros and keeps no
// gradient (the optimiser skips it, as a single process would).
func SumGradients(g *torch.ProcessGroup, params []*torch.Tensor) error {
	if g.Size() == 1 {
		return nil
	}
	g = g.As(torch.CollectiveGradients)
	s := torch.NewScope()
	defer s.Close()
	var bucket []*torch.Tensor // the gradients of the bucket's parameters; nil where none
	var members []*torch.Tensor
	var bytes int64
	flush := func() error {
		if len(members) == 0 {
			return nil
		}
		flat := make([]*torch.Tensor, len(members))
		for i, p := range members {
			if bucket[i] != nil {
				flat[i] = bucket[i].Reshape(-1)
			} else {
				flat[i] = torch.Zeros([]int64{p.Numel()}, p.Options())
			}
		}
		buf := torch.Cat(flat, 0)
		if err := g.AllReduce(buf, torch.ReduceSum); err != nil {
			return fmt.Errorf("summing gradients across ranks: %w", err)
		}
		var off int64
		for i, p := range members {
			n := p.Numel()
			if bucket[i] != nil {
				bucket[i].CopyFrom(buf.Narrow(0, off, n).Reshape(p.Shape()...), false)
			}
			off += n
		}
		bucket, members, bytes = bucket[:0], members[:0], 0
		return nil
	}
	for _, p := range params {
		size := p.Numel() * int64(p.DType().Size())
		if len(members) > 0 && (bytes+size > BucketBytes || p.DType() != members[0].DType()) {
			if err := flush(); err != nil {
				return err
			}
		}
		bucket = append(bucket, p.Grad())
		members = append(members, p)
		bytes += size
	}
	return flush()
}

// SumAcross returns a function that completes a per-rank sum into the sum
// over every rank, in place (ops.SumReducer); nil for a group of one, where
// the sum is already whole. A failing all-reduce panics with its
// *torch.Error, as failures in tensor math do.
func SumAcross(g *torch.ProcessGroup) func(*torch.Tensor) {
	if g == nil || g.Size() == 1 {
		return nil
	}
	g = g.As(torch.CollectiveSinkhorn)
	return func(t *torch.Tensor) {
		if err := g.AllReduce(t, torch.ReduceSum); err != nil {
			panic(err)
		}
	}
}

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
