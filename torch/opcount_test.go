package torch_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// CountOps counts each operator call that enters the dispatcher, including
// those a composite operator makes and those of a backward pass, and nothing
// else. The expected counts list the operators by name (traced once from
// libtorch's RecordFunction), so a change in what counts shows here.
func TestCountOps(t *testing.T) {
	scope(t)
	a := torch.FromSlice([]float64{1, 2, 3})
	b := torch.FromSlice([]float64{4, 5, 6})
	idx := torch.FromSlice([]int64{0, 2})
	for _, c := range []struct {
		name string
		fn   func()
		want int64
	}{
		{"nothing", func() {}, 0},
		// Autograd's redispatch to the CPU kernel is not a second call.
		{"add", func() { a.Add(b) }, 1},
		{"add then mul", func() { a.Add(b).Mul(b) }, 2},
		{"mul by a scalar", func() { a.MulScalar(2) }, 1},
		// index_select, then its CPU kernel's empty output.
		{"index_select", func() { a.IndexSelect(0, idx) }, 2},
		// sum, its sum.dim_IntList, as_strided and fill_ of the result.
		{"sum", func() { a.Sum() }, 4},
		// sum (4), then item and _local_scalar_dense.
		{"sum, read back", func() { a.Sum().Item() }, 6},
		// empty; the copy from Go memory is no operator.
		{"tensor from Go memory", func() { torch.FromSlice([]int64{1, 2}) }, 1},
	} {
		if got := torch.CountOps(c.fn); got != c.want {
			t.Errorf("%s: %d operators, want %d", c.name, got, c.want)
		}
	}
}

// A backward pass counts its seed gradient, the gradient formulas and the
// accumulation into the leaves; the engine's own ranges around each node do
// not count.
func TestCountOpsBackward(t *testing.T) {
	scope(t)
	x := torch.FromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
	b := torch.FromSlice([]float64{4, 5, 6})
	// Forward: mul, then sum (4).
	var y *torch.Tensor
	if got := torch.CountOps(func() { y = x.Mul(x).Sum() }); got != 5 {
		t.Errorf("forward x·x summed: %d operators, want 5", got)
	}
	// Seed: ones_like → empty_like → empty, fill_ (4). SumBackward0: expand →
	// as_strided (2). MulBackward0: one mul per factor (2). The two
	// contributions to x meet in an add (1); AccumulateGrad stores a detached
	// gradient (1).
	if got := torch.CountOps(y.Backward); got != 10 {
		t.Errorf("backward of x·x summed: %d operators, want 10", got)
	}
	assertTensor(t, "x.grad", x.Grad(), []int64{3}, []float64{2, 4, 6}, 0)
	// Now x has a gradient: seed (4), SumBackward0 (2), one mul (b needs no
	// gradient), and add_ into the existing gradient (1).
	y = x.Mul(b).Sum()
	if got := torch.CountOps(y.Backward); got != 8 {
		t.Errorf("backward of x·b summed, into an existing gradient: %d operators, want 8", got)
	}
	assertTensor(t, "x.grad", x.Grad(), []int64{3}, []float64{6, 9, 12}, 0)
}

// Operators another goroutine dispatches meanwhile do not count; a count
// inside a count is refused; a panicking fn still ends its count.
func TestCountOpsIsolation(t *testing.T) {
	scope(t)
	a := torch.FromSlice([]float64{1, 2, 3})
	var wg sync.WaitGroup
	got := torch.CountOps(func() {
		a.Add(a)
		wg.Add(1)
		go func() { // on another OS thread: the count's callback is not there
			defer wg.Done()
			s := torch.NewScope()
			defer s.Close()
			for range 100 {
				a.Mul(a)
			}
		}()
		wg.Wait()
	})
	if got != 1 {
		t.Errorf("with another goroutine's 100 muls: %d operators, want 1 (this goroutine's add)", got)
	}

	err := torch.Catch(func() { torch.CountOps(func() { torch.CountOps(func() {}) }) })
	var te *torch.Error
	if !errors.As(err, &te) || te.Op != "op_count_begin" {
		t.Errorf("nested count: error %v, want a *torch.Error from op_count_begin", err)
	}

	err = torch.Catch(func() { torch.CountOps(func() { a.Add(torch.FromSlice([]float64{1, 2})) }) })
	if err == nil {
		t.Fatal("adding tensors of 3 and 2 elements did not fail")
	}
	if got := torch.CountOps(func() { a.Add(a) }); got != 1 {
		t.Errorf("after a failed count: %d operators, want 1", got)
	}
}
