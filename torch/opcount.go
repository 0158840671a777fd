package torch

/*
#include "shim.h"
*/
import "C"

import "runtime"

// CountOps runs fn and returns how many operators libtorch dispatched for it
// on the calling goroutine's thread: every call that enters the dispatcher
// from outside (an at:: function called by the shim, by a composite
// operator's body or by a backward formula), not the redispatches within one
// call (autograd to the kernel). A backward pass run inside fn counts, with
// its gradient formulas, the accumulation of gradients and the creation of
// the seed gradient; operators dispatched by other goroutines (data loaders)
// do not. Kernels that loop by themselves (the shim's fused kernels) count as
// the operators they dispatch, not as their loops.
//
// It is a device-independent proxy for the kernels a step launches. The
// counting callback exists only while fn runs, so there is no cost otherwise.
// One count runs at a time in the process: a CountOps inside fn, or in another
// goroutine meanwhile, panics with *Error.
func CountOps(fn func()) (ops int64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	check("op_count_begin", C.mg_op_count_begin())
	// Counting stops even when fn panics, so that the next count can start.
	defer func() {
		var n C.int64_t
		check("op_count_end", C.mg_op_count_end(&n))
		ops = int64(n)
	}()
	fn()
	return 0
}
