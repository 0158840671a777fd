package data

import (
	"io"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// graphValues reads every tensor of a batch's device graph and targets.
func graphValues(b *Batch) [][]int64 {
	s := torch.NewScope()
	defer s.Close()
	g := b.Graph(torch.CPU)
	labels, mask := b.Targets(torch.CPU)
	out := [][]int64{{g.NumGraphs, g.NumNodes, g.NumEdges}}
	for _, t := range []*torch.Tensor{g.Atoms, g.Bonds, g.Src, g.Dst, g.RowPtr, g.NodeGraph, g.GraphPtr,
		labels.MulScalar(1e6).ToDType(torch.Int64), mask.ToDType(torch.Int64)} {
		out = append(out, append(t.Shape(), torch.ToSlice[int64](t)...))
	}
	return out
}

// Batches staged by PinMemory on the workers put the same graph on the device
// as batches copied directly, and closing the loader frees the staged tensors.
func TestPinMemoryStaging(t *testing.T) {
	d := synthDataset(t)
	base := torch.LiveTensors()
	cfg := LoaderConfig{Dataset: d, BatchSize: 37, Shuffle: true, Seed: 3, Epochs: 1, Workers: 3}
	plain := newLoader(t, cfg)
	cfg.Prepare = PinMemory
	pinned := newLoader(t, cfg)
	batches := 0
	for {
		a, errA := plain.Next()
		b, errB := pinned.Next()
		if errA == io.EOF && errB == io.EOF {
			break
		}
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if _, ok := b.Aux.(*staged); !ok {
			t.Fatal("PinMemory left no staged tensors")
		}
		if !slices.EqualFunc(graphValues(a), graphValues(b), slices.Equal) {
			t.Fatalf("batch %v differs when staged", b.Pos)
		}
		plain.Release(a)
		pinned.Release(b)
		batches++
	}
	if batches != d.NumGraphs()/37+1 {
		t.Errorf("%d batches", batches)
	}
	pinned.Close()
	if got := torch.LiveTensors(); got != base {
		t.Errorf("%d tensors live after Close, %d before", got, base)
	}
}
