package ops

import "github.com/micrograph/micrograph/torch"

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
func GraphSubgraphContrast(z, s *torch.Tensor, sub *Subgraphs, tau float64) *torch.Tensor {
	logp := Cosine(z, s).DivScalar(tau).LogSoftmax(1) // B×J
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
