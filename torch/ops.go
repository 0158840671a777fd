package torch

/*
#include "shim.h"
*/
import "C"

// newTensor runs a shim call that produces one tensor.
func newTensor(op string, call func(out *C.mg_tensor) C.mg_error) *Tensor {
	var out C.mg_tensor
	check(op, call(&out))
	return wrap(out)
}

func handles(ts []*Tensor) []C.mg_tensor {
	hs := make([]C.mg_tensor, len(ts))
	for i, t := range ts {
		hs[i] = t.c()
	}
	return hs
}

func firstHandle(hs []C.mg_tensor) *C.mg_tensor {
	if len(hs) == 0 {
		return nil
	}
	return &hs[0]
}

// ---- elementwise ----

func (t *Tensor) unary(op C.int, name string) *Tensor {
	return newTensor(name, func(out *C.mg_tensor) C.mg_error { return C.mg_unary(op, t.c(), out) })
}

// Neg is −t.
func (t *Tensor) Neg() *Tensor { return t.unary(C.MG_NEG, "neg") }

// Exp is eᵗ.
func (t *Tensor) Exp() *Tensor { return t.unary(C.MG_EXP, "exp") }

// Log is the natural logarithm.
func (t *Tensor) Log() *Tensor { return t.unary(C.MG_LOG, "log") }

// Sqrt is the square root.
func (t *Tensor) Sqrt() *Tensor { return t.unary(C.MG_SQRT, "sqrt") }

// Abs is |t|.
func (t *Tensor) Abs() *Tensor { return t.unary(C.MG_ABS, "abs") }

// Reciprocal is 1/t.
func (t *Tensor) Reciprocal() *Tensor { return t.unary(C.MG_RECIPROCAL, "reciprocal") }

// Relu is max(t, 0).
func (t *Tensor) Relu() *Tensor { return t.unary(C.MG_RELU, "relu") }

// Gelu is PyTorch's exact GELU, t·Φ(t) with Φ the standard normal CDF
// (nn.GELU's default, approximate='none').
func (t *Tensor) Gelu() *Tensor { return t.unary(C.MG_GELU, "gelu") }

// LogicalNot is the elementwise negation, as bool.
func (t *Tensor) LogicalNot() *Tensor { return t.unary(C.MG_LOGICAL_NOT, "logical_not") }

// IsFinite is true where t is neither infinite nor NaN.
func (t *Tensor) IsFinite() *Tensor { return t.unary(C.MG_ISFINITE, "isfinite") }

func (t *Tensor) binary(op C.int, name string, o *Tensor) *Tensor {
	return newTensor(name, func(out *C.mg_tensor) C.mg_error { return C.mg_binary(op, t.c(), o.c(), out) })
}

// binaryScalar applies op with a scalar; a whole number keeps integer tensors integral.
func (t *Tensor) binaryScalar(op C.int, name string, s float64) *Tensor {
	return newTensor(name, func(out *C.mg_tensor) C.mg_error {
		return C.mg_binary_scalar(op, t.c(), C.double(s), out)
	})
}

// Add is t + o, broadcasting.
func (t *Tensor) Add(o *Tensor) *Tensor { return t.binary(C.MG_ADD, "add", o) }

// Sub is t − o.
func (t *Tensor) Sub(o *Tensor) *Tensor { return t.binary(C.MG_SUB, "sub", o) }

// Mul is t ⊙ o.
func (t *Tensor) Mul(o *Tensor) *Tensor { return t.binary(C.MG_MUL, "mul", o) }

// Div is t / o (true division).
func (t *Tensor) Div(o *Tensor) *Tensor { return t.binary(C.MG_DIV, "div", o) }

// Minimum is the elementwise minimum.
func (t *Tensor) Minimum(o *Tensor) *Tensor { return t.binary(C.MG_MINIMUM, "minimum", o) }

// Ne is t != o.
func (t *Tensor) Ne(o *Tensor) *Tensor { return t.binary(C.MG_NE, "ne", o) }

// Le is t ≤ o.
func (t *Tensor) Le(o *Tensor) *Tensor { return t.binary(C.MG_LE, "le", o) }

// AddScalar is t + s.
func (t *Tensor) AddScalar(s float64) *Tensor { return t.binaryScalar(C.MG_ADD, "add", s) }

// SubScalar is t − s.
func (t *Tensor) SubScalar(s float64) *Tensor { return t.binaryScalar(C.MG_SUB, "sub", s) }

