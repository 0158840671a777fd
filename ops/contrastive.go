package ops

import "github.com/micrograph/micrograph/torch"

// RowGatherer stacks every process's rows of a matrix, in rank order, when
// the batch is split across the processes of a data-parallel job, as part of
// the autograd graph: each process's rows receive the sum of every
// process's gradients for them. It also returns where this process's rows
// start. Every process calls it in the same order with matrices of the same
// width; nil when one process holds the whole batch.
type RowGatherer func(rows *torch.Tensor) (all *torch.Tensor, offset int64)

// GraphSubgraphContrast is the graph-to-subgraph contrastive loss of §6 for
// graph projections z (B×d, W_e·e) and the embeddings s of sub's subgraphs
// (J×d, sub.LiveRows of the slot embeddings):
//
//	Y_ij = cos(z_i, s_j)/τ over the subgraphs j of the whole batch (live slots)
//	L = −Σ_j log softmax(Y_{g(j)·})_j / |{molecules with ≥ 1 subgraph}|
//
// where g(j) is subgraph j's molecule: each molecule's own subgraphs are its
// positives, the others' its negatives. It is 0 when no molecule has a
// subgraph.
//
// When the batch is split across processes, across (if not nil) gives each
// molecule the subgraphs of every process's part as negatives, as one
// process would (docs/method.md §3.3); the loss is still this process's
// molecules' sum over their count. With across nil, the negatives are this
// process's part's subgraphs only.
func GraphSubgraphContrast(z, s *torch.Tensor, sub *Subgraphs, tau float64, across RowGatherer) *torch.Tensor {
	all, offset := s, int64(0)
	if across != nil {
		all, offset = across(s)
	}
	logp := Cosine(z, all).DivScalar(tau).LogSoftmax(1) // B×J, J every process's subgraphs with across
	if across != nil {
		logp = logp.Narrow(1, offset, s.Size(0)) // this process's subgraphs, whose molecules are here
	}
	own := logp.Gather(0, sub.LiveSlots.FloorDivideScalar(float64(sub.PerGraph)).Unsqueeze(0))
	molecules := sub.LiveWeight.ToDType(z.DType()).Reshape(z.Size(0), sub.PerGraph).Amax(1, false).Sum()
	return own.Sum().Neg().Div(molecules.ClampMin(1))
}

// NLL is the mean negative log-likelihood −mean_r logp[r, target_r], 0
// without rows.
func NLL(logp, target *torch.Tensor) *torch.Tensor {
	picked := logp.Gather(1, target.Unsqueeze(1)).Squeeze(1)
	return picked.Sum().Neg().DivScalar(float64(max(picked.Size(0), 1)))
}
