package torch

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
)

// Scope owns every tensor created on its goroutine while it is open and frees
// them all on Close, except those passed to Keep. Typical use is one scope per
// training step:
//
//	s := torch.NewScope()
//	defer s.Close()
//	loss := model.Loss(batch) // every temporary joins s
//	loss.Backward()
//
// Scopes nest and must be closed in reverse order, on the goroutine that opened
// them; NewScope locks that goroutine to its OS thread until Close. Tensors
// created by other goroutines never join the scope.
type Scope struct {
	id      uint64
	parent  *Scope
	tensors []*Tensor
	closed  bool
}

var scopes = struct {
	sync.Mutex
	next uint64
	byID map[uint64]*Scope
}{byID: map[uint64]*Scope{}}

func lookupScope(id uint64) *Scope {
	scopes.Lock()
	defer scopes.Unlock()
	return scopes.byID[id]
}

// NewScope opens a scope on the calling goroutine.
func NewScope() *Scope {
	runtime.LockOSThread()
	scopes.Lock()
	scopes.next++
	s := &Scope{id: scopes.next}
	scopes.byID[s.id] = s
	scopes.Unlock()
	if prev := uint64(C.mg_scope_push(C.uint64_t(s.id))); prev != 0 {
		s.parent = lookupScope(prev)
	}
	return s
}

// Keep moves t out of s into the enclosing scope, or to the caller when s is
// outermost, so that it outlives Close. It returns t.
func (s *Scope) Keep(t *Tensor) *Tensor {
	if t == nil || t.scope != s {
		return t
	}
	t.scope = s.parent
	if s.parent != nil {
		s.parent.tensors = append(s.parent.tensors, t)
	} else if t.h != nil {
		t.guard()
	}
	return t
}

// Unscope takes t out of its scope, if any: the caller now owns it and frees
// it. Long-lived tensors created while a scope is open (parameters, optimizer
// state) use it. It returns t.
func (t *Tensor) Unscope() *Tensor {
	if t != nil && t.scope != nil {
		t.scope = nil
		if t.h != nil {
			t.guard()
		}
	}
	return t
}

// Close frees every tensor of the scope that was not kept. Closing twice is
// harmless; closing a scope while a scope opened inside it is still open panics.
func (s *Scope) Close() {
	if s.closed {
		return
	}
	if C.mg_scope_pop(C.uint64_t(s.id)) == 0 {
		panic(&Error{Op: "scope", Msg: "closed out of order or on another goroutine"})
	}
	s.closed = true
	for _, t := range s.tensors {
		if t.scope == s {
			t.Free()
		}
	}
	s.tensors = nil
	scopes.Lock()
	delete(scopes.byID, s.id)
	scopes.Unlock()
	runtime.UnlockOSThread()
}

// NoGrad runs fn with autograd recording disabled on this goroutine.
func NoGrad(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := C.mg_set_grad_enabled(0)
	defer C.mg_set_grad_enabled(prev)
	fn()
}

// NoGradValue returns fn's result, computed with autograd recording disabled
// on this goroutine, as tch-rs's no_grad(|| …) does:
//
//	target := torch.NoGradValue(func() *torch.Tensor { return logP.Argmax(1, false) })
func NoGradValue[T any](fn func() T) T {
	var v T
	NoGrad(func() { v = fn() })
	return v
}

// Scoped runs fn in a scope of its own and returns fn's result, kept into
// the enclosing scope: every other tensor fn makes is freed when it returns
// (autograd keeps what backpropagation needs). A layer's temporaries then go
// as soon as it is done, and later ops reuse warm memory.
func Scoped(fn func() *Tensor) *Tensor {
	s := NewScope()
	defer s.Close()
	return s.Keep(fn())
}

// ScopedValue runs fn in a scope of its own and returns fn's result: every
// tensor fn makes is freed when it returns, so the result holds host values
// (numbers, slices), never a tensor made inside.
func ScopedValue[T any](fn func() T) T {
	s := NewScope()
	defer s.Close()
	return fn()
}
