package torch

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Tensor is a handle to a libtorch tensor. Its memory is released by Free or
// by the Scope it was created in; using it afterwards panics.
type Tensor struct {
	h       C.mg_tensor
	scope   *Scope          // owning scope; nil when the caller owns it
	cleanup runtime.Cleanup // leak safety net, set only while unscoped
	guarded bool
}

var leaked atomic.Int64
var leakWarning sync.Once

// LiveTensors is the number of tensor handles currently allocated by the shim.
func LiveTensors() int64 { return int64(C.mg_live_tensors()) }

// LeakedTensors counts tensors that were garbage collected without being freed.
func LeakedTensors() int64 { return leaked.Load() }

// wrap takes ownership of a new handle. The shim tagged it with the scope open
// on this thread, if any; the tensor joins that scope, otherwise it belongs to
// the caller and gets a leak safety net.
func wrap(h C.mg_tensor) *Tensor {
	if h == nil {
		return nil
	}
	t := &Tensor{h: h}
	if id := uint64((*C.mg_tensor_head)(unsafe.Pointer(h)).scope); id != 0 {
		if s := lookupScope(id); s != nil {
			t.scope = s
			s.tensors = append(s.tensors, t)
			return t
		}
	}
	t.guard()
	return t
}

// guard arms the safety net that frees an unscoped tensor the GC finds unreachable.
func (t *Tensor) guard() {
	t.cleanup = runtime.AddCleanup(t, releaseLeaked, t.h)
	t.guarded = true
}

func releaseLeaked(h C.mg_tensor) {
	leaked.Add(1)
	leakWarning.Do(func() {
		fmt.Fprintln(os.Stderr, "torch: a tensor was garbage collected without Free (see torch.LeakedTensors)")
	})
	C.mg_free(h)
}

// Free releases the tensor now. Freeing twice is harmless.
func (t *Tensor) Free() {
	if t == nil || t.h == nil {
		return
	}
	if t.guarded {
		t.cleanup.Stop()
		t.guarded = false
	}
	C.mg_free(t.h)
	t.h = nil
}

// c is the live handle; it panics on a nil or freed tensor.
func (t *Tensor) c() C.mg_tensor {
	if t == nil {
		panic(&Error{Op: "tensor", Msg: "nil tensor"})
	}
	if t.h == nil {
		panic(&Error{Op: "tensor", Msg: "use of a freed tensor"})
	}
	return t.h
}

// Dim is the number of dimensions.
func (t *Tensor) Dim() int { return int(C.mg_dim(t.c())) }

// Shape is the size of every dimension.
func (t *Tensor) Shape() []int64 {
	h := t.c()
	shape := make([]int64, int(C.mg_dim(h)))
	if len(shape) > 0 {
		C.mg_shape(h, (*C.int64_t)(unsafe.Pointer(&shape[0])))
	}
	return shape
}

// Size is the size of dimension dim; negative dims count from the end.
func (t *Tensor) Size(dim int) int64 {
	shape := t.Shape()
	if dim < 0 {
		dim += len(shape)
	}
	if dim < 0 || dim >= len(shape) {
		panic(&Error{Op: "size", Msg: fmt.Sprintf("dim %d out of range for %d-d tensor", dim, len(shape))})
	}
	return shape[dim]
}

// Numel is the number of elements.
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, s := range t.Shape() {
		n *= s
	}
	return n
}

// DType is the element type.
func (t *Tensor) DType() DType { return dtypeOfScalarType(int(C.mg_dtype(t.c()))) }

// Options are t's dtype and device, to make a tensor like it:
// torch.Zeros(shape, t.Options()).
func (t *Tensor) Options() Options { return Options{DType: t.DType(), Device: t.Device()} }

// Device is where the tensor lives.
func (t *Tensor) Device() Device {
	var typ, index C.int
	C.mg_device(t.c(), &typ, &index)
	d := Device{Type: DeviceType(typ), Index: int(index)}
	if d.Type == CPUType || d.Index < 0 {
		d.Index = 0
	}
	return d
}

// RequiresGrad reports whether autograd records operations on the tensor.
func (t *Tensor) RequiresGrad() bool { return C.mg_requires_grad(t.c()) != 0 }

// String describes the tensor without reading its values, e.g.
// "Tensor[float32 3×4 cpu]".
func (t *Tensor) String() string {
	if t == nil || t.h == nil {
		return "Tensor[freed]"
	}
	dims := make([]string, 0, 4)
	for _, s := range t.Shape() {
		dims = append(dims, fmt.Sprint(s))
	}
	return fmt.Sprintf("Tensor[%s %s %s]", t.DType(), strings.Join(dims, "×"), t.Device())
}
