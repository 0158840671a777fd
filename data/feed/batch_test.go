package feed

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/testenv"
)

// threeMolecules: molecule 0 has atoms 0-1-2 with bonds (0,1) [0,0,0] and
// (1,2) [1,0,1]; molecule 1 has two atoms and the bond (1,0) [2,0,0];
// molecule 2 is one atom without bonds. Atom k's first feature is 10+k so
// that every row can be traced.
func threeMolecules() *data.Dataset {
	nan := float32(math.NaN())
	d := &data.Dataset{
		NodePtr:   []int64{0, 3, 5, 6},
		BondPtr:   []int64{0, 2, 3, 3},
		BondAtoms: []int32{0, 1, 1, 2, 1, 0},
		BondFeat:  []uint8{0, 0, 0, 1, 0, 1, 2, 0, 0},
		Labels:    []float32{1, nan, 0, 1, nan, 0},
		Tasks:     []string{"a", "b"},
		AtomGroup: []int32{0, 0, -1, 3, 3, 5},
	}
	for k := 0; k < 6; k++ {
		d.AtomFeat = append(d.AtomFeat, uint8(10+k), 0, 0, 0, 0, 0, 0, 0, uint8(k%2))
	}
	return d
}

func atomRows(ids ...int) []int64 {
	var x []int64
	for _, k := range ids {
		x = append(x, int64(10+k), 0, 0, 0, 0, 0, 0, 0, int64(k%2))
	}
	return x
}

// Batch [2, 0, 1] worked by hand: atoms are molecule 2's (batch atom 0), then
// molecule 0's (1-3), then molecule 1's (4-5). The directed edges in OGB's
// order are 1→2, 2→1, 2→3, 3→2, 5→4, 4→5; sorted stably by destination:
// 2→1 | 1→2, 3→2 | 2→3 | 5→4 | 4→5. Only atom 2 has two incoming edges,
// 1 and 2: the one pair. The largest molecule has 3 atoms, so molecule i's
// atoms pad from row 3i.
func TestCollateHandComputed(t *testing.T) {
	d := threeMolecules()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	var b Batch
	if err := Collate(d, []int32{2, 0, 1}, &b); err != nil {
		t.Fatal(err)
	}
	want := Batch{
		Graphs:    []int32{2, 0, 1},
		X:         atomRows(5, 0, 1, 2, 3, 4),
		EdgeSrc:   []int64{2, 1, 3, 2, 5, 4},
		EdgeDst:   []int64{1, 2, 2, 3, 4, 5},
		RowPtr:    []int64{0, 0, 1, 3, 4, 5, 6},
		EdgeAttr:  []int64{0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 2, 0, 0, 2, 0, 0},
		NodeGraph: []int64{0, 1, 1, 1, 2, 2},
		GraphPtr:  []int64{0, 1, 4, 6},
		Labels:    []float32{0, 0, 1, 0, 0, 1},
		LabelMask: []bool{false, true, true, false, true, true},
		AtomGroup: []int32{5, 0, 0, -1, 3, 3},
		MaxAtoms:  3,
		Nodes:     []int64{0, 1, 2, 3, 4, 5},
		InDegree:  []int64{0, 1, 2, 1, 1, 1},
		PadIndex:  []int64{0, 3, 4, 5, 6, 7},
		PairLater: []int64{2}, PairEarlier: []int64{1},
	}
	checkBatch(t, &b, &want)
	if b.NumGraphs() != 3 || b.NumAtoms() != 6 || b.NumEdges() != 6 || b.NumTasks() != 2 {
		t.Errorf("sizes %d/%d/%d/%d", b.NumGraphs(), b.NumAtoms(), b.NumEdges(), b.NumTasks())
	}

	// Reusing the buffer for a smaller batch leaves nothing of the old one.
	if err := Collate(d, []int32{1}, &b); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, &b, &Batch{
		Graphs: []int32{1}, X: atomRows(3, 4),
		EdgeSrc: []int64{1, 0}, EdgeDst: []int64{0, 1}, RowPtr: []int64{0, 1, 2},
		EdgeAttr: []int64{2, 0, 0, 2, 0, 0}, NodeGraph: []int64{0, 0}, GraphPtr: []int64{0, 2},
		Labels: []float32{0, 1}, LabelMask: []bool{true, true}, AtomGroup: []int32{3, 3},
		MaxAtoms: 2, Nodes: []int64{0, 1}, InDegree: []int64{1, 1}, PadIndex: []int64{0, 1},
		PairLater: []int64{}, PairEarlier: []int64{},
	})

	if err := Collate(d, []int32{3}, &b); err == nil {
		t.Error("molecule 3 of 3 collated")
	}
}

