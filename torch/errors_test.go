package torch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// An exception thrown inside libtorch comes back as a *torch.Error from the
// same call, whatever kind of entry point threw it, and the process lives on.
func TestExceptionsAreRecovered(t *testing.T) {
	scope(t)
	o := torch.Options{DType: torch.Float64}
	tests := []struct {
		kind string
		want string // part of libtorch's message
		run  func()
	}{
		{"op", "cannot be multiplied", func() {
			torch.Zeros([]int64{2, 3}, o).MatMul(torch.Zeros([]int64{2, 3}, o))
		}},
		{"op dtype", "", func() {
			torch.Embedding(torch.Zeros([]int64{4, 2}, o), torch.Zeros([]int64{3}, o))
		}},
		{"index", "out of range", func() {
			torch.Zeros([]int64{3}, o).IndexSelect(0, torch.FromSlice([]int64{5}))
		}},
		{"backward", "does not require grad", func() {
			torch.Zeros([]int64{2}, o).Sum().Backward()
		}},
		{"backward twice", "second time", func() {
			x := torch.Ones([]int64{2}, o).SetRequiresGrad(true)
			y := x.Exp().Sum()
			y.Backward()
			y.Backward()
		}},
		{"optimizer step", "", func() {
			p := torch.Ones([]int64{3}, o).SetRequiresGrad(true)
			p.Mul(p).Sum().Backward()
			wrong := torch.Zeros([]int64{2}, o) // moments of the wrong shape
			torch.AdamStep([]*torch.Tensor{p}, []*torch.Tensor{wrong}, []*torch.Tensor{wrong}, []int64{0}, 1e-3, 0.9, 0.999, 1e-8, 0, false)
		}},
		{"thread count", "positive number of threads", func() { torch.SetNumThreads(0) }},
		{"kernel temperature", "gen_aggregate", func() {
			x := torch.Zeros([]int64{2, 1}, o)
			torch.FusedGENAggregate(x, torch.Zeros([]int64{1, 1}, o), torch.FromSlice([]int64{0}), torch.Zeros([]int64{2}, o),
				torch.FromSlice([]int64{0}), torch.FromSlice([]int64{0, 1, 1}), false)
		}},
		{"kernel bond row", "bond row 1 of edge 0 out of range", func() {
			x := torch.Zeros([]int64{2, 1}, o)
			torch.FusedGENAggregate(x, torch.Zeros([]int64{1, 1}, o), torch.FromSlice([]int64{1}), torch.Full(nil, 1, o),
				torch.FromSlice([]int64{0}), torch.FromSlice([]int64{0, 1, 1}), false)
		}},
		{"kernel offsets", "gen_aggregate", func() {
			x := torch.Zeros([]int64{3, 1}, o)
			torch.FusedGENAggregate(x, torch.Zeros([]int64{1, 1}, o), torch.FromSlice([]int64{0}), torch.Full(nil, 1, o),
				torch.FromSlice([]int64{0}), torch.FromSlice([]int64{0, 1, 0, 1}), false)
		}},
		{"fused kernel argument", "dropout", func() { torch.FusedDropout(torch.Ones([]int64{2}, o), 1.5) }},
		{"use after free", "freed", func() {
			x := torch.Zeros([]int64{1}, o)
			x.Free()
			x.Exp()
		}},
	}
	for _, tc := range tests {
		err := torch.Catch(tc.run)
		var te *torch.Error
		if !errors.As(err, &te) {
			t.Errorf("%s: got %v, want a *torch.Error", tc.kind, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not mention %q", tc.kind, err, tc.want)
		}
	}
	// libtorch still works after all of that.
	assertTensor(t, "after", torch.Ones([]int64{2}, o).AddScalar(1), []int64{2}, []float64{2, 2}, 0)
}

// Recover, deferred, turns a panic carrying a *torch.Error into the
// function's error, leaves a normal return alone, and passes other panics on.
func TestRecover(t *testing.T) {
	scope(t)
	o := torch.Options{DType: torch.Float64}
	run := func(f func()) (err error) {
		defer torch.Recover(&err)
		f()
		return nil
	}
	err := run(func() { torch.Zeros([]int64{2, 3}, o).MatMul(torch.Zeros([]int64{2, 3}, o)) })
	var te *torch.Error
	if !errors.As(err, &te) || te.Op != "matmul" || !strings.Contains(te.Msg, "cannot be multiplied") {
		t.Errorf("a failed op returned %v, want the matmul *torch.Error", err)
	}
	if err := run(func() { torch.Ones([]int64{2}, o).AddScalar(1) }); err != nil {
		t.Errorf("a function without failure returned %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "not a torch error" {
				t.Errorf("recovered %v, want the foreign panic", r)
			}
		}()
		run(func() { panic("not a torch error") })
		t.Error("Recover swallowed a foreign panic")
	}()
}

func TestCatchPassesOtherPanicsOn(t *testing.T) {
	defer func() {
		if r := recover(); r != "not a torch error" {
			t.Errorf("recovered %v", r)
		}
	}()
	torch.Catch(func() { panic("not a torch error") })
	t.Error("Catch swallowed a foreign panic")
}