// MulScalar is t·s.
func (t *Tensor) MulScalar(s float64) *Tensor { return t.binaryScalar(C.MG_MUL, "mul", s) }

// DivScalar is t / s.
func (t *Tensor) DivScalar(s float64) *Tensor { return t.binaryScalar(C.MG_DIV, "div", s) }

// PowScalar is tˢ.
func (t *Tensor) PowScalar(s float64) *Tensor { return t.binaryScalar(C.MG_POW, "pow", s) }

// RemainderScalar is t mod s (Python's %).
func (t *Tensor) RemainderScalar(s float64) *Tensor {
	return t.binaryScalar(C.MG_REMAINDER, "remainder", s)
}

// FloorDivideScalar is ⌊t / s⌋.
func (t *Tensor) FloorDivideScalar(s float64) *Tensor {
	return t.binaryScalar(C.MG_FLOOR_DIVIDE, "floor_divide", s)
}

// LtScalar is t < s.
func (t *Tensor) LtScalar(s float64) *Tensor { return t.binaryScalar(C.MG_LT, "lt", s) }

// GtScalar is t > s.
func (t *Tensor) GtScalar(s float64) *Tensor { return t.binaryScalar(C.MG_GT, "gt", s) }

// GeScalar is t ≥ s.
func (t *Tensor) GeScalar(s float64) *Tensor { return t.binaryScalar(C.MG_GE, "ge", s) }

func (t *Tensor) clamp(lo, hi float64, hasLo, hasHi bool) *Tensor {
	return newTensor("clamp", func(out *C.mg_tensor) C.mg_error {
		return C.mg_clamp(t.c(), C.double(lo), C.double(hi), cbool(hasLo), cbool(hasHi), out)
	})
}

// ClampMin is max(t, lo).
func (t *Tensor) ClampMin(lo float64) *Tensor { return t.clamp(lo, 0, true, false) }

// ClampMax is min(t, hi).
func (t *Tensor) ClampMax(hi float64) *Tensor { return t.clamp(0, hi, false, true) }

// Where is a where cond holds, else b (broadcasting).
func Where(cond, a, b *Tensor) *Tensor {
	return newTensor("where", func(out *C.mg_tensor) C.mg_error { return C.mg_where(cond.c(), a.c(), b.c(), out) })
}

// MaskedFill is t with value wherever mask is true.
func (t *Tensor) MaskedFill(mask *Tensor, value float64) *Tensor {
	return newTensor("masked_fill", func(out *C.mg_tensor) C.mg_error {
		return C.mg_masked_fill(t.c(), mask.c(), C.double(value), out)
	})
}

// ---- reductions ----

func (t *Tensor) reduce(op C.int, name string, dims []int64, keepdim bool) *Tensor {
	return newTensor(name, func(out *C.mg_tensor) C.mg_error {
		return C.mg_reduce(op, t.c(), int64s(dims), C.int(len(dims)), cbool(keepdim), out)
	})
}

// Sum is the sum of every element (0-d).
func (t *Tensor) Sum() *Tensor { return t.reduce(C.MG_SUM, "sum", nil, false) }

// SumDim sums over dim.
func (t *Tensor) SumDim(dim int64, keepdim bool) *Tensor {
	return t.reduce(C.MG_SUM, "sum", []int64{dim}, keepdim)
}

// Mean is the mean of every element.
func (t *Tensor) Mean() *Tensor { return t.reduce(C.MG_MEAN, "mean", nil, false) }

// MeanDim averages over dim.
func (t *Tensor) MeanDim(dim int64, keepdim bool) *Tensor {
	return t.reduce(C.MG_MEAN, "mean", []int64{dim}, keepdim)
}

// Max is the largest element (0-d).
func (t *Tensor) Max() *Tensor { return t.reduce(C.MG_AMAX, "amax", nil, false) }

// Min is the smallest element (0-d).
func (t *Tensor) Min() *Tensor { return t.reduce(C.MG_AMIN, "amin", nil, false) }

// Amax is the maximum over dim (gradient shared evenly among ties).
func (t *Tensor) Amax(dim int64, keepdim bool) *Tensor {
	return t.reduce(C.MG_AMAX, "amax", []int64{dim}, keepdim)
}

// All is true if every element is nonzero (0-d bool).
func (t *Tensor) All() *Tensor { return t.reduce(C.MG_ALL, "all", nil, false) }

