package ops

import "github.com/micrograph/micrograph/torch"

// SinkhornAssign balances node-to-motif probabilities q (N×K) over the whole
// batch and assigns each node its most likely motif (docs/method.md §3, SwAV form):
//
//	A = exp(λ·qᵀ); A /= ΣA
//	repeat iters: A_k· *= (1/K)/Σ_l A_kl;  A_·l *= (1/N)/Σ_k A_kl
//	motif(l) = argmax_k A_kl
//
// It runs without autograd and always in float32 (exp(λq) reaches e^λ), and
// returns the motif of each node (N, int64) and the balanced A (K×N).
//
// When the batch is split across the processes of group across (nil: one
// process holds the whole batch), q holds this process's nodes, and the sums
// that run over nodes (the row sums and N) are completed over the processes,
// one all-reduce per round, so that every process balances over the global
// batch and gets the assignment one process would get for it
// (docs/method.md §3.3); the column sums belong to one node each and stay
// local. ΣA is not taken there: the first round's row scaling cancels it
// (A_kl/ΣA · (1/K)/(R_k/ΣA) = A_kl·(1/K)/R_k), except with no round.
func SinkhornAssign(q *torch.Tensor, lambda float64, iters int, across *torch.ProcessGroup) (motif, balanced *torch.Tensor) {
	if torch.FusedKernelsFor(q) {
		if across != nil {
			return across.Sinkhorn(q, lambda, iters)
		}
		return torch.FusedSinkhorn(q, lambda, iters)
	}
	return sinkhornComposed(q, lambda, iters, across)
}

// sinkhornComposed is SinkhornAssign from tensor operations, for devices
// without the kernel.
func sinkhornComposed(q *torch.Tensor, lambda float64, iters int, across *torch.ProcessGroup) (motif, balanced *torch.Tensor) {
	a := torch.NoGradValue(func() *torch.Tensor {
		a := q.ToDType(torch.Float32).T().MulScalar(lambda).Exp()
		k, n := float64(a.Size(0)), float64(a.Size(1))
		if across == nil {
			a = a.Div(a.Sum())
			for range iters {
				a = a.Mul(a.SumDim(1, true).Reciprocal().MulScalar(1 / k))
				a = a.Mul(a.SumDim(0, true).Reciprocal().MulScalar(1 / n))
			}
			return a
		}
		g := across.As(torch.CollectiveSinkhorn)
		sum := func(t *torch.Tensor) *torch.Tensor {
			if err := g.AllReduce(t, torch.ReduceSum); err != nil {
				panic(err)
			}
			return t
		}
		// The first all-reduce also counts the global batch's rows (N); it
		// stays on the device: no host round trip per step.
		opts := torch.Options{DType: torch.Float64, Device: q.Device()}
		first := sum(torch.Cat([]*torch.Tensor{a.SumDim(1, false).ToDType(torch.Float64), torch.Full([]int64{1}, n, opts)}, 0))
		rows, global := first.Narrow(0, 0, int64(k)).ToDType(torch.Float32), first.Narrow(0, int64(k), 1).ToDType(torch.Float32)
		if iters == 0 {
			return a.Div(rows.Sum())
		}
		for it := range iters {
			if it > 0 {
				rows = sum(a.SumDim(1, false))
			}
			a = a.Mul(rows.Unsqueeze(1).Reciprocal().MulScalar(1 / k))
			a = a.Mul(a.SumDim(0, true).Mul(global).Reciprocal())
		}
		return a
	})
	return a.Argmax(0, false), a
}
