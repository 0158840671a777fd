package feed

import (
	"errors"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// digest summarises every field of a batch, so that sequences can be compared
// after the buffers have been reused.
func digest(b *Batch) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	for _, s := range [][]int64{b.X, b.EdgeSrc, b.EdgeDst, b.RowPtr, b.EdgeAttr, b.NodeGraph, b.GraphPtr} {
		put(uint64(len(s)))
		for _, v := range s {
			put(uint64(v))
		}
	}
	for _, v := range b.Graphs {
		put(uint64(v))
	}
	for i, v := range b.Labels {
		put(uint64(math.Float32bits(v)))
		if b.LabelMask[i] {
			put(1)
		}
	}
	for _, v := range b.AtomGroup {
		put(uint64(v))
	}
	return h.Sum64()
}

type step struct {
	pos    Position
	graphs []int32
	digest uint64
}

// drain reads up to n batches (all, when n < 0) and releases each.
func drain(t *testing.T, l *Loader, n int) []step {
	t.Helper()
	var steps []step
	for n < 0 || len(steps) < n {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, step{b.Pos, slices.Clone(b.Graphs), digest(b)})
		l.Release(b)
	}
	return steps
}

func newLoader(t *testing.T, cfg LoaderConfig) *Loader {
	t.Helper()
	l, err := NewLoader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Acceptance: the same seed gives the identical batch sequence with 1 and 4
// workers (and any prefetch depth).
func TestLoaderSequenceIndependentOfWorkers(t *testing.T) {
	d := synthDataset(t)
	base := LoaderConfig{Dataset: d, Indices: d.Split.Train, BatchSize: 96, Shuffle: true, Seed: 42, DropLast: true, Epochs: 3}
	var runs [][]step
	for _, w := range []struct{ workers, prefetch int }{{1, 0}, {4, 0}, {4, 1}, {3, 9}} {
		cfg := base
		cfg.Workers, cfg.Prefetch = w.workers, w.prefetch
		runs = append(runs, drain(t, newLoader(t, cfg), -1))
	}
	if len(runs[0]) != 3*(1600/96) {
		t.Fatalf("%d batches, want %d", len(runs[0]), 3*(1600/96))
	}
	for i, r := range runs[1:] {
		if !slices.EqualFunc(r, runs[0], func(a, b step) bool {
			return a.pos == b.pos && a.digest == b.digest && slices.Equal(a.graphs, b.graphs)
		}) {
			t.Errorf("run %d differs from the run with one worker", i+1)
		}
	}
	// Each batch is exactly what Graphs says and Collate makes of it.
	l := newLoader(t, base)
	var ref Batch
	for _, s := range runs[0] {
		if !slices.Equal(s.graphs, l.Graphs(s.pos)) {
			t.Fatalf("%v: loader gave %v, Graphs says %v", s.pos, s.graphs, l.Graphs(s.pos))
		}
		if err := Collate(d, s.graphs, &ref); err != nil {
			t.Fatal(err)
		}
		if digest(&ref) != s.digest {
			t.Fatalf("%v: batch content differs from Collate's", s.pos)
		}
	}
}

// Acceptance: a loader started from a saved position continues the
// uninterrupted sequence exactly, within an epoch or at its boundary.
func TestLoaderResumesFromPosition(t *testing.T) {
	d := synthDataset(t)
	cfg := LoaderConfig{Dataset: d, BatchSize: 128, Shuffle: true, Seed: 7, DropLast: true, Epochs: 3, Workers: 2}
	full := drain(t, newLoader(t, cfg), -1)
	perEpoch := 2000 / 128
	for _, cut := range []int{1, 5, perEpoch, perEpoch + 3, 2*perEpoch - 1} {
		first := newLoader(t, cfg)
		head := drain(t, first, cut)
		saved := first.Position()
		first.Close()
		if want := full[cut].pos; saved != want {
			t.Fatalf("after %d batches the position is %v, want %v", cut, saved, want)
		}
		resumed := cfg
		resumed.Start = saved
		resumed.Workers = 3 // resuming on another machine shape changes nothing
		tail := drain(t, newLoader(t, resumed), -1)
		got := append(head, tail...)
		if !slices.EqualFunc(got, full, func(a, b step) bool { return a.pos == b.pos && a.digest == b.digest }) {
			t.Errorf("resuming at %v does not reproduce the uninterrupted sequence", saved)
		}
	}
}

func TestLoaderEpochs(t *testing.T) {
	d := threeMolecules()
	idx := []int32{2, 0, 1}

	// In order without shuffling; the last, smaller batch is kept unless drop-last.
	steps := drain(t, newLoader(t, LoaderConfig{Dataset: d, Indices: idx, BatchSize: 2, Epochs: 2}), -1)
	want := [][]int32{{2, 0}, {1}, {2, 0}, {1}}
	if len(steps) != len(want) {
		t.Fatalf("%d batches, want %d", len(steps), len(want))
	}
	for i, s := range steps {
		if !slices.Equal(s.graphs, want[i]) || s.pos != (Position{i / 2, i % 2}) {
			t.Errorf("batch %d: %v at %v, want %v", i, s.graphs, s.pos, want[i])
		}
	}
	if n := len(drain(t, newLoader(t, LoaderConfig{Dataset: d, Indices: idx, BatchSize: 2, DropLast: true, Epochs: 2}), -1)); n != 2 {
		t.Errorf("drop-last: %d batches, want 2", n)
	}

	// Shuffled: every epoch is a permutation of the indices, epochs differ,
	// and the order depends on the seed.
	s := synthDataset(t)
	l := newLoader(t, LoaderConfig{Dataset: s, BatchSize: 500, Shuffle: true, Seed: 1})
	epochs := [][]int32{nil, nil, nil}
	for e := range epochs {
		for k := range l.BatchesPerEpoch() {
			epochs[e] = append(epochs[e], l.Graphs(Position{e, k})...)
		}
		sorted := slices.Sorted(slices.Values(epochs[e]))
		if !slices.Equal(sorted, s.All()) {
			t.Fatalf("epoch %d is not a permutation of the dataset", e)
		}
	}
	if slices.Equal(epochs[0], epochs[1]) || slices.Equal(epochs[1], epochs[2]) {
		t.Error("two epochs share their order")
	}
	other := newLoader(t, LoaderConfig{Dataset: s, BatchSize: 500, Shuffle: true, Seed: 2})
	if slices.Equal(other.Graphs(Position{0, 0}), l.Graphs(Position{0, 0})) {
		t.Error("seeds 1 and 2 give the same first batch")
	}

	// A start past an epoch's end is the matching position of a later epoch.
	late := newLoader(t, LoaderConfig{Dataset: d, Indices: idx, BatchSize: 2, Start: Position{0, 5}})
	if late.Position() != (Position{2, 1}) {
		t.Errorf("start {0 5} with 2 batches per epoch became %v, want {2 1}", late.Position())
	}
	if _, err := NewLoader(LoaderConfig{Dataset: d, Indices: idx, BatchSize: 4, DropLast: true}); err == nil {
		t.Error("3 molecules with batch 4 and drop-last accepted")
	}
}

// The Prepare hook runs on the workers for every batch before Next returns
// it, keeps its per-buffer state in Aux across reuse, and its error stops
// the loader.
func TestLoaderPrepare(t *testing.T) {
	d := synthDataset(t)
	var calls, buffers atomic.Int64
	cfg := LoaderConfig{Dataset: d, BatchSize: 100, Epochs: 2, Workers: 2, Prefetch: 2,
		Prepare: func(b *Batch) error {
			calls.Add(1)
			if b.Aux == nil {
				b.Aux = new(int)
				buffers.Add(1)
			}
			*b.Aux.(*int) = len(b.Graphs) // as a device copy would mirror the batch
			return nil
		}}
	l := newLoader(t, cfg)
	n := 0
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if *b.Aux.(*int) != len(b.Graphs) {
			t.Fatal("Next returned a batch before Prepare finished with it")
		}
		n++
		l.Release(b)
	}
	if n != 40 || calls.Load() != 40 {
		t.Errorf("%d batches, %d Prepare calls; want 40 each", n, calls.Load())
	}
	if buffers.Load() > 3 {
		t.Errorf("%d buffers for prefetch 2; want at most 3", buffers.Load())
	}

	cfg.Prepare = func(b *Batch) error {
		if b.Pos.Batch == 3 {
			return errors.New("device full")
		}
		return nil
	}
	bad := newLoader(t, cfg)
	got := drain(t, bad, 3)
	if len(got) != 3 {
		t.Fatalf("%d batches before the failing one", len(got))
	}
	if _, err := bad.Next(); err == nil || !strings.Contains(err.Error(), "epoch 0 batch 3: device full") {
		t.Errorf("error %v, want the hook's, with the position", err)
	}
}

