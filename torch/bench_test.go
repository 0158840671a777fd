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

// BenchmarkLinearProduct is the d×d product of a paper-sized GENConv layer
// (13,000 nodes, d = 300, one thread): the reference for the machine's
// sgemm rate (GFLOP/s reported) against which a training step is measured.
func BenchmarkLinearProduct(b *testing.B) {
	torch.TuneAllocator()
	torch.SetNumThreads(1)
	f32 := torch.Options{DType: torch.Float32}
	torch.ManualSeed(1)
	x, w := torch.Rand([]int64{13000, 300}, f32), torch.Rand([]int64{300, 300}, f32)
	wt := w.T()
	defer x.Free()
	defer w.Free()
	defer wt.Free()
	for b.Loop() {
		x.MatMul(wt).Free()
	}
	b.ReportMetric(2*13000*300*300*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
