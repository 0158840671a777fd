package torch_test

import (
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// BenchmarkCgoCall is the cost of one call into the shim that does no tensor
// work (an atomic load).
func BenchmarkCgoCall(b *testing.B) {
	for b.Loop() {
		torch.LiveTensors()
	}
}

// BenchmarkSmallOp is a 16-element float32 addition: one cgo call, libtorch's
// dispatcher, the new handle and its Free.
func BenchmarkSmallOp(b *testing.B) {
	x := torch.Ones([]int64{16}, torch.Options{})
	defer x.Free()
	for b.Loop() {
		x.Add(x).Free()
	}
}

// BenchmarkSmallOpScoped is the same addition with the result freed by a scope
// (one scope per 100 ops, like the temporaries of a training step).
func BenchmarkSmallOpScoped(b *testing.B) {
	x := torch.Ones([]int64{16}, torch.Options{})
	defer x.Free()
	s := torch.NewScope()
	n := 0
	for b.Loop() {
		x.Add(x)
		if n++; n == 100 {
			s.Close()
			s, n = torch.NewScope(), 0
		}
	}
	s.Close()
}