func checkBatch(t *testing.T, got, want *Batch) {
	t.Helper()
	fields := []struct {
		name     string
		got, wnt any
	}{
		{"Graphs", got.Graphs, want.Graphs}, {"X", got.X, want.X}, {"EdgeSrc", got.EdgeSrc, want.EdgeSrc},
		{"EdgeDst", got.EdgeDst, want.EdgeDst}, {"RowPtr", got.RowPtr, want.RowPtr}, {"EdgeAttr", got.EdgeAttr, want.EdgeAttr},
		{"NodeGraph", got.NodeGraph, want.NodeGraph}, {"GraphPtr", got.GraphPtr, want.GraphPtr},
		{"Labels", got.Labels, want.Labels}, {"LabelMask", got.LabelMask, want.LabelMask}, {"AtomGroup", got.AtomGroup, want.AtomGroup},
		{"MaxAtoms", got.MaxAtoms, want.MaxAtoms}, {"Nodes", got.Nodes, want.Nodes}, {"InDegree", got.InDegree, want.InDegree},
		{"PadIndex", got.PadIndex, want.PadIndex}, {"PairLater", got.PairLater, want.PairLater},
		{"PairEarlier", got.PairEarlier, want.PairEarlier},
	}
	for _, f := range fields {
		if !reflect.DeepEqual(f.got, f.wnt) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.wnt)
		}
	}
}

// referenceCollate is the obvious, allocating construction: list the
// directed edges in OGB's order, then sort them stably by destination.
func referenceCollate(d *data.Dataset, graphs []int32) *Batch {
	type edge struct {
		src, dst int64
		attr     []int64
	}
	b := &Batch{Graphs: slices.Clone(graphs), GraphPtr: []int64{0}}
	var edges []edge
	for i, g := range graphs {
		off := b.GraphPtr[i]
		for a := d.NodePtr[g]; a < d.NodePtr[g+1]; a++ {
			for _, v := range d.AtomFeat[a*9 : a*9+9] {
				b.X = append(b.X, int64(v))
			}
			b.NodeGraph = append(b.NodeGraph, int64(i))
			if d.AtomGroup != nil {
				b.AtomGroup = append(b.AtomGroup, d.AtomGroup[a])
			}
		}
		for k := d.BondPtr[g]; k < d.BondPtr[g+1]; k++ {
			u, v := off+int64(d.BondAtoms[2*k]), off+int64(d.BondAtoms[2*k+1])
			f := []int64{int64(d.BondFeat[3*k]), int64(d.BondFeat[3*k+1]), int64(d.BondFeat[3*k+2])}
			edges = append(edges, edge{u, v, f}, edge{v, u, f})
		}
		for j := range d.Tasks {
			v := d.Labels[int(g)*len(d.Tasks)+j]
			b.LabelMask = append(b.LabelMask, !math.IsNaN(float64(v)))
			if math.IsNaN(float64(v)) {
				v = 0
			}
			b.Labels = append(b.Labels, v)
		}
		b.GraphPtr = append(b.GraphPtr, off+int64(d.NumAtoms(int(g))))
	}
	slices.SortStableFunc(edges, func(x, y edge) int { return int(x.dst - y.dst) })
	b.RowPtr = make([]int64, len(b.NodeGraph)+1)
	for _, e := range edges {
		b.EdgeSrc = append(b.EdgeSrc, e.src)
		b.EdgeDst = append(b.EdgeDst, e.dst)
		b.EdgeAttr = append(b.EdgeAttr, e.attr...)
		b.RowPtr[e.dst+1]++
	}
	for i := 1; i < len(b.RowPtr); i++ {
		b.RowPtr[i] += b.RowPtr[i-1]
	}
	for i := range graphs {
		b.MaxAtoms = max(b.MaxAtoms, int(b.GraphPtr[i+1]-b.GraphPtr[i]))
	}
	b.PairLater, b.PairEarlier = []int64{}, []int64{}
	for l, g := range b.NodeGraph {
		b.Nodes = append(b.Nodes, int64(l))
		b.InDegree = append(b.InDegree, b.RowPtr[l+1]-b.RowPtr[l])
		b.PadIndex = append(b.PadIndex, g*int64(b.MaxAtoms)+int64(l)-b.GraphPtr[g])
	}
	for e := range b.EdgeDst {
		for earlier := range e {
			if b.EdgeDst[earlier] == b.EdgeDst[e] {
				b.PairLater, b.PairEarlier = append(b.PairLater, int64(e)), append(b.PairEarlier, int64(earlier))
			}
		}
	}
	return b
}