// Nonzero is the positions of a 1-D tensor's nonzero (true) elements, in
// ascending order (int64). Its length depends on the values, so on CUDA it
// waits for them.
func (t *Tensor) Nonzero() *Tensor {
	return newTensor("nonzero", func(out *C.mg_tensor) C.mg_error { return C.mg_nonzero(t.c(), out) })
}

// Argmax is the index of the maximum over dim (the first, on ties).
func (t *Tensor) Argmax(dim int64, keepdim bool) *Tensor {
	return newTensor("argmax", func(out *C.mg_tensor) C.mg_error {
		return C.mg_argmax(t.c(), C.int64_t(dim), cbool(keepdim), out)
	})
}

// NormDim is the p-norm over dim.
func (t *Tensor) NormDim(p float64, dim int64, keepdim bool) *Tensor {
	dims := []int64{dim}
	return newTensor("norm", func(out *C.mg_tensor) C.mg_error {
		return C.mg_norm(t.c(), C.double(p), int64s(dims), 1, cbool(keepdim), out)
	})
}

// Cumsum is the running sum over dim.
func (t *Tensor) Cumsum(dim int64) *Tensor {
	return newTensor("cumsum", func(out *C.mg_tensor) C.mg_error { return C.mg_cumsum(t.c(), C.int64_t(dim), out) })
}

// Softmax is exp(t) normalised to sum 1 over dim.
func (t *Tensor) Softmax(dim int64) *Tensor {
	return newTensor("softmax", func(out *C.mg_tensor) C.mg_error { return C.mg_softmax(t.c(), C.int64_t(dim), 0, out) })
}

// LogSoftmax is log(Softmax(dim)), computed stably.
func (t *Tensor) LogSoftmax(dim int64) *Tensor {
	return newTensor("log_softmax", func(out *C.mg_tensor) C.mg_error {
		return C.mg_softmax(t.c(), C.int64_t(dim), 1, out)
	})
}

// Normalize divides t by max(‖t‖_p, eps) along dim, as PyTorch's F.normalize.
func (t *Tensor) Normalize(p float64, dim int64, eps float64) *Tensor {
	return newTensor("normalize", func(out *C.mg_tensor) C.mg_error {
		return C.mg_normalize(t.c(), C.double(p), C.int64_t(dim), C.double(eps), out)
	})
}

// ---- linear algebra ----

// MatMul is the matrix product (batched and broadcast as torch.matmul).
func (t *Tensor) MatMul(o *Tensor) *Tensor {
	return newTensor("matmul", func(out *C.mg_tensor) C.mg_error { return C.mg_matmul(t.c(), o.c(), out) })
}

// Linear is x·wᵀ + b; b may be nil.
func Linear(x, w, b *Tensor) *Tensor {
	var bh C.mg_tensor
	if b != nil {
		bh = b.c()
	}
	return newTensor("linear", func(out *C.mg_tensor) C.mg_error { return C.mg_linear(x.c(), w.c(), bh, out) })
}

// ---- shape ----

// Reshape is t with a new shape (one entry may be −1); a view when possible.
func (t *Tensor) Reshape(shape ...int64) *Tensor {
	return newTensor("reshape", func(out *C.mg_tensor) C.mg_error {
		return C.mg_reshape(t.c(), int64s(shape), C.int(len(shape)), out)
	})
}

// Expand broadcasts size-1 dimensions to shape without copying (−1 keeps a size).
func (t *Tensor) Expand(shape ...int64) *Tensor {
	return newTensor("expand", func(out *C.mg_tensor) C.mg_error {
		return C.mg_expand(t.c(), int64s(shape), C.int(len(shape)), out)
	})
}

// Transpose swaps dimensions d0 and d1 (a view).
func (t *Tensor) Transpose(d0, d1 int64) *Tensor {
	return newTensor("transpose", func(out *C.mg_tensor) C.mg_error {
		return C.mg_transpose(t.c(), C.int64_t(d0), C.int64_t(d1), out)
	})
}

// T is the transpose of a 2-d tensor.
func (t *Tensor) T() *Tensor { return t.Transpose(0, 1) }

// Unsqueeze inserts a dimension of size 1 at dim.
func (t *Tensor) Unsqueeze(dim int64) *Tensor {
	return newTensor("unsqueeze", func(out *C.mg_tensor) C.mg_error { return C.mg_unsqueeze(t.c(), C.int64_t(dim), out) })
}

// Squeeze removes dimension dim if its size is 1.
func (t *Tensor) Squeeze(dim int64) *Tensor {
	return newTensor("squeeze", func(out *C.mg_tensor) C.mg_error { return C.mg_squeeze(t.c(), C.int64_t(dim), out) })
}

