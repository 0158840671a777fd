package feed

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/micrograph/micrograph/data"
)

// Position is a point in a loader's batch sequence: batch Batch (from 0) of
// epoch Epoch (from 0). A checkpoint stores Loader.Position, the next batch
// to train on, and a loader started there continues the sequence exactly.
type Position struct {
	Epoch int
	Batch int
}

// String reads "epoch E batch B", as positions appear in errors and logs.
func (p Position) String() string { return fmt.Sprintf("epoch %d batch %d", p.Epoch, p.Batch) }

// LoaderConfig describes a stream of batches. The molecules of batch k of
// epoch e depend only on Indices, BatchSize, Shuffle, Seed, DropLast, e and
// k: never on Workers, Prefetch or timing.
type LoaderConfig struct {
	Dataset   data.Molecules
	Indices   []int32 // molecules to draw from (a split, after data.PretrainFilter); nil means all
	BatchSize int
	Shuffle   bool     // a new permutation each epoch, drawn from (Seed, epoch)
	Seed      uint64   // seed of the shuffles
	DropLast  bool     // leave out each epoch's last batch when it is smaller
	Epochs    int      // Next reports io.EOF after this many epochs; 0 means never
	Start     Position // the first batch to produce, e.g. from a checkpoint

	// Shard, when Shards > 1, makes this loader one rank's of a
	// data-parallel job: of each global batch of BatchSize molecules it
	// collates only part Shard (from 0) of Shards consecutive parts, so that
	// the ranks together see exactly the batches one loader would. The parts
	// are cut where their atoms come nearest equal (atomCuts), as a step's
	// time grows with its atoms: a pure function of the batch, whatever
	// the rank or the run's history. BatchSize must be a multiple of Shards.
	Shard, Shards int

	Workers  int // goroutines collating batches; 0 means 1
	Prefetch int // batches made ready ahead of the consumer; 0 means 2×Workers

	// Prepare, when set, runs on the worker goroutine after collation, e.g.
	// to copy the batch into pinned host memory and start its transfer to
	// the GPU; it may keep per-buffer state in Batch.Aux. An error stops the
	// loader and is returned by Next.
	Prepare func(*Batch) error
}

// Loader produces collated batches in the background: worker goroutines
// build up to Prefetch batches ahead into a fixed set of recycled buffers,
// and Next hands them out strictly in sequence order. Each batch must be
// handed back with Release once the consumer is done with it.
type Loader struct {
	cfg      LoaderConfig
	indices  []int32
	perEpoch int
	buffers  []*Batch // every buffer, wherever it is

	free  chan *Batch // buffers ready for reuse
	jobs  chan *Batch // buffers to fill, with Pos and want set
	order chan *Batch // the same buffers in sequence order, for Next
	quit  chan struct{}
	wg    sync.WaitGroup

	next   Position     // position of the batch Next returns next
	held   atomic.Int64 // batches handed out and not yet released
	err    error        // first failure; sticky
	closed bool
}

// loaderJob is a buffer's work order: which molecules to collate, and where
// the worker reports completion.
type loaderJob struct {
	want []int32
	done chan error
}

// NewLoader starts the loader's goroutines; Close stops them.
func NewLoader(cfg LoaderConfig) (*Loader, error) {
	if cfg.Dataset == nil {
		return nil, errors.New("loader: no dataset")
	}
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("loader: batch size %d", cfg.BatchSize)
	}
	if shards := max(cfg.Shards, 1); cfg.BatchSize%shards != 0 || cfg.Shard < 0 || cfg.Shard >= shards {
		return nil, fmt.Errorf("loader: part %d of %d of a batch of %d", cfg.Shard, shards, cfg.BatchSize)
	}
	if cfg.Start.Epoch < 0 || cfg.Start.Batch < 0 {
		return nil, fmt.Errorf("loader: start position %v is negative", cfg.Start)
	}
	indices := cfg.Indices
	if indices == nil {
		indices = data.AllIndices(cfg.Dataset.NumGraphs())
	}
	for _, g := range indices {
		if g < 0 || int(g) >= cfg.Dataset.NumGraphs() {
			return nil, fmt.Errorf("loader: molecule %d outside 0..%d", g, cfg.Dataset.NumGraphs()-1)
		}
	}
	perEpoch := len(indices) / cfg.BatchSize
	if !cfg.DropLast && len(indices)%cfg.BatchSize != 0 {
		perEpoch++
	}
	if perEpoch == 0 {
		return nil, fmt.Errorf("loader: %d molecules make no batch of %d (drop-last %v)", len(indices), cfg.BatchSize, cfg.DropLast)
	}
	workers := max(cfg.Workers, 1)
	prefetch := cfg.Prefetch
	if prefetch <= 0 {
		prefetch = 2 * workers
	}
	// One buffer more than the prefetch depth, so that the consumer can hold
	// a batch while Prefetch others are prepared.
	buffers := prefetch + 1
	l := &Loader{
		cfg:      cfg,
		indices:  indices,
		perEpoch: perEpoch,
		free:     make(chan *Batch, buffers),
		jobs:     make(chan *Batch, buffers),
		order:    make(chan *Batch, buffers),
		quit:     make(chan struct{}),
		// A start past the end of an epoch is the start of a later epoch.
		next: Position{cfg.Start.Epoch + cfg.Start.Batch/perEpoch, cfg.Start.Batch % perEpoch},
	}
	for range buffers {
		b := &Batch{job: &loaderJob{done: make(chan error, 1)}}
		l.buffers = append(l.buffers, b)
		l.free <- b
	}
	l.wg.Add(1 + workers)
	go l.dispatch()
	for range workers {
		go l.work()
	}
	return l, nil
}

