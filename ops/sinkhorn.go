package ops

import "github.com/micrograph/micrograph/torch"

// SumReducer completes, in place, a sum over this process's part of a batch
// into the sum over the whole batch, when the batch is split across the
// processes of a data-parallel job (every process calls it in the same
// order with tensors of the same shape); nil when one process holds the
// whole batch.
type SumReducer func(*torch.Tensor)

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
// When the batch is split across processes, q holds this process's nodes
// and across completes the sums that run over nodes (ΣA, the row sums and
// N), so that every process balances over the global batch and gets the
// assignment one process would get for it (docs/method.md §3); the column
// sums belong to one node each and stay local.
func SinkhornAssign(q *torch.Tensor, lambda float64, iters int, across SumReducer) (motif, balanced *torch.Tensor) {
	if across == nil && torch.FusedKernelsFor(q) {
		return torch.FusedSinkhorn(q, lambda, iters)
	}
	return sinkhornComposed(q, lambda, iters, across)
}

// sinkhornComposed is SinkhornAssign from tensor operations: for devices
// without the kernel, and for a batch split across processes.
func sinkhornComposed(q *torch.Tensor, lambda float64, iters int, across SumReducer) (motif, balanced *torch.Tensor) {
	whole := func(t *torch.Tensor) *torch.Tensor {
		if across != nil {
			across(t)
		}
		return t
	}
	a := torch.NoGradValue(func() *torch.Tensor {
		a := q.ToDType(torch.Float32).T().MulScalar(lambda).Exp()
		a = a.Div(whole(a.Sum()))
		k, n := float64(a.Size(0)), float64(a.Size(1))
		columns := func(sums *torch.Tensor) *torch.Tensor { return sums.Reciprocal().MulScalar(1 / n) }
		if across != nil {
			// The global N stays on the device: no host round trip per step.
			global := whole(torch.Full(nil, n, torch.Options{DType: torch.Float32, Device: q.Device()}))
			columns = func(sums *torch.Tensor) *torch.Tensor { return sums.Mul(global).Reciprocal() }
		}
		for range iters {
			a = a.Mul(whole(a.SumDim(1, true)).Reciprocal().MulScalar(1 / k))
			a = a.Mul(columns(a.SumDim(0, true)))
		}
		return a
	})
	return a.Argmax(0, false), a
}