// Random batches of real-sized molecules, collated into one reused buffer,
// match the reference construction.
func TestCollateMatchesReference(t *testing.T) {
	d := synthDataset(t)
	r := rand.New(rand.NewPCG(1, 2))
	var b Batch
	for trial := 0; trial < 20; trial++ {
		graphs := make([]int32, 1+r.IntN(64))
		for i := range graphs {
			graphs[i] = int32(r.IntN(d.NumGraphs()))
		}
		if err := Collate(d, graphs, &b); err != nil {
			t.Fatal(err)
		}
		checkBatch(t, &b, referenceCollate(d, graphs))
	}
}

// Once the buffers have grown to the largest batch, collation allocates nothing.
func TestCollateSteadyStateAllocatesNothing(t *testing.T) {
	d := synthDataset(t)
	perm := rand.New(rand.NewPCG(3, 4)).Perm(d.NumGraphs())
	var batches [][]int32
	for lo := 0; lo+256 <= len(perm); lo += 256 {
		var g []int32
		for _, i := range perm[lo : lo+256] {
			g = append(g, int32(i))
		}
		batches = append(batches, g)
	}
	var b Batch
	for _, g := range batches {
		if err := Collate(d, g, &b); err != nil {
			t.Fatal(err)
		}
	}
	k := 0
	allocs := testing.AllocsPerRun(50, func() {
		if err := Collate(d, batches[k%len(batches)], &b); err != nil {
			t.Fatal(err)
		}
		k++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per collation in steady state", allocs)
	}
}

// BenchmarkCollate collates ogbg-molhiv in shuffled batches of 512 on one
// goroutine (run with -cpu 1 for one core) and reports molecules per second;
// -benchmem shows the allocations, which are zero after the first epoch.
func BenchmarkCollate(b *testing.B) {
	d, _, err := data.Load(testenv.SharedData(b, "ogb/ogbg_molhiv"), data.LoadOptions{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	const batchSize = 512
	l, err := NewLoader(LoaderConfig{Dataset: d, BatchSize: batchSize, Shuffle: true, Seed: 1, DropLast: true})
	if err != nil {
		b.Fatal(err)
	}
	l.Close()
	var batches [][]int32
	for k := range l.BatchesPerEpoch() {
		batches = append(batches, l.Graphs(Position{0, k}))
	}
	var batch Batch
	for _, g := range batches { // grow the buffers to the largest batch
		if err := Collate(d, g, &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := Collate(d, batches[i%len(batches)], &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "molecules/s")
}
