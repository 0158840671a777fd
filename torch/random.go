package torch

/*
#include "shim.h"
*/
import "C"

import "fmt"

// ManualSeed seeds the default generators of the CPU and of every GPU.
func ManualSeed(seed uint64) {
	check("manual_seed", C.mg_manual_seed(C.uint64_t(seed)))
}

// RNGState is a copy of device d's default generator state (a uint8 tensor on
// the CPU), to be given back to SetRNGState. The CPU's is its Mersenne
// Twister; a GPU's is its Philox seed and offset (16 bytes), which libtorch
// advances on the host when it launches a random kernel, so the state read
// after queuing a step already accounts for that step's draws.
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

// Generators lists the devices whose default generators this process has:
// the CPU, then every GPU. Every random op of libtorch (rand, bernoulli,
// dropout) and FusedDropout, which draws its seed from the CPU generator,
// draws from one of these.
func Generators() []Device {
	devices := []Device{CPU}
	for i := range CUDADeviceCount() {
		devices = append(devices, CUDA(i))
	}
	return devices
}

// RNGStates copies the state of every generator of Generators, named by
// device ("cpu", "cuda:0", …). SetRNGStates puts them back, after which every
// random draw repeats.
func RNGStates() ([]Named, error) {
	var states []Named
	for _, d := range Generators() {
		s, err := RNGState(d)
		if err != nil {
			for _, n := range states {
				n.Tensor.Free()
			}
			return nil, fmt.Errorf("generator %s: %w", d, err)
		}
		states = append(states, Named{Name: d.String(), Tensor: s})
	}
	return states, nil
}

// SetRNGStates restores generators from states named as RNGStates names
// them. A name that is not a device of this process is an error, found before
// any generator is changed; a malformed state stops at its generator.
func SetRNGStates(states []Named) error {
	devices := make([]Device, len(states))
	for i, n := range states {
		d, err := ParseDevice(n.Name)
		if err != nil {
			return fmt.Errorf("generator %q: %w", n.Name, err)
		}
		if d.String() != n.Name {
			return fmt.Errorf("generator %q: name a device as cpu or cuda:N", n.Name)
		}
		devices[i] = d
	}
	for i, n := range states {
		if err := SetRNGState(devices[i], n.Tensor); err != nil {
			return fmt.Errorf("generator %s: %w", n.Name, err)
		}
	}
	return nil
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
