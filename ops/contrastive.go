package ops

import "github.com/micrograph/micrograph/torch"

// maskedLogit stands for −∞ in a masked row: finite, so that a row with no
// live entry stays finite in log-softmax and in its gradient.
const maskedLogit = -1e4

// GraphSubgraphContrast is the graph-to-subgraph contrastive loss of §6 for
// graph projections z (B×d, W_e·e) and subgraph embeddings s (NumSlots×d) of
// the slots in sub:
//
//	Y_ij = cos(z_i, s_j)/τ over live slots j of the whole batch
//	L = −mean over molecules i with ≥ 1 subgraph of Σ_{j ∈ subgraphs(i)} log softmax_j(Y_i·)_j
//
// Subgraphs of other molecules are the negatives. It is 0 when no molecule
// has a subgraph.
func GraphSubgraphContrast(z, s *torch.Tensor, sub *Subgraphs, tau float64) *torch.Tensor {
	live := sub.Live.Unsqueeze(0)
	y := Cosine(z, s).DivScalar(tau).MaskedFill(live.LogicalNot(), maskedLogit)
	logp := y.LogSoftmax(1)
	graphs := torch.Arange(0, float64(z.Size(0)), 1, torch.Options{DType: torch.Int64, Device: z.Device()})
	positive := sub.SlotGraph().Unsqueeze(0).Eq(graphs.Unsqueeze(1)).LogicalAnd(live)
	perGraph := torch.Where(positive, logp, logp.MulScalar(0)).SumDim(1, false)
	has := positive.ToDType(z.DType()).SumDim(1, false).GtScalar(0).ToDType(z.DType())
	return perGraph.Mul(has).Sum().Neg().Div(has.Sum().ClampMin(1))
}

// NLL is the mean negative log-likelihood −mean_r logp[r, target_r] over the
// rows r where mask (float 0/1; nil for all rows) is 1, and 0 if there are none.
func NLL(logp, target, mask *torch.Tensor) *torch.Tensor {
	picked := logp.Gather(1, target.Unsqueeze(1)).Squeeze(1)
	if mask == nil {
		return picked.Mean().Neg()
	}
	return picked.Mul(mask).Sum().Neg().Div(mask.Sum().ClampMin(1))
}
