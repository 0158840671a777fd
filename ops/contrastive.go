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
	if torch.FusedKernelsFor(z) {
		return torch.FusedBlockContrast(Cosine(z, s).DivScalar(tau), sub.Live.ToDType(z.DType()), sub.PerGraph)
	}
	return blockContrast(z, s, sub, tau)
}

// blockContrast is GraphSubgraphContrast for devices without the kernel.
func blockContrast(z, s *torch.Tensor, sub *Subgraphs, tau float64) *torch.Tensor {
	b, per := z.Size(0), sub.PerGraph
	y := Cosine(z, s).DivScalar(tau).MaskedFill(sub.Live.LogicalNot().Unsqueeze(0), maskedLogit)
	logp := y.LogSoftmax(1) // B × B·S
	// Molecule i's own slots are i·S … i·S+S−1: gather those diagonal blocks,
	// entry i·(B·S+S)+k of the flattened B×B·S matrix.
	ints := torch.Options{DType: torch.Int64, Device: z.Device()}
	rows := torch.Arange(0, float64(b), 1, ints).MulScalar(float64(b*per + per)).Unsqueeze(1)
	own := logp.Reshape(-1).IndexSelect(0, rows.Add(torch.Arange(0, float64(per), 1, ints).Unsqueeze(0)).Reshape(-1))
	live := sub.Live.ToDType(z.DType()).Reshape(b, per)
	perGraph := own.Reshape(b, per).Mul(live).SumDim(1, false)
	has := live.SumDim(1, false).GtScalar(0).ToDType(z.DType())
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
