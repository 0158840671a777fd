package torch

/*
#include "shim.h"
*/
import "C"

// The fused kernels are the shim's hand-written kernels (shim/kernels/, one
// file family per kernel, its maths in kernels/<name>.h): one pass over the
// data instead of a chain of tensor ops, forward and backward. Every other
// function of this package is libtorch's; a fused kernel runs only where it
// is called by name, after its caller checked FusedKernelsFor (or
// FusedAggregation) and chose it over the equivalent libtorch composition.
// On the CPU they need AVX2 and FMA and take float32 and float64 tensors; a
// call they cannot take panics with *Error.

// GENMessageEpsilon is the ε of GENConv's messages m = ReLU(h + e) + ε
// (docs/method.md §2), which FusedGENAggregate adds as kGENMessageEpsilon
// (shim/kernels/gen_aggregate.h); the composed form adds this constant.
const GENMessageEpsilon = 1e-7

// FusedKernels reports whether the fused CPU kernels run on device d: d is
// the CPU, and it has AVX2 and FMA.
func FusedKernels(d Device) bool { return C.mg_fused_kernels(C.int(d.Type)) != 0 }

// KernelVectorBits is the vector width, in bits, the fused CPU kernels'
// lane-wise loops run at: 512 on a CPU with AVX-512 (unless
// MICROGRAPH_NO_AVX512 is set), 256 with AVX2 and FMA, 0 where they do not
// run. Their results are the same bits at either width.
func KernelVectorBits() int { return int(C.mg_kernel_isa()) }

// FusedKernelsFor reports whether the fused CPU kernels take x: float32 or
// float64 on a device where FusedKernels holds.
func FusedKernelsFor(x *Tensor) bool {
	dt := x.DType()
	return (dt == Float32 || dt == Float64) && FusedKernels(x.Device())
}

// FusedAggregation reports whether FusedGENAggregate runs on device d: on the
// CPU where FusedKernels does, on CUDA when the shim was built with CUDA.
func FusedAggregation(d Device) bool { return C.mg_fused_aggregation(C.int(d.Type)) != 0 }

// FusedGENAggregate is GENConv's message passing with softmax aggregation
// (docs/method.md §2; shim/kernels/gen_aggregate.h) in one kernel: for the
// edges src→i sorted by destination with CSR offsets rowPtr, each node's
// own h_i plus the softmax-weighted (temperature t, a 0-d tensor) sum of its
// incoming messages ReLU(h[src] + table[bond]) + GENMessageEpsilon: the
// input of GENConv's MLP. Edge k's
// bond embedding is row bond[k] of table (every combination of bond features
// once: no edge-sized bond tensor, nor its gradient, is made). With learnT
// false the weights are constants in backpropagation. It is deterministic
// (on CUDA, the gradients of h and table are as deterministic as index_add).
func FusedGENAggregate(h, table, bond, t, src, rowPtr *Tensor, learnT bool) *Tensor {
	return newTensor("gen_aggregate", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_gen_aggregate(h.c(), table.c(), bond.c(), t.c(), src.c(), rowPtr.c(), cbool(learnT), out)
	})
}

// FusedBatchNorm is BatchNorm in training mode with running statistics, for
// 2-d x (shim/kernels/batch_norm.h).
func FusedBatchNorm(x, weight, bias, runningMean, runningVar *Tensor, momentum, eps float64) *Tensor {
	return newTensor("batch_norm", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_batch_norm(x.c(), weight.c(), bias.c(), runningMean.c(), runningVar.c(),
			C.double(momentum), C.double(eps), out)
	})
}

// NormDropout is what FusedBatchNormDropout applies after the batch norm:
// dropout of probability P, 0 < P < 1, after a ReLU when ReLU.
type NormDropout struct {
	P    float64
	ReLU bool
}

// FusedBatchNormDropout is FusedDropout(FusedBatchNorm(x, …), d.P), or
// FusedReluDropout when d.ReLU, bit for bit and with the same generator
// draw, without ever storing the batch norm's output: backward gates the
// gradient by the output (after a ReLU) or by the mask's seed
// (shim/kernels/batch_norm.h).
func FusedBatchNormDropout(x, weight, bias, runningMean, runningVar *Tensor, momentum, eps float64, d NormDropout) *Tensor {
	return newTensor("batch_norm_dropout", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_batch_norm_dropout(x.c(), weight.c(), bias.c(), runningMean.c(), runningVar.c(),
			C.double(momentum), C.double(eps), C.double(d.P), cbool(d.ReLU), out)
	})
}

