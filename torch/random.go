package torch

/*
#include "shim.h"
*/
import "C"

// ManualSeed seeds the default generators of the CPU and of every GPU.
func ManualSeed(seed uint64) {
	check("manual_seed", C.mg_manual_seed(C.uint64_t(seed)))
}

// RNGState is a copy of device d's default generator state (a uint8 tensor on
// the CPU), to be saved in checkpoints and given back to SetRNGState.
func RNGState(d Device) (*Tensor, error) {
	var out C.mg_tensor
	if err := checkErr("rng_state", C.mg_rng_state(C.int(d.Type), C.int(d.Index), &out)); err != nil {
		return nil, err
	}
	return wrap(out), nil
}

// SetRNGState restores device d's default generator from a saved state.
func SetRNGState(d Device, state *Tensor) error {
	return checkErr("set_rng_state", C.mg_set_rng_state(C.int(d.Type), C.int(d.Index), state.c()))
}

// Bernoulli draws 1 with probability probs[i] and 0 otherwise, elementwise
// (same dtype as probs).
func Bernoulli(probs *Tensor) *Tensor {
	return newTensor("bernoulli", func(out *C.mg_tensor) C.mg_error { return C.mg_bernoulli(probs.c(), out) })
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1−p) when train is true; otherwise it returns x unchanged (a new handle).
func Dropout(x *Tensor, p float64, train bool) *Tensor {
	return newTensor("dropout", func(out *C.mg_tensor) C.mg_error {
		return C.mg_dropout(x.c(), C.double(p), cbool(train), out)
	})
}