// Prefetch is bounded: a consumer holding every buffer gets an error instead
// of waiting forever, and releasing one lets the loader go on.
func TestLoaderBoundedBuffers(t *testing.T) {
	d := synthDataset(t)
	l := newLoader(t, LoaderConfig{Dataset: d, BatchSize: 50, Workers: 2, Prefetch: 2})
	var held []*Batch
	for range 3 {
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	if _, err := l.Next(); err == nil || !strings.Contains(err.Error(), "all 3 buffers are held") {
		t.Fatalf("fourth Next with every buffer held: %v", err)
	}
	l.Release(held[0])
	b, err := l.Next()
	if err != nil || b.Pos != (Position{0, 3}) {
		t.Fatalf("after a release: %v at %v", err, b.Pos)
	}
	if b != held[0] {
		t.Error("the released buffer was not the one reused")
	}
}

// A data-parallel job's loaders (one shard each) together collate exactly
// the batches of one loader, each shard a consecutive part of the batch cut
// by atoms (atomCuts); with two shards the cut leaves the smallest
// difference of atoms of any cut, found here by trying them all; an
// incomplete last batch is cut the same way, each shard keeping a molecule;
// a batch size the shards do not divide is refused.
func TestLoaderShardsSplitTheGlobalBatch(t *testing.T) {
	d := synthDataset(t)
	base := LoaderConfig{Dataset: d, Indices: d.Split.Train, BatchSize: 96, Shuffle: true, Seed: 3, DropLast: true, Epochs: 2}
	whole := drain(t, newLoader(t, base), -1)
	atomsOf := func(graphs []int32) []int {
		out := make([]int, len(graphs))
		for i, g := range graphs {
			v, err := d.Graph(int(g))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = v.NumAtoms()
		}
		return out
	}
	sum := func(a []int) (s int) {
		for _, v := range a {
			s += v
		}
		return s
	}
	uneven := 0 // batches whose parts differ in molecules
	for _, shards := range []int{2, 3} {
		parts := make([][]step, shards)
		for k := range shards {
			cfg := base
			cfg.Shard, cfg.Shards = k, shards
			parts[k] = drain(t, newLoader(t, cfg), -1)
			if len(parts[k]) != len(whole) {
				t.Fatalf("shard %d of %d: %d batches, want %d", k, shards, len(parts[k]), len(whole))
			}
		}
		for i, w := range whole {
			var joined []int32
			for k := range shards {
				if parts[k][i].pos != w.pos || len(parts[k][i].graphs) == 0 {
					t.Fatalf("shard %d of %d, batch %d: %v with %d molecules", k, shards, i, parts[k][i].pos, len(parts[k][i].graphs))
				}
				if len(parts[k][i].graphs) != 96/shards {
					uneven++
				}
				joined = append(joined, parts[k][i].graphs...)
			}
			if !slices.Equal(joined, w.graphs) {
				t.Fatalf("%d shards, %v: together %v, one loader %v", shards, w.pos, joined, w.graphs)
			}
			if shards != 2 {
				continue
			}
			atoms := atomsOf(w.graphs)
			got := sum(atomsOf(parts[1][i].graphs)) - sum(atomsOf(parts[0][i].graphs))
			best := math.MaxInt
			for cut := 1; cut < len(atoms); cut++ {
				best = min(best, max(sum(atoms[cut:])-sum(atoms[:cut]), sum(atoms[:cut])-sum(atoms[cut:])))
			}
			if max(got, -got) != best {
				t.Errorf("%v: the two parts differ by %d atoms, the best cut by %d", w.pos, max(got, -got), best)
			}
		}
	}
	if uneven == 0 {
		t.Error("every part has as many molecules as the others: the split did not look at atoms")
	}
	// Without DropLast, the incomplete last batch (100 molecules in batches
	// of 12: 4 left) is cut by atoms too, every shard keeping a molecule.
	tail := LoaderConfig{Dataset: d, Indices: d.Split.Train[:100], BatchSize: 12, Shuffle: true, Seed: 5, Epochs: 1}
	whole = drain(t, newLoader(t, tail), -1)
	if len(whole) != 9 || len(whole[8].graphs) != 4 {
		t.Fatalf("one loader: %d batches, the last of %d molecules; want 9 and 4", len(whole), len(whole[len(whole)-1].graphs))
	}
	for _, shards := range []int{2, 3} {
		var joined []int32
		for k := range shards {
			cfg := tail
			cfg.Shard, cfg.Shards = k, shards
			parts := drain(t, newLoader(t, cfg), -1)
			if len(parts) != 9 || len(parts[8].graphs) == 0 {
				t.Fatalf("shard %d of %d: %d batches, the last of %d molecules; want 9 and some", k, shards, len(parts), len(parts[len(parts)-1].graphs))
			}
			joined = append(joined, parts[8].graphs...)
		}
		if !slices.Equal(joined, whole[8].graphs) {
			t.Errorf("%d shards: the last batch together %v, one loader %v", shards, joined, whole[8].graphs)
		}
	}
	bad := base
	bad.Shard, bad.Shards = 0, 5
	if _, err := NewLoader(bad); err == nil || !strings.Contains(err.Error(), "part 0 of 5 of a batch of 96") {
		t.Fatalf("batch 96 in 5 shards: %v", err)
	}
}

// atomCuts on hand-computed cases: each cut at the boundary nearest r/k of
// the atoms, the earliest of ties, every part with a molecule where there
// are enough.
func TestAtomCuts(t *testing.T) {
	for _, tc := range []struct {
		atoms []int
		k     int
		want  []int
	}{
		{[]int{1, 1, 1, 1}, 2, []int{0, 2, 4}},
		{[]int{10, 10, 1, 1, 1, 1}, 2, []int{0, 1, 6}},         // 10 | 14, not 21 | 3 by count
		{[]int{30, 1, 1, 1}, 2, []int{0, 1, 4}},                // one molecule outweighs the rest
		{[]int{1, 2, 1}, 2, []int{0, 1, 3}},                    // 1 | 3 and 3 | 1 tie: the earlier
		{[]int{5, 1, 1, 1, 1, 5}, 3, []int{0, 1, 5, 6}},        // 5 | 4 | 5 of 14
		{[]int{1, 1, 1, 1, 1, 1, 1, 20}, 3, []int{0, 6, 7, 8}}, // every part keeps a molecule
		{[]int{3}, 2, []int{0, 1, 1}},                          // fewer molecules than parts
		{[]int{3}, 3, []int{0, 1, 1, 1}},                       // the empty parts stay at the end
	} {
		if got := atomCuts(tc.atoms, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("atomCuts(%v, %d) = %v, want %v", tc.atoms, tc.k, got, tc.want)
		}
	}
}

// Graphs returns the molecules of the batch at p (this shard's part): a pure
// function of the configuration and p. Only tests ask for it.
func (l *Loader) Graphs(p Position) []int32 {
	perm := l.permutation(p.Epoch)
	return append([]int32(nil), l.slice(perm, p.Batch)...)
}