// FusedLinearResidual is Linear(x, weight, bias).Add(residual) for 2-d x,
// bit for bit, with one pass after the product instead of two: the bias is
// added with the residual rather than copied into every row for the
// product (shim/kernels/linear_residual.h).
func FusedLinearResidual(x, weight, bias, residual *Tensor) *Tensor {
	return newTensor("linear_residual", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_linear_residual(x.c(), weight.c(), bias.c(), residual.c(), out)
	})
}

// FusedNormalize is x.Normalize(2, 1, eps) for 2-d x: each row over
// max(its L2 norm, eps) (shim/kernels/normalize.h).
func FusedNormalize(x *Tensor, eps float64) *Tensor {
	return newTensor("normalize", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_normalize(x.c(), C.double(eps), out)
	})
}

// FusedAdamStep is AdamStep with one loop per parameter
// (shim/kernels/adam.h); every parameter with a gradient must be a
// contiguous tensor the kernels take, with moments of its shape and dtype.
func FusedAdamStep(params, expAvg, expAvgSq []*Tensor, steps []int64, lr, beta1, beta2, eps, weightDecay float64, decoupled bool) {
	adamStep(true, params, expAvg, expAvgSq, steps, lr, beta1, beta2, eps, weightDecay, decoupled)
}

// FusedDropout is Dropout in training mode, 0 < p < 1, with a mask hashed
// from one seed drawn from the CPU generator (shim/kernels/dropout.h): its
// masks differ from Dropout's, and follow ManualSeed and SetRNGStates as
// Dropout's do.
func FusedDropout(x *Tensor, p float64) *Tensor {
	return newTensor("dropout", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_dropout(x.c(), C.double(p), out)
	})
}

// FusedReluDropout is FusedDropout(x.Relu(), p), bit for bit, in one pass
// forward and one backward: the ReLU's gate joins the mask.
func FusedReluDropout(x *Tensor, p float64) *Tensor {
	return newTensor("relu_dropout", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_relu_dropout(x.c(), C.double(p), out)
	})
}

// FusedEmbeddingBagSum is EmbeddingBagSum with a deterministic backward
// (shim/kernels/embedding_bag_sum.h).
func FusedEmbeddingBagSum(weight, indices *Tensor) *Tensor {
	return newTensor("embedding_bag", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_embedding_bag_sum(weight.c(), indices.c(), out)
	})
}

// FusedGroupMean is the weighted mean of rows of x per group
// (shim/kernels/group_mean.h):
//
//	out[g] = Σ_p weights_p·x[rows_p] / max(Σ_p weights_p, 1)   over p with groups_p = g
//
// (numGroups×d; 0 for an empty group), accumulated in order, so
// deterministic. The gradient flows into x only.
func FusedGroupMean(x, rows, groups, weights *Tensor, numGroups int64) *Tensor {
	return newTensor("group_mean", func(out *C.mg_tensor) C.mg_error {
		return C.mg_fused_group_mean(x.c(), rows.c(), groups.c(), weights.c(), C.int64_t(numGroups), out)
	})
}

// FusedSinkhorn is the Sinkhorn-Knopp assignment of docs/method.md §3
// (shim/kernels/sinkhorn.h), in float32 whatever q's dtype, without
// autograd: the argmax motif of each row of q (N×K) and the balanced matrix
// A (K×N).
func FusedSinkhorn(q *Tensor, lambda float64, iters int) (motif, balanced *Tensor) {
	var m, a C.mg_tensor
	check("sinkhorn", C.mg_fused_sinkhorn(q.c(), C.double(lambda), C.int(iters), &m, &a))
	return wrap(m), wrap(a)
}

// FusedMinCut is the MinCut regulariser of docs/method.md §5 per molecule,
// with its backward (shim/kernels/mincut.h): for soft assignments q (N×K) on
// a destination-sorted CSR graph (rowPtr, src) whose molecules own the node
// ranges graphPtr, cut_g and ortho_g (B each), the orthogonality term over
// all K columns (selected nil) or the selected ones (B×K, 1/0).
func FusedMinCut(q, rowPtr, src, graphPtr, selected *Tensor) (cut, ortho *Tensor) {
	var sel C.mg_tensor
	if selected != nil {
		sel = selected.c()
	}
	var c, o C.mg_tensor
	check("mincut", C.mg_fused_mincut(q.c(), rowPtr.c(), src.c(), graphPtr.c(), sel, &c, &o))
	return wrap(c), wrap(o)
}
