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
func SinkhornAssign(q *torch.Tensor, lambda float64, iters int) (motif, balanced *torch.Tensor) {
	if torch.FusedKernelsFor(q) {
		return torch.FusedSinkhorn(q, lambda, iters)
	}
	return sinkhornComposed(q, lambda, iters)
}

// sinkhornComposed is SinkhornAssign for devices without the kernel.
func sinkhornComposed(q *torch.Tensor, lambda float64, iters int) (motif, balanced *torch.Tensor) {
	torch.NoGrad(func() {
		a := q.ToDType(torch.Float32).T().MulScalar(lambda).Exp()
		a = a.Div(a.Sum())
		k, n := float64(a.Size(0)), float64(a.Size(1))
		for range iters {
			a = a.Mul(a.SumDim(1, true).Reciprocal().MulScalar(1 / k))
			a = a.Mul(a.SumDim(0, true).Reciprocal().MulScalar(1 / n))
		}
		motif, balanced = a.Argmax(0, false), a
	})
	return motif, balanced
}
