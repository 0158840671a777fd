package torch

/*
#include "shim.h"
*/
import "C"

// SetRequiresGrad turns autograd recording on or off for a leaf tensor and
// returns t.
func (t *Tensor) SetRequiresGrad(b bool) *Tensor {
	check("requires_grad_", C.mg_set_requires_grad(t.c(), cbool(b)))
	return t
}

// Detach is t without autograd history (same memory).
func (t *Tensor) Detach() *Tensor {
	return newTensor("detach", func(out *C.mg_tensor) C.mg_error { return C.mg_detach(t.c(), out) })
}

// Grad is the gradient accumulated into t by Backward, or nil if there is none.
func (t *Tensor) Grad() *Tensor {
	return newTensor("grad", func(out *C.mg_tensor) C.mg_error { return C.mg_grad(t.c(), out) })
}

// Backward computes the gradient of the scalar t with respect to every leaf
// that requires grad, accumulating into their Grad.
func (t *Tensor) Backward() {
	check("backward", C.mg_backward(t.c()))
}
