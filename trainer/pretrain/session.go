package pretrain

import (
	"fmt"
	"io"
	"slices"

	"github.com/micrograph/micrograph/data/corpus"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
)

// session is what a run and a bench share: the device and the molecules
// pre-training uses, then the model, its optimiser and the loader.
type session struct {
	cfg     runfolder.Config
	dev     torch.Device
	workers int                 // goroutines collating batches
	procs   processes           // alone, until a run joins its job
	set     *corpus.PretrainSet // the molecules: a dataset in memory, or a mapped corpus
	indices []int32             // every molecule that can form a subgraph (§4's η filter)
	filter  data.FilterStats    // what the filter left out
}

// openSession finds the device and loads and filters the dataset, refusing
// settings under which no whole batch remains; nothing is written.
func openSession(cfg runfolder.Config, env runenv.Env) (*session, error) {
	dev := env.Device
	if err := cfg.Precision.Check(dev); err != nil {
		return nil, err
	}
	opt := env.OpenOptions()
	opt.Columns = cfg.Columns
	set, err := corpus.OpenPretrainSet(cfg.Data, opt, cfg.Model.Eta)
	if err != nil {
		return nil, err
	}
	if err := checkPretrainData(cfg, set.Filter); err != nil {
		set.Close()
		return nil, err
	}
	return &session{cfg: cfg, dev: dev, workers: env.Workers, procs: alone{}, set: set, indices: set.Indices, filter: set.Filter}, nil
}

// CheckData opens cfg's data where env says, as each process of a run
// would, and closes it: a CSV is featurised into the cache once (the
// processes then read it there), and settings under which the filtered data
// makes no whole batch are refused. A launcher calls it before starting
// the processes; env.Stop ends a featurisation with data.ErrStopped.
func CheckData(cfg runfolder.Config, env runenv.Env) error {
	_, err := runenv.Run(env, cfg.Validate, func() (struct{}, error) {
		se, err := openSession(cfg, env)
		if err == nil {
			se.close()
		}
		return struct{}{}, err
	})
	return err
}

// close releases the molecules (a corpus's mappings); loaders must be
// closed first.
func (s *session) close() { s.set.Close() }

// newModel sets libtorch's determinism, seeds its generators and
// initialises the model and its Adam optimiser from that seed.
func (s *session) newModel() (*model.MicroGraph, *optim.Adam, error) {
	if s.cfg.Deterministic {
		if err := torch.SetDeterministic(true); err != nil {
			return nil, nil, err
		}
	}
	torch.ManualSeed(s.cfg.Seed)
	m, err := model.New(s.cfg.Model, s.dev, torch.Float32)
	if err != nil {
		return nil, nil, field.Within("model", err)
	}
	if err := s.cfg.Precision.Apply(m.Store); err != nil {
		m.Free()
		return nil, nil, err
	}
	if r := s.procs.Rank(); r > 0 {
		torch.ManualSeed(rankSeed(s.cfg.Seed, r))
	}
	if s.cfg.WeightDecay > 0 {
		return m, optim.NewAdamW(m.Store.Trainable(), s.cfg.LR, s.cfg.WeightDecay), nil
	}
	return m, optim.NewAdam(m.Store.Trainable(), s.cfg.LR), nil
}

// initialise lets the objective ready a new run's parameters from the
// run's first batches (the released objective's motif table,
// docs/method.md §12.5); those batches are then trained on as usual. It
// returns what the objective did, for the banner.
func (s *session) initialise(m *model.MicroGraph) (string, error) {
	var loader *feed.Loader
	var held []*feed.Batch // their host structure is read until Initialise returns
	scope := torch.NewScope()
	defer func() {
		scope.Close()
		if loader != nil {
			for _, b := range held {
				loader.Release(b)
			}
			loader.Close()
		}
	}()
	batches := func(n int) ([]*graph.Graph, error) {
		var err error
		if loader, err = s.newLoader(1, feed.Position{}); err != nil {
			return nil, err
		}
		var graphs []*graph.Graph
		for range n {
			b, err := loader.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			held = append(held, b)
			graphs = append(graphs, b.Graph(s.dev))
		}
		return graphs, nil
	}
	return m.Objective.Initialise(batches)
}

// newLoader streams shuffled whole batches of the filtered molecules for
// epochs epochs (0: without end) from position start.
func (s *session) newLoader(epochs int, start feed.Position) (*feed.Loader, error) {
	return feed.NewLoader(feed.LoaderConfig{
		Dataset: s.set.Molecules, Indices: s.indices, BatchSize: s.cfg.BatchSize, Shuffle: true, Seed: s.cfg.Seed,
		DropLast: true, Epochs: epochs, Start: start, Workers: s.workers, Prepare: s.prepare,
		Shard: s.procs.Rank(), Shards: s.procs.Size(),
	})
}

// prepare is the loaders' Prepare: staging in page-locked memory for a GPU,
// nothing otherwise.
func (s *session) prepare(b *feed.Batch) error {
	if s.dev.IsCUDA() {
		return feed.PinMemory(b)
	}
	return nil
}

// checkPretrainData refuses settings under which the filtered dataset
// makes no batch (the loader drops an incomplete last one).
func checkPretrainData(cfg runfolder.Config, f data.FilterStats) error {
	if f.Kept == 0 {
		return field.Errorf("model.eta", cfg.Model.Eta, "leaves none of the %d molecules of %s for pre-training (%d under η atoms, %d without bonds, %d with isolated atoms)",
			f.Kept+f.Removed(), cfg.Data, f.TooSmall, f.NoBonds, f.IsolatedAtoms)
	}
	if f.Kept < cfg.BatchSize {
		return field.Errorf("batch_size", cfg.BatchSize, "is more than the %d molecules of %s left for pre-training (η=%d): no whole batch",
			f.Kept, cfg.Data, cfg.Model.Eta)
	}
	return nil
}

// restore puts a checkpoint's model, optimiser and generator states back.
// A step draws only from the CPU generator (its dropout kernel and every
// random op on CPU tensors) and, on a GPU, from that GPU's (dropout, rand,
// bernoulli); each generator saved for a device this process has is
// restored. missing names the generators the step draws from that the
// checkpoint has no state for (a run moved to another device, a file that
// holds only some GPUs' states, or a rank the run did not have): those
// continue from the run's seed (rankSeed), so their draws differ from
// an uninterrupted run's. rank picks this process's states in a data-parallel
// run's checkpoint (rank 0's are those of a single process).
func restore(ck *runfolder.Checkpoint, m *model.MicroGraph, adam *optim.Adam, dev torch.Device, rank int) (missing []string, err error) {
	if err := torch.LoadState(m.Store.State(), ck.Model); err != nil {
		return nil, fmt.Errorf("%s: model: %w", ck.Path, err)
	}
	if err := adam.LoadState(ck.Optim); err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Path, err)
	}
	here := map[string]bool{}
	for _, d := range torch.Generators() {
		here[d.String()] = true
	}
	saved := map[string]bool{}
	var states []torch.Named
	for _, n := range rngOfRank(ck.RNG, rank) {
		saved[n.Name] = true
		if here[n.Name] {
			states = append(states, n)
		}
	}
	if err := torch.SetRNGStates(states); err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Path, err)
	}
	for _, d := range []torch.Device{torch.CPU, dev} {
		if name := d.String(); !saved[name] && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	return missing, nil
}
