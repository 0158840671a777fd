package torch

/*
#include "shim.h"
*/
import "C"

// Embedding is the rows of weight at indices (int64 or int32), shaped
// indices.shape × weight.size(1).
func Embedding(weight, indices *Tensor) *Tensor {
	return newTensor("embedding", func(out *C.mg_tensor) C.mg_error {
		return C.mg_embedding(weight.c(), indices.c(), out)
	})
}

// EmbeddingBagSum is row i = Σ_f weight[indices[i, f]] for indices N×F,
// without materialising the N×F×d lookups (libtorch's embedding_bag, mode
// sum).
func EmbeddingBagSum(weight, indices *Tensor) *Tensor {
	return newTensor("embedding_bag", func(out *C.mg_tensor) C.mg_error {
		return C.mg_embedding_bag_sum(weight.c(), indices.c(), out)
	})
}

// BatchNorm normalises x (N×C) per channel. When training it uses the batch's
// statistics and updates runningMean and runningVar in place with momentum
// (unless they are nil); otherwise it uses the running statistics.
func BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, training bool, momentum, eps float64) *Tensor {
	var rm, rv C.mg_tensor
	if runningMean != nil {
		rm, rv = runningMean.c(), runningVar.c()
	}
	return newTensor("batch_norm", func(out *C.mg_tensor) C.mg_error {
		return C.mg_batch_norm(x.c(), weight.c(), bias.c(), rm, rv, cbool(training), C.double(momentum), C.double(eps), out)
	})
}

// AdamStep applies one Adam (or, with decoupled, AdamW) update to every
// parameter that has a gradient, with PyTorch's update rule. expAvg and
// expAvgSq are the moment estimates; steps[i] counts parameter i's updates and
// is incremented for each parameter updated.
func AdamStep(params, expAvg, expAvgSq []*Tensor, steps []int64, lr, beta1, beta2, eps, weightDecay float64, decoupled bool) {
	adamStep(false, params, expAvg, expAvgSq, steps, lr, beta1, beta2, eps, weightDecay, decoupled)
}

// adamStep is AdamStep (fused false) and FusedAdamStep.
func adamStep(fused bool, params, expAvg, expAvgSq []*Tensor, steps []int64, lr, beta1, beta2, eps, weightDecay float64, decoupled bool) {
	if len(expAvg) != len(params) || len(expAvgSq) != len(params) || len(steps) != len(params) {
		panic(&Error{Op: "adam", Msg: "parameters, moments and steps differ in length"})
	}
	p, m, v := handles(params), handles(expAvg), handles(expAvgSq)
	var e C.mg_error
	if fused {
		e = C.mg_fused_adam_step(firstHandle(p), firstHandle(m), firstHandle(v), int64s(steps), C.int(len(p)),
			C.double(lr), C.double(beta1), C.double(beta2), C.double(eps), C.double(weightDecay), cbool(decoupled))
	} else {
		e = C.mg_adam_step(firstHandle(p), firstHandle(m), firstHandle(v), int64s(steps), C.int(len(p)),
			C.double(lr), C.double(beta1), C.double(beta2), C.double(eps), C.double(weightDecay), cbool(decoupled))
	}
	check("adam", e)
}

// ZeroGrad drops every parameter's gradient (PyTorch's set_to_none, on every
// libtorch version): the next Backward starts from nothing.
func ZeroGrad(params []*Tensor) {
	p := handles(params)
	check("zero_grad", C.mg_zero_grad(firstHandle(p), C.int(len(p))))
}

// ClipGradNorm scales the gradients so that their global L2 norm is at most
// maxNorm, without waiting for the device, and returns the norm before scaling.
func ClipGradNorm(params []*Tensor, maxNorm float64) *Tensor {
	p := handles(params)
	return newTensor("clip_grad_norm", func(out *C.mg_tensor) C.mg_error {
		return C.mg_clip_grad_norm(firstHandle(p), C.int(len(p)), C.double(maxNorm), out)
	})
}
