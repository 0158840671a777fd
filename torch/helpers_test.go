package torch_test

import (
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// scope opens a scope for the rest of the test.
func scope(t testing.TB) *torch.Scope {
	s := torch.NewScope()
	t.Cleanup(s.Close)
	return s
}

// f64 is a float64 tensor on the test device.
func f64(t testing.TB, data []float64, shape ...int64) *torch.Tensor {
	return torch.FromSlice(data, shape...).To(testdevice.Get(t), false)
}

// i64 is an int64 tensor on the test device.
func i64(t testing.TB, data []int64, shape ...int64) *torch.Tensor {
	return torch.FromSlice(data, shape...).To(testdevice.Get(t), false)
}

// values reads any tensor as float64s.
func values(x *torch.Tensor) []float64 {
	return torch.ToSlice[float64](x.ToDType(torch.Float64))
}

// assertTensor checks shape and values (to tol, relative to max(1, |want|)).
// NaN matches NaN and infinities match exactly.
func assertTensor(t testing.TB, name string, got *torch.Tensor, shape []int64, want []float64, tol float64) {
	t.Helper()
	if gs := got.Shape(); !slices.Equal(gs, shape) {
		t.Errorf("%s: shape %v, want %v", name, gs, shape)
		return
	}
	gv := values(got)
	for i := range want {
		g, w := gv[i], want[i]
		switch {
		case math.IsNaN(w):
			if !math.IsNaN(g) {
				t.Errorf("%s[%d] = %v, want NaN", name, i, g)
			}
		case math.IsInf(w, 0):
			if g != w {
				t.Errorf("%s[%d] = %v, want %v", name, i, g, w)
			}
		case math.Abs(g-w) > tol*math.Max(1, math.Abs(w)):
			t.Errorf("%s[%d] = %.12g, want %.12g", name, i, g, w)
		}
	}
}

// mapf applies f to every element.
func mapf(xs []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
