package torch

/*
#include "shim.h"
*/
import "C"

// GENAggregateSupported reports whether the shim has a fused GENAggregate
// kernel for device d.
func GENAggregateSupported(d Device) bool { return C.mg_gen_aggregate_supported(C.int(d.Type)) != 0 }

// GENAggregate is GENConv's message passing with softmax aggregation in one
// fused kernel. For the edges k→i, sorted by destination with CSR offsets
// rowPtr, m_k = ReLU(h[src_k] + e_k) + 1e-7 and, per channel,
//
//	out_i = Σ_k a_k m_k,  a = softmax over the edges of i of t·m
//
// t is a 0-d tensor; with learnT false a is a constant in backpropagation.
// It is deterministic. See GENAggregateSupported for the devices it runs on.
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
