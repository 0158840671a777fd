package torch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// gradCheck compares the gradient autograd gives for the scalar f(inputs)
// with float64 central differences, element by element. Inputs must be
// float64 CPU leaves; they are made to require grad here.
func gradCheck(t *testing.T, name string, inputs []*torch.Tensor, f func(in []*torch.Tensor) *torch.Tensor) {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	for _, in := range inputs {
		in.SetRequiresGrad(true)
	}
	f(inputs).Backward()
	const h = 1e-6
	for k, in := range inputs {
		g := in.Grad()
		if g == nil {
			t.Errorf("%s: input %d got no gradient", name, k)
			continue
		}
		analytic := values(g)
		data := torch.HostData[float64](in)
		for i := range data {
			orig := data[i]
			var plus, minus float64
			torch.NoGrad(func() {
				data[i] = orig + h
				plus = f(inputs).Item()
				data[i] = orig - h
				minus = f(inputs).Item()
			})
			data[i] = orig
			numeric := (plus - minus) / (2 * h)
			if d := math.Abs(analytic[i] - numeric); d > 1e-6*math.Max(1, math.Abs(numeric)) {
				t.Errorf("%s: d/d input%d[%d]: autograd %.10g, finite difference %.10g", name, k, i, analytic[i], numeric)
			}
		}
	}
}

// weighted turns y into a scalar with fixed weights, so that every element
// of y's gradient is distinct.
func weighted(y *torch.Tensor) *torch.Tensor {
	n := y.Numel()
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Sin(float64(i)+1) + 0.1*float64(i%3)
	}
	return y.Mul(torch.FromSlice(w, y.Shape()...)).Sum()
}

func randData(r *rand.Rand, n int) []float64 {
	d := make([]float64, n)
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return d
}

func leaf(r *rand.Rand, shape ...int64) *torch.Tensor {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	return torch.FromSlice(randData(r, int(n)), shape...)
}

func TestGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	index := torch.FromSlice([]int64{2, 0, 2, 1, 0})
	offsets := torch.FromSlice([]int64{0, 2, 2, 3, 5}) // with an empty segment
	gatherIndex := torch.FromSlice([]int64{1, 0, 2, 2, 0, 1}, 2, 3)
	tokens := torch.FromSlice([]int64{3, 0, 3, 1})
	// Distinct values, so that amax has no ties.
	distinct := func() *torch.Tensor {
		return torch.FromSlice([]float64{0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 1.1, -2.2, 0.05, 3.3}, 5, 2)
	}
	tests := []struct {
		name   string
		inputs []*torch.Tensor
		f      func(in []*torch.Tensor) *torch.Tensor
	}{
		{"linear", []*torch.Tensor{leaf(r, 4, 3), leaf(r, 2, 3), leaf(r, 2)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(torch.Linear(in[0], in[1], in[2])) }},
		{"matmul", []*torch.Tensor{leaf(r, 3, 4), leaf(r, 4, 2)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].MatMul(in[1])) }},
		{"embedding", []*torch.Tensor{leaf(r, 4, 3)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(torch.Embedding(in[0], tokens)) }},
		// Shifted away from 0, where ReLU has no derivative.
		{"relu", []*torch.Tensor{torch.FromSlice([]float64{-1.5, 0.3, 2, -0.2, 0.9, -3}, 2, 3)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].Relu()) }},
		{"softmax", []*torch.Tensor{leaf(r, 3, 4)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].Softmax(1)) }},
		{"log_softmax", []*torch.Tensor{leaf(r, 3, 4)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].LogSoftmax(0)) }},
		{"normalize", []*torch.Tensor{leaf(r, 3, 4)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].Normalize(2, 1, 1e-12)) }},
		{"index_add", []*torch.Tensor{leaf(r, 3, 2), leaf(r, 5, 2)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].IndexAdd(0, index, in[1])) }},
		{"index_select", []*torch.Tensor{leaf(r, 3, 2)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].IndexSelect(0, index)) }},
		{"segment_sum", []*torch.Tensor{leaf(r, 5, 2)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].SegmentReduce(offsets, torch.ReduceSum)) }},
		{"segment_mean", []*torch.Tensor{leaf(r, 5, 2)},
			func(in []*torch.Tensor) *torch.Tensor {
				m := in[0].SegmentReduce(offsets, torch.ReduceMean)
				return weighted(m.MaskedFill(m.IsFinite().LogicalNot(), 0)) // the empty segment is NaN
			}},
		{"segment_max", []*torch.Tensor{distinct()},
			func(in []*torch.Tensor) *torch.Tensor {
				m := in[0].SegmentReduce(offsets, torch.ReduceMax)
				return weighted(m.MaskedFill(m.IsFinite().LogicalNot(), 0))
			}},
		{"batch_norm", []*torch.Tensor{leaf(r, 5, 3), leaf(r, 3), leaf(r, 3)},
			func(in []*torch.Tensor) *torch.Tensor {
				o := torch.Options{DType: torch.Float64}
				rm, rv := torch.Zeros([]int64{3}, o), torch.Ones([]int64{3}, o)
				return weighted(torch.BatchNorm(in[0], in[1], in[2], rm, rv, true, 0.1, 1e-5))
			}},
		{"gather", []*torch.Tensor{leaf(r, 2, 3)},
			func(in []*torch.Tensor) *torch.Tensor { return weighted(in[0].Gather(1, gatherIndex)) }},
		{"exp_log_div", []*torch.Tensor{leaf(r, 4)},
			func(in []*torch.Tensor) *torch.Tensor {
				return weighted(in[0].Exp().AddScalar(1).Log().Div(in[0].Mul(in[0]).AddScalar(2)))
			}},
	}
	for _, tc := range tests {
		gradCheck(t, tc.name, tc.inputs, tc.f)
		for _, in := range tc.inputs {
			in.Free()
		}
	}
	for _, x := range []*torch.Tensor{index, offsets, gatherIndex, tokens} {
		x.Free()
	}
}

// Detach and NoGrad cut the graph: nothing flows back through them.
func TestGradientCutting(t *testing.T) {
	scope(t)
	x := torch.FromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
	y := x.Mul(x).Add(x.Detach().MulScalar(10)).Sum()
	z := torch.NoGradValue(func() *torch.Tensor { return x.MulScalar(5) })
	if z.RequiresGrad() {
		t.Error("a tensor made under NoGradValue requires grad")
	}
	if after := x.MulScalar(5); !after.RequiresGrad() {
		t.Error("recording stayed off after NoGradValue")
	}
	y.Backward()
	assertTensor(t, "grad", x.Grad(), []int64{3}, []float64{2, 4, 6}, 0)
	if !y.RequiresGrad() {
		t.Error("the loss does not require grad")
	}
	// Gradients accumulate until dropped.
	x.Mul(x).Sum().Backward()
	assertTensor(t, "accumulated", x.Grad(), []int64{3}, []float64{4, 8, 12}, 0)
	torch.ZeroGrad([]*torch.Tensor{x})
	if g := x.Grad(); g != nil {
		t.Errorf("ZeroGrad left a gradient: %v", g)
	}
}

func ExampleNoGradValue() {
	x := torch.FromSlice([]float32{1, 2}).SetRequiresGrad(true)
	defer x.Free()
	y := torch.NoGradValue(func() *torch.Tensor { return x.MulScalar(2) })
	defer y.Free()
	fmt.Println(y.RequiresGrad())
	// Output: false
}
