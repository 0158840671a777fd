package torch

/*
#include "shim.h"
*/
import "C"

// FusedKernels reports whether the shim's fused kernels (GroupMean,
// BlockContrast, Sinkhorn, MinCut) run on device d: they are CPU loops that
// need AVX2 and FMA. Elsewhere, callers compose the same maths from tensor
// ops. Dropout, EmbeddingBagSum and Normalize use kernels by themselves where
// they can.
func FusedKernels(d Device) bool { return C.mg_fused_kernels(C.int(d.Type)) != 0 }

// FusedAggregation reports whether GENAggregate runs on device d: on the CPU
// where FusedKernels does, on CUDA when the shim was built with CUDA.
func FusedAggregation(d Device) bool { return C.mg_fused_aggregation(C.int(d.Type)) != 0 }

// GENAggregate is GENConv's message passing with softmax aggregation in one
// fused kernel. For the edges k→i, sorted by destination with CSR offsets
// rowPtr, m_k = ReLU(h[src_k] + e_k) + 1e-7 and, per channel,
//
//	out_i = Σ_k a_k m_k,  a = softmax over the edges of i of t·m
//
// t is a 0-d tensor; with learnT false a is a constant in backpropagation.
// It is deterministic (on CUDA, the gradient of h is as deterministic as
// index_add). See FusedAggregation for the devices it runs on.
func GENAggregate(h, e, t, src, rowPtr *Tensor, learnT bool) *Tensor {
	return newTensor("gen_aggregate", func(out *C.mg_tensor) C.mg_error {
		return C.mg_gen_aggregate(h.c(), e.c(), t.c(), src.c(), rowPtr.c(), cbool(learnT), out)
	})
}

// EmbeddingBagSum is row i = Σ_f weight[indices[i, f]] for indices N×F,
// without materialising the N×F×d lookups.
func EmbeddingBagSum(weight, indices *Tensor) *Tensor {
	return newTensor("embedding_bag", func(out *C.mg_tensor) C.mg_error {
		return C.mg_embedding_bag_sum(weight.c(), indices.c(), out)
	})
}

// BlockContrast is a contrastive loss over logits y (B × B·per) whose positives
// lie in diagonal blocks: with live (float 1/0, B·per) marking the columns
// that exist,
//
//	L = −mean over rows i with a live column in i·per … i·per+per−1 of
//	    Σ_{live j in that block} log softmax over the live columns of y_i, at j
//
// (0 if no row has one). See FusedKernels for the devices it runs on.
func BlockContrast(y, live *Tensor, per int64) *Tensor {
	return newTensor("block_contrast", func(out *C.mg_tensor) C.mg_error {
		return C.mg_block_contrast(y.c(), live.c(), C.int64_t(per), out)
	})
}

// GroupMean is the weighted mean of rows of x per group:
//
//	out[g] = Σ_p weights_p·x[rows_p] / max(Σ_p weights_p, 1)   over p with groups_p = g
//
// (numGroups×d; 0 for an empty group), accumulated in order, so
// deterministic. The gradient flows into x only. See FusedKernels.
func GroupMean(x, rows, groups, weights *Tensor, numGroups int64) *Tensor {
	return newTensor("group_mean", func(out *C.mg_tensor) C.mg_error {
		return C.mg_group_mean(x.c(), rows.c(), groups.c(), weights.c(), C.int64_t(numGroups), out)
	})
}

// Sinkhorn is the Sinkhorn-Knopp assignment of docs/method.md §3 in one kernel, in
// float32 whatever q's dtype, without autograd: the argmax motif of each row
// of q (N×K) and the balanced matrix A (K×N). See FusedKernels.
func Sinkhorn(q *Tensor, lambda float64, iters int) (motif, balanced *Tensor) {
	var m, a C.mg_tensor
	check("sinkhorn", C.mg_sinkhorn(q.c(), C.double(lambda), C.int(iters), &m, &a))
	return wrap(m), wrap(a)
}

// MinCut is the MinCut regulariser of docs/method.md §5 per molecule, in one kernel
// with its backward: for soft assignments q (N×K) on a destination-sorted CSR
// graph (rowPtr, src) whose molecules own the node ranges graphPtr,
//
//	cut_g   = −Σ_{(u→v)∈E_g} ⟨q_u, q_v⟩ / Σ_{u∈V_g} deg(u)·‖q_u‖²   (0 without edges)
//	ortho_g = ‖ q_gᵀq_g / ‖q_gᵀq_g‖_F − I/√J ‖_F
//
// over all K columns (selected nil) or the J selected ones (B×K, 1/0; ortho_g
// is 0 when J = 0). It returns cut and ortho (B each). See FusedKernels.
func MinCut(q, rowPtr, src, graphPtr, selected *Tensor) (cut, ortho *Tensor) {
	var sel C.mg_tensor
	if selected != nil {
		sel = selected.c()
	}
	var c, o C.mg_tensor
	check("mincut", C.mg_mincut(q.c(), rowPtr.c(), src.c(), graphPtr.c(), sel, &c, &o))
	return wrap(c), wrap(o)
}