// Narrow is the slice [start, start+length) of dimension dim (a view).
func (t *Tensor) Narrow(dim, start, length int64) *Tensor {
	return newTensor("narrow", func(out *C.mg_tensor) C.mg_error {
		return C.mg_narrow(t.c(), C.int64_t(dim), C.int64_t(start), C.int64_t(length), out)
	})
}

// Cat concatenates tensors along dim.
func Cat(ts []*Tensor, dim int64) *Tensor {
	hs := handles(ts)
	return newTensor("cat", func(out *C.mg_tensor) C.mg_error {
		return C.mg_cat(firstHandle(hs), C.int(len(hs)), C.int64_t(dim), out)
	})
}

// Stack joins tensors of equal shape along a new dimension dim.
func Stack(ts []*Tensor, dim int64) *Tensor {
	hs := handles(ts)
	return newTensor("stack", func(out *C.mg_tensor) C.mg_error {
		return C.mg_stack(firstHandle(hs), C.int(len(hs)), C.int64_t(dim), out)
	})
}

// ---- indexing, scatter and segments ----

// Reduction names the reduction of SegmentReduce.
type Reduction int

// Reductions. ReduceMax and ReduceMin are PyTorch's "amax" and "amin": ties
// share the gradient evenly.
const (
	ReduceSum  Reduction = C.MG_SUM
	ReduceMean Reduction = C.MG_MEAN
	ReduceMax  Reduction = C.MG_AMAX
	ReduceMin  Reduction = C.MG_AMIN
)

// IndexSelect is t's entries at index (int64) along dim.
func (t *Tensor) IndexSelect(dim int64, index *Tensor) *Tensor {
	return newTensor("index_select", func(out *C.mg_tensor) C.mg_error {
		return C.mg_index_select(t.c(), C.int64_t(dim), index.c(), out)
	})
}

// Gather is out[i][j] = t[index[i][j]][j] for dim 0 (and likewise for other dims).
func (t *Tensor) Gather(dim int64, index *Tensor) *Tensor {
	return newTensor("gather", func(out *C.mg_tensor) C.mg_error {
		return C.mg_gather(t.c(), C.int64_t(dim), index.c(), out)
	})
}

// IndexAdd is t with src's slices added at positions index along dim. On CUDA
// it uses atomics, so the summation order, and the last bits, may vary.
func (t *Tensor) IndexAdd(dim int64, index, src *Tensor) *Tensor {
	return newTensor("index_add", func(out *C.mg_tensor) C.mg_error {
		return C.mg_index_add(t.c(), C.int64_t(dim), index.c(), src.c(), out)
	})
}

// SegmentReduce reduces the rows of t in segments given by CSR offsets (int64,
// length S+1, starting at 0 and ending at t's row count): row i of the result
// reduces rows [offsets[i], offsets[i+1]). The rows are visited in order, so
// the result is deterministic on every device. An empty segment gives 0 for
// ReduceSum, NaN for ReduceMean, −Inf for ReduceMax and +Inf for ReduceMin.
func (t *Tensor) SegmentReduce(offsets *Tensor, r Reduction) *Tensor {
	return newTensor("segment_reduce", func(out *C.mg_tensor) C.mg_error {
		return C.mg_segment_reduce(t.c(), offsets.c(), C.int(r), 0, 0, out)
	})
}

// Scatter is t with src[i][j] written at [index[i][j]][j] for dim 0 (and
// likewise for other dims). Indices should be distinct: which write wins among
// duplicates is unspecified.
func (t *Tensor) Scatter(dim int64, index, src *Tensor) *Tensor {
	return newTensor("scatter", func(out *C.mg_tensor) C.mg_error {
		return C.mg_scatter(t.c(), C.int64_t(dim), index.c(), src.c(), out)
	})
}

// Sort sorts along dim, stably (equal elements keep their order), and gives
// the permutation too.
func (t *Tensor) Sort(dim int64, descending bool) (values, indices *Tensor) {
	var v, i C.mg_tensor
	check("sort", C.mg_sort(t.c(), C.int64_t(dim), cbool(descending), &v, &i))
	return wrap(v), wrap(i)
}

// OneHot is the int64 one-hot encoding of t's class indices.
func (t *Tensor) OneHot(classes int64) *Tensor {
	return newTensor("one_hot", func(out *C.mg_tensor) C.mg_error { return C.mg_one_hot(t.c(), C.int64_t(classes), out) })
}
