package torch

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Options say how a new tensor is made. The zero value is a float32 tensor on
// the CPU that does not require grad.
type Options struct {
	DType        DType
	Device       Device
	Pinned       bool // page-locked host memory, for non-blocking copies to a GPU; plain memory without CUDA
	RequiresGrad bool
}

func (o Options) c() C.mg_options {
	return C.mg_options{
		dtype:         C.int(o.DType.scalarType()),
		device_type:   C.int(o.Device.Type),
		device_index:  C.int(o.Device.Index),
		pinned:        cbool(o.Pinned),
		requires_grad: cbool(o.RequiresGrad),
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// int64s passes a Go []int64 to C; nil for an empty slice.
func int64s(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

// FromSlice copies data into a new CPU tensor of the given shape (default:
// one dimension of len(data)).
func FromSlice[T Element](data []T, shape ...int64) *Tensor {
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	if n != int64(len(data)) {
		panic(&Error{Op: "from_slice", Msg: fmt.Sprintf("%d elements do not fill shape %v", len(data), shape)})
	}
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	var out C.mg_tensor
	check("from_slice", C.mg_from_data(p, int64s(shape), C.int(len(shape)), Options{DType: DTypeOf[T]()}.c(), &out))
	return wrap(out)
}

var hostReads atomic.Int64

// HostReads counts the calls that read tensor values back to the host (Item,
// ItemInt, ToSlice, To(CPU) of a GPU tensor). On a GPU each one waits
// for the device, so a training step should make none; tests check that here.
func HostReads() int64 { return hostReads.Load() }

// ToSlice copies the tensor's elements, in row-major order, into a new Go
// slice. T must match the tensor's dtype. On a GPU this waits for the device.
func ToSlice[T Element](t *Tensor) []T {
	hostReads.Add(1)
	if dt := DTypeOf[T](); t.DType() != dt {
		panic(&Error{Op: "to_slice", Msg: fmt.Sprintf("tensor is %s, not %s", t.DType(), dt)})
	}
	out := make([]T, t.Numel())
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	var zero T
	check("to_slice", C.mg_copy_to_host(t.c(), p, C.int64_t(len(out)*int(unsafe.Sizeof(zero)))))
	return out
}

// HostData is the memory of a contiguous CPU tensor as a Go slice, without a
// copy: writes through it change the tensor. It is valid only until the tensor
// is freed; use it to fill reusable (e.g. pinned) host buffers.
func HostData[T Element](t *Tensor) []T {
	if dt := DTypeOf[T](); t.DType() != dt {
		panic(&Error{Op: "host_data", Msg: fmt.Sprintf("tensor is %s, not %s", t.DType(), dt)})
	}
	var p unsafe.Pointer
	check("host_data", C.mg_data_ptr(t.c(), &p))
	n := t.Numel()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(p), n)
}

// Item is the value of a one-element tensor. On a GPU this waits for the device.
func (t *Tensor) Item() float64 {
	hostReads.Add(1)
	var f C.double
	var i C.int64_t
	check("item", C.mg_item(t.c(), &f, &i))
	return float64(f)
}

// ItemInt is the value of a one-element integer tensor.
func (t *Tensor) ItemInt() int64 {
	hostReads.Add(1)
	var f C.double
	var i C.int64_t
	check("item", C.mg_item(t.c(), &f, &i))
	return int64(i)
}

func factory(kind C.int, op string, shape []int64, value float64, o Options) *Tensor {
	var out C.mg_tensor
	check(op, C.mg_factory(kind, int64s(shape), C.int(len(shape)), C.double(value), o.c(), &out))
	return wrap(out)
}

// Empty is a tensor of the given shape with unspecified contents.
func Empty(shape []int64, o Options) *Tensor { return factory(C.MG_EMPTY, "empty", shape, 0, o) }

// Zeros is a tensor of zeros.
func Zeros(shape []int64, o Options) *Tensor { return factory(C.MG_ZEROS, "zeros", shape, 0, o) }

// Ones is a tensor of ones.
func Ones(shape []int64, o Options) *Tensor { return factory(C.MG_ONES, "ones", shape, 0, o) }

// Full is a tensor filled with value.
func Full(shape []int64, value float64, o Options) *Tensor {
	return factory(C.MG_FULL, "full", shape, value, o)
}

// Rand is uniform on [0, 1) from the device's default generator.
func Rand(shape []int64, o Options) *Tensor { return factory(C.MG_RAND, "rand", shape, 0, o) }

// Arange is start, start+step, ... below end.
func Arange(start, end, step float64, o Options) *Tensor {
	var out C.mg_tensor
	check("arange", C.mg_arange(C.double(start), C.double(end), C.double(step), o.c(), &out))
	return wrap(out)
}

// To is the tensor on device d (t itself, as a new handle, when it is there
// already). nonBlocking copies asynchronously from pinned host memory.
func (t *Tensor) To(d Device, nonBlocking bool) *Tensor {
	if !d.IsCUDA() && t.Device().IsCUDA() {
		hostReads.Add(1)
	}
	return t.to(Options{DType: t.DType(), Device: d}, nonBlocking)
}

// ToDType is the tensor converted to dtype dt on its device.
func (t *Tensor) ToDType(dt DType) *Tensor {
	return t.to(Options{DType: dt, Device: t.Device()}, false)
}

func (t *Tensor) to(o Options, nonBlocking bool) *Tensor {
	var out C.mg_tensor
	check("to", C.mg_to(t.c(), o.c(), cbool(nonBlocking), &out))
	return wrap(out)
}

// CopyFrom copies src into t in place (broadcasting, converting dtype and
// device); nonBlocking as for To.
func (t *Tensor) CopyFrom(src *Tensor, nonBlocking bool) {
	check("copy_", C.mg_copy_(t.c(), src.c(), cbool(nonBlocking)))
}

// Clone is a copy with its own memory.
func (t *Tensor) Clone() *Tensor {
	var out C.mg_tensor
	check("clone", C.mg_clone(t.c(), &out))
	return wrap(out)
}

// Fill sets every element to v, in place.
func (t *Tensor) Fill(v float64) { check("fill_", C.mg_fill_(t.c(), C.double(v))) }

// AddScalarInPlace adds v to every element, in place.
func (t *Tensor) AddScalarInPlace(v float64) { check("add_", C.mg_add_scalar_(t.c(), C.double(v))) }

// FillUniform fills t, in place, from U(lo, hi).
func (t *Tensor) FillUniform(lo, hi float64) {
	check("uniform_", C.mg_uniform_(t.c(), C.double(lo), C.double(hi)))
}

// FillNormal fills t, in place, from N(mean, std²).
func (t *Tensor) FillNormal(mean, std float64) {
	check("normal_", C.mg_normal_(t.c(), C.double(mean), C.double(std)))
}
