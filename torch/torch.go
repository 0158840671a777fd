// Package torch is micrograph's binding of libtorch.
//
// It calls libtorch through a small C shim (folder shim/, built by `make shim`
// into build/lib/libmgtorch.so) and links only against that library, so one Go
// binary runs on Debian's CPU libtorch 1.13 and on PyTorch 2.x's CUDA libtorch
// by swapping the shim (LD_LIBRARY_PATH).
//
// Errors. The policy is one for the whole program:
//
//   - Inside the binding, a failed tensor op (shapes that do not broadcast, a
//     wrong dtype, CUDA out of memory) panics with a *Error: tensor maths
//     reads as maths, without an error check per op. I/O, loading and device
//     set-up return errors instead. No C++ exception ever aborts the process.
//   - Each library entry point above the binding (pre-training, evaluation,
//     export, reports: the functions cmd/ calls) turns such a panic back into
//     an error once, with `defer torch.Recover(&err)` at its top, and returns
//     it; Catch does the same around a function literal. Code in between
//     neither recovers nor wraps, so the user sees one line, never a stack
//     trace. A panic that does not carry a *Error is a bug and is not caught.
//
// Fused kernels. Every tensor function is libtorch's, except those named
// Fused…: hand-written kernels (shim/kernels/) that callers choose by name
// where FusedKernelsFor or FusedAggregation says they run (see fused.go).
//
// Process settings. TuneAllocator, which the micrograph program calls first,
// sets how CPU tensor memory is kept for reuse, for the whole process; loading the
// package changes nothing.
//
// Memory. Tensors hold libtorch memory that Go's garbage collector cannot see,
// so it is freed deterministically: Free releases one tensor, and a Scope
// releases every tensor created while it was open. A tensor that is garbage
// collected without being freed is freed then and counted by LeakedTensors.
//
// Threads. libtorch keeps grad mode and the scope stack per OS thread, so
// NewScope and NoGrad lock the calling goroutine to its thread while they are
// in effect; a training loop should call runtime.LockOSThread once and drive
// libtorch from that goroutine only. SetNumThreads bounds intra-op threads.
package torch

/*
#cgo CFLAGS: -I${SRCDIR}/shim
#cgo LDFLAGS: -L${SRCDIR}/../build/lib -Wl,-rpath,${SRCDIR}/../build/lib -lmgtorch
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"os"
	"unsafe"
)

// Error is a failure reported by libtorch: the operation and libtorch's message.
type Error struct {
	Op  string
	Msg string
}

func (e *Error) Error() string { return "torch: " + e.Op + ": " + e.Msg }

// takeError converts and frees a shim error; nil stays nil.
func takeError(op string, e C.mg_error) *Error {
	if e == nil {
		return nil
	}
	msg := C.GoString(e)
	C.free(unsafe.Pointer(e))
	return &Error{Op: op, Msg: msg}
}

// check panics with the shim's error, if any.
func check(op string, e C.mg_error) {
	if err := takeError(op, e); err != nil {
		panic(err)
	}
}

// checkErr returns the shim's error, if any, as a Go error.
func checkErr(op string, e C.mg_error) error {
	if err := takeError(op, e); err != nil {
		return err
	}
	return nil
}

// Catch runs fn and returns the *Error it panicked with, or nil. Other panics
// propagate unchanged.
func Catch(fn func()) (err error) {
	defer Recover(&err)
	fn()
	return nil
}

// Recover, deferred at the top of a function that returns an error
// (`defer torch.Recover(&err)`), turns a panic carrying a *Error into that
// function's error; any other panic propagates unchanged. See the package
// doc's error policy.
func Recover(err *error) {
	r := recover()
	if r == nil {
		return
	}
	var te *Error
	if e, ok := r.(error); ok && errors.As(e, &te) {
		*err = te
		return
	}
	panic(r)
}

// TuneAllocator sets up the process's memory for training, once: libtorch's
// CPU tensors of 1 MiB and more come from a pool that keeps freed blocks for
// reuse (rounded up to eight size classes per power of two), and glibc keeps
// smaller freed memory in its heap. Each step allocates and frees the same
// tensors, the largest tens of megabytes; by default glibc hands those back
// to the kernel and the next step faults them in again, zeroed, page by
// page. The pool never shrinks: it holds at most what one step held at once.
// The glibc part is skipped, and TuneAllocator reports false, when the
// environment sets MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or
// MALLOC_TOP_PAD_, which take precedence.
func TuneAllocator() bool { return C.mg_tune_allocator() != 0 }

// PoolStats counts the CPU pool's blocks since TuneAllocator (zero before).
type PoolStats struct {
	Allocated   int64 // blocks obtained from the system
	Reused      int64 // allocations served by a freed block
	PooledBytes int64 // bytes obtained from the system, never returned
}

// CPUPoolStats reports the CPU pool's counts.
func CPUPoolStats() PoolStats {
	s := C.mg_cpu_pool_stats()
	return PoolStats{Allocated: int64(s.allocated), Reused: int64(s.reused), PooledBytes: int64(s.pooled_bytes)}
}

// Version is the version of the libtorch the shim was built against.
func Version() string { return C.GoString(C.mg_torch_version()) }

// SetNumThreads sets the number of intra-op threads libtorch uses; n < 1
// panics with *Error.
func SetNumThreads(n int) { check("set_num_threads", C.mg_set_num_threads(C.int(n))) }

// NumThreads is the number of intra-op threads libtorch uses.
func NumThreads() int { return int(C.mg_get_num_threads()) }

// OpenBLASCore names the kernels OpenBLAS, which does Debian's libtorch's
// matrix products on the CPU, chose for this CPU when it was loaded (such
// as "Haswell" or "SkylakeX"); "" when libtorch uses no OpenBLAS.
func OpenBLASCore() string {
	if c := C.mg_openblas_core(); c != nil {
		return C.GoString(c)
	}
	return ""
}

// SetDeterministic makes libtorch use deterministic algorithms only, and fail
// where an operation has none (PyTorch's use_deterministic_algorithms).
// Turned on, it also gives cuBLAS the fixed workspace its deterministic
// products need (CUBLAS_WORKSPACE_CONFIG=:4096:8, unless set), which cuBLAS
// reads when the process first uses it: call it before any GPU work.
func SetDeterministic(on bool) error {
	if on && os.Getenv("CUBLAS_WORKSPACE_CONFIG") == "" {
		os.Setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
	}
	return checkErr("set_deterministic", C.mg_set_deterministic(cbool(on)))
}