// BatchesPerEpoch is the number of batches in every epoch.
func (l *Loader) BatchesPerEpoch() int { return l.perEpoch }

// Position is where the sequence continues: the batch after the last one
// Next returned. Save it in checkpoints and pass it back as Start.
func (l *Loader) Position() Position { return l.next }

// permutation is the order of the molecules in epoch e.
func (l *Loader) permutation(epoch int) []int32 {
	perm := append([]int32(nil), l.indices...)
	if l.cfg.Shuffle {
		r := rand.New(rand.NewPCG(l.cfg.Seed, uint64(epoch)))
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	}
	return perm
}

func (l *Loader) slice(perm []int32, batch int) []int32 {
	lo := batch * l.cfg.BatchSize
	global := perm[lo:min(lo+l.cfg.BatchSize, len(perm))]
	if l.cfg.Shards <= 1 {
		return global
	}
	atoms := make([]int, len(global))
	for i, g := range global {
		// A molecule that cannot be read counts no atoms here: collating
		// it fails, and says why.
		v, _ := l.cfg.Dataset.Graph(int(g))
		atoms[i] = v.NumAtoms()
	}
	cuts := atomCuts(atoms, l.cfg.Shards)
	return global[cuts[l.cfg.Shard]:cuts[l.cfg.Shard+1]]
}

// atomCuts splits molecules with these atom counts into k consecutive
// parts whose atoms come as near equal as such parts allow: part r runs
// from cuts[r] to cuts[r+1] (cuts[0] = 0, cuts[k] = len(atoms)), each cut
// r at the boundary whose atoms before it come nearest r/k of the total
// (the earliest of ties), after the cut before it. Every part keeps at
// least one molecule where there are k.
func atomCuts(atoms []int, k int) []int {
	n := len(atoms)
	before := make([]int64, n+1) // before[i]: the atoms of molecules 0…i−1
	for i, a := range atoms {
		before[i+1] = before[i] + int64(a)
	}
	cuts := make([]int, k+1)
	cuts[k] = n
	for r := 1; r < k; r++ {
		// Distances from r/k of the total, scaled by k to stay integers.
		off := func(i int) int64 {
			d := int64(k)*before[i] - int64(r)*before[n]
			return max(d, -d)
		}
		lo := min(cuts[r-1]+1, n)
		hi := max(n-(k-r), lo)
		cuts[r] = lo
		for i := lo + 1; i <= hi; i++ {
			if off(i) < off(cuts[r]) {
				cuts[r] = i
			}
		}
	}
	return cuts
}

// dispatch assigns positions, in order, to free buffers and queues them both
// for the workers and, in the same order, for Next.
func (l *Loader) dispatch() {
	defer l.wg.Done()
	defer close(l.jobs)
	defer close(l.order)
	pos := l.next
	perm, permEpoch := []int32(nil), -1
	for l.cfg.Epochs == 0 || pos.Epoch < l.cfg.Epochs {
		var b *Batch
		select {
		case b = <-l.free:
		case <-l.quit:
			return
		}
		if pos.Epoch != permEpoch {
			perm, permEpoch = l.permutation(pos.Epoch), pos.Epoch
		}
		b.Pos = pos
		b.job.want = append(b.job.want[:0], l.slice(perm, pos.Batch)...)
		// Both channels hold every buffer, so these sends never wait.
		l.jobs <- b
		l.order <- b
		pos.Batch++
		if pos.Batch == l.perEpoch {
			pos = Position{pos.Epoch + 1, 0}
		}
	}
}

func (l *Loader) work() {
	defer l.wg.Done()
	for b := range l.jobs {
		err := Collate(l.cfg.Dataset, b.job.want, b)
		if err == nil && l.cfg.Prepare != nil {
			err = l.cfg.Prepare(b)
		}
		b.job.done <- err
	}
}

// Next returns the next batch in sequence, waiting for it if needed, or
// io.EOF after the last epoch. The batch stays valid until Release.
func (l *Loader) Next() (*Batch, error) {
	switch {
	case l.err != nil:
		return nil, l.err
	case l.closed:
		return nil, errors.New("loader: Next after Close")
	case l.held.Load() == int64(len(l.buffers)):
		return nil, fmt.Errorf("loader: all %d buffers are held by the consumer; Release batches before asking for more", len(l.buffers))
	}
	b, ok := <-l.order
	if !ok {
		return nil, io.EOF
	}
	if err := <-b.job.done; err != nil {
		l.err = fmt.Errorf("loader: %v: %w", b.Pos, err)
		return nil, l.err
	}
	l.held.Add(1)
	l.next = Position{b.Pos.Epoch, b.Pos.Batch + 1}
	if l.next.Batch == l.perEpoch {
		l.next = Position{b.Pos.Epoch + 1, 0}
	}
	return b, nil
}

// Release hands a batch from Next back for reuse. Unlike Next and Close,
// which belong to the consuming goroutine, it may be called from any
// goroutine, e.g. once an asynchronous copy of the batch has finished.
func (l *Loader) Release(b *Batch) {
	l.held.Add(-1)
	l.free <- b
}

// Close stops the goroutines and waits for them, and frees what Prepare kept
// (PinMemory's tensors); batches still held must not be used afterwards.
func (l *Loader) Close() {
	if l.closed {
		return
	}
	l.closed = true
	// The dispatcher only ever waits for a free buffer or quit, and the
	// workers stop once it closes their queue.
	close(l.quit)
	l.wg.Wait()
	// What Prepare kept per buffer (PinMemory's tensors) goes with the loader.
	for _, b := range l.buffers {
		if f, ok := b.Aux.(interface{ free() }); ok {
			f.free()
		}
		b.Aux = nil
	}
}
