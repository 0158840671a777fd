package ops

import (
	"math"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// MinCut is the MinCut regulariser of §5 (Bianchi et al. 2020) on soft
// assignments q (N×K), per molecule g in sparse form:
//
//	cut_g   = −Σ_{(u→v)∈E_g} ⟨q_u, q_v⟩ / Σ_{u∈V_g} deg(u)·‖q_u‖²      (0 without edges)
//	ortho_g = ‖ q_gᵀq_g / ‖q_gᵀq_g‖_F − I_K/√K ‖_F
//
// It returns the means over molecules of cut_g and ortho_g (0-d each); L_reg
// is their sum. With selected (B×K, 0/1; nil for all columns) ortho_g uses
// only the J_g selected columns, as the paper writes it, and is 0 when J_g = 0.
func MinCut(q *torch.Tensor, g *graph.Graph, selected *torch.Tensor) (cut, ortho *torch.Tensor) {
	if torch.FusedKernelsFor(q) {
		cutG, orthoG := torch.FusedMinCut(q, g.RowPtr, g.Src, g.GraphPtr, selected)
		return cutG.Mean(), orthoG.Mean()
	}
	return minCutComposed(q, g, selected)
}

// minCutNormFloor is the floor of the molecules' cut denominators and Gram
// norms, as kMinCutNormFloor in the fused kernel (torch/shim/kernels/mincut.h).
const minCutNormFloor = 1e-30

// minCutComposed is MinCut for devices without the kernel.
func minCutComposed(q *torch.Tensor, g *graph.Graph, selected *torch.Tensor) (cut, ortho *torch.Tensor) {
	dt := q.DType()
	k := q.Size(1)
	edgeDot := q.IndexSelect(0, g.Src).Mul(q.IndexSelect(0, g.Dst)).SumDim(1, true)
	num := edgeDot.SegmentReduce(g.EdgePtr(), torch.ReduceSum).Squeeze(1)
	den := g.Degree.ToDType(dt).Mul(q.Mul(q).SumDim(1, false)).Unsqueeze(1).SegmentReduce(g.GraphPtr, torch.ReduceSum).Squeeze(1)
	cutG := torch.Where(den.GtScalar(0), num.Neg().Div(den.ClampMin(minCutNormFloor)), den.MulScalar(0))

	// q_gᵀq_g for every molecule, as one batched product over the padded
	// layout (padding rows are 0 and add nothing).
	qp := g.Padded(q)
	gram := qp.Transpose(1, 2).MatMul(qp).Reshape(g.NumGraphs, k*k)
	eye := torch.Arange(0, float64(k), 1, torch.Options{DType: torch.Int64, Device: q.Device()}).OneHot(k).ToDType(dt).Reshape(1, k*k)
	var target, j *torch.Tensor
	if selected == nil {
		target = eye.MulScalar(1 / math.Sqrt(float64(k)))
	} else {
		sel := selected.ToDType(dt)
		gram = gram.Mul(sel.Unsqueeze(2).Mul(sel.Unsqueeze(1)).Reshape(g.NumGraphs, k*k))
		j = sel.SumDim(1, true)
		target = eye.Mul(sel.Unsqueeze(2).Expand(-1, -1, k).Reshape(g.NumGraphs, k*k)).Div(j.ClampMin(1).Sqrt())
	}
	fro := gram.NormDim(2, 1, true)
	orthoG := gram.Div(fro.ClampMin(minCutNormFloor)).Sub(target).NormDim(2, 1, false)
	if selected != nil {
		orthoG = orthoG.Mul(j.Squeeze(1).GtScalar(0).ToDType(dt))
	}
	return cutG.Mean(), orthoG.Mean()
}
