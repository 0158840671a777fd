package feed

import (
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// graphValues reads every tensor of a batch's graph and targets, put on the
// test device ($MICROGRAPH_TEST_DEVICE, else the CPU).
func graphValues(t *testing.T, b *Batch) [][]int64 {
	s := torch.NewScope()
	defer s.Close()
	dev := testdevice.Get(t)
	g := b.Graph(dev)
	labels, mask := b.Targets(dev)
	out := [][]int64{{g.NumGraphs, g.NumNodes, g.NumEdges, g.MaxNodes}}
	for _, x := range []*torch.Tensor{g.Atoms, g.Bonds, g.Src, g.Dst, g.RowPtr, g.NodeGraph, g.GraphPtr,
		g.Nodes, g.Degree, g.PadIndex, g.PairLater, g.PairEarlier,
		labels.MulScalar(1e6).ToDType(torch.Int64), mask.ToDType(torch.Int64)} {
		out = append(out, append(x.Shape(), torch.ToSlice[int64](x)...))
	}
	return out
}

// Batches staged by PinMemory on the workers put the same graph on the test
// device as batches copied directly (on a GPU: asynchronously, from pinned
// memory), and closing the loader frees the staged tensors.
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
		if !slices.EqualFunc(graphValues(t, a), graphValues(t, b), slices.Equal) {
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

// The structure the collator derives equals what the step computed from the
// batch with tensor ops before it was moved here: in-degrees as differences
// of RowPtr, the padded layout's rows, the node indices, and, for random
// motifs, which edges repeat an earlier edge's (destination, slot) as found
// by a sort of the keys.
func TestCollatedStructureMatchesTensorOps(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	d := synthDataset(t)
	r := rand.New(rand.NewPCG(5, 6))
	var b Batch
	for trial := range 10 {
		graphs := make([]int32, 1+r.IntN(64))
		for i := range graphs {
			graphs[i] = int32(r.IntN(d.NumGraphs()))
		}
		if err := Collate(d, graphs, &b); err != nil {
			t.Fatal(err)
		}
		g := b.Graph(torch.CPU)
		n, e := g.NumNodes, g.NumEdges
		ints := torch.Options{DType: torch.Int64}
		nodes := torch.Arange(0, float64(n), 1, ints)
		degree := g.RowPtr.Narrow(0, 1, n).Sub(g.RowPtr.Narrow(0, 0, n))
		pad := g.NodeGraph.MulScalar(float64(g.MaxNodes)).Add(nodes.Sub(g.GraphPtr.IndexSelect(0, g.NodeGraph)))
		const k = 5
		slot := g.NodeGraph.MulScalar(k).Add(torch.FromSlice(randomInts(r, int(n), k)))
		cand := slot.IndexSelect(0, g.Src)
		key := g.Dst.MulScalar(float64(g.NumGraphs * k)).Add(cand)
		_, order := key.Sort(0, false)
		sorted := key.IndexSelect(0, order)
		differs := sorted.Narrow(0, 1, e-1).Ne(sorted.Narrow(0, 0, e-1)).ToDType(torch.Int64)
		firstSorted := torch.Cat([]*torch.Tensor{torch.Ones([]int64{1}, ints), differs}, 0)
		first := torch.Zeros([]int64{e}, ints).Scatter(0, order, firstSorted)
		same := cand.IndexSelect(0, g.PairLater).Ne(cand.IndexSelect(0, g.PairEarlier)).LogicalNot().ToDType(torch.Int64)
		repeats := torch.Zeros([]int64{e}, ints).IndexAdd(0, g.PairLater, same)
		for _, c := range []struct {
			name      string
			got, want *torch.Tensor
		}{
			{"nodes", g.Nodes, nodes}, {"in-degree", g.Degree, degree}, {"padded rows", g.PadIndex, pad},
			{"first of its (destination, slot)", repeats.LtScalar(1).ToDType(torch.Int64), first},
		} {
			if got, want := torch.ToSlice[int64](c.got), torch.ToSlice[int64](c.want); !slices.Equal(got, want) {
				t.Errorf("trial %d, %s: %v, want %v", trial, c.name, got, want)
			}
		}
	}
}

func randomInts(r *rand.Rand, n, below int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(r.IntN(below))
	}
	return out
}
