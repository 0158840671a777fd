package pretrain

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data/corpus"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/torch/optim"
)

// Options say how a run starts and joins others; where it runs (the
// device, threads, workers, dataset cache, progress and stop signal) is the
// runenv.Env it is given.
type Options struct {
	// Resume continues RUNDIR from its newest readable checkpoint.
	Resume bool
	// Opened, if set, is called once the data is open (a CSV featurised),
	// before anything is written: from then on a Stop ends the run with a
	// checkpoint.
	Opened func()
	// Job, with WorldSize > 1, makes this process one rank of a
	// data-parallel run (usually distributed.FromEnv's torchrun
	// environment); nil runs alone.
	Job *distributed.Env
	// Timeout bounds the rendezvous and every collective of a data-parallel
	// run, so that a rank that dies or hangs ends the others; 0 means
	// DefaultTimeout.
	Timeout time.Duration
}

// Result summarises a finished or stopped run.
type Result struct {
	Steps      int64  // optimiser steps done in all
	Checkpoint string // the last checkpoint written; empty when stopped before anything was written
	Stopped    bool   // ended early by Stop
	Filter     data.FilterStats
}

// Run runs MICRO-Graph pre-training (docs/method.md §3) in folder run:
// config.json, log.jsonl with one line per logged step, and checkpoints/.
// Killed at any moment and resumed, it logs exactly what an uninterrupted run
// logs (on the CPU), because the model, the optimiser, the random generators
// and the data position all come back from the checkpoint. env.Progress
// receives the progress display (a bar on a terminal) and messages; closing
// env.Stop ends the run after the current step with a checkpoint.
func Run(run string, cfg runfolder.Config, env runenv.Env, opt Options) (*Result, error) {
	return runenv.Run(env, cfg.Validate, func() (*Result, error) { return runPretraining(run, cfg, env, opt) })
}

// runPretraining is Run after runenv's prologue.
func runPretraining(run string, cfg runfolder.Config, env runenv.Env, opt Options) (res *Result, err error) {
	if !opt.Resume {
		// The run records where its data is from anywhere: a resume from
		// another working folder finds it.
		if abs, err := filepath.Abs(cfg.Data); err == nil {
			cfg.Data = abs
		}
	}
	// Everything that can be refused is checked before RUNDIR is touched.
	// env.Stop closed while a CSV is featurised into the cache ends Run at
	// once with nothing written (Result.Stopped without a Checkpoint).
	se, err := openSession(cfg, env)
	if errors.Is(err, data.ErrStopped) {
		return &Result{Stopped: true}, nil // while featurising: nothing written
	}
	if err != nil {
		return nil, err
	}
	defer se.close()
	if opt.Opened != nil {
		opt.Opened()
	}
	cfg.DataKey = se.set.Key
	if opt.Job != nil && opt.Job.WorldSize > 1 && cfg.Model.Released != nil {
		se.close()
		return nil, field.Errorf("model.released", "set", "trains in one process only: the data-parallel form of §3.3 is the paper objective's")
	}
	jb, err := joinJob(cfg, opt, se.dev)
	if err != nil {
		return nil, err
	}
	defer jb.close()
	if err := jb.sameConfig(cfg); err != nil {
		return nil, err
	}
	se.job = jb
	// Rank 0 alone writes the run folder; the others read its checkpoint.
	var ck *runfolder.Checkpoint
	if jb.Rank() == 0 {
		var release func(*error)
		if ck, release, err = runfolder.Prepare(run, &cfg, opt.Resume); err != nil {
			return nil, err
		}
		defer release(&err)
	}
	// Unwinding runs these before release, which must see a failed tensor
	// op's error to remove a new run's folder: first the recovery, then, for
	// a failed collective, the line that says another rank failed.
	defer func() { err = jb.explain(err) }()
	defer torch.Recover(&err)
	if ck, err = jb.sameCheckpoint(run, ck); err != nil {
		return nil, err
	}
	if ck != nil {
		defer ck.Free()
	}
	se.cfg = cfg // as runfolder.Prepare completed it when resuming
	res = &Result{Filter: se.filter}

	// Model and optimiser, from the checkpoint when resuming.
	m, adam, err := se.newModel()
	if err != nil {
		return nil, err
	}
	defer m.Free()
	defer adam.Free()
	dev := se.dev
	var step int64
	var start feed.Position
	var rngMissing []string
	if ck != nil {
		if rngMissing, err = restore(ck, m, adam, dev, jb.Rank()); err != nil {
			return nil, err
		}
		step, start = ck.Step, ck.Position
	}
	if jb != nil {
		if err := jb.attach(m, m.Store.State(), cfg); err != nil {
			return nil, err
		}
	}
	initialised := 0 // subgraphs the released objective's motif table was initialised from
	if ck == nil && cfg.Model.Released != nil {
		if initialised, err = se.initMotifs(m); err != nil {
			return nil, err
		}
	}

	loader, err := se.newLoader(cfg.Epochs, start)
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	perEpoch := int64(loader.BatchesPerEpoch())
	total := perEpoch * int64(cfg.Epochs)
	if cfg.MaxSteps > 0 {
		total = min(total, int64(cfg.MaxSteps))
	}

	var runLog *runfolder.Log
	progressTo := env.Terminal()
	if jb.Rank() == 0 {
		if runLog, err = runfolder.OpenLog(run, step); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := runLog.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
	} else {
		progressTo = nil // rank 0 speaks for the run
	}
	bar := newProgress(progressTo, step, total, perEpoch)
	defer bar.finish()
	bar.printf("micrograph: %s: %d molecules for pre-training (%d left out: %d under η=%d atoms, %d without bonds, %d with isolated atoms); %d steps per epoch",
		cfg.Data, se.filter.Kept, se.filter.Removed(), se.filter.TooSmall, cfg.Model.Eta, se.filter.NoBonds, se.filter.IsolatedAtoms, perEpoch)
	if cfg.Model.Released != nil {
		bar.printf("micrograph: the released objective (docs/method.md §12), %s sampler", cfg.Model.Sampler)
		if initialised > 0 {
			bar.printf("micrograph: motif table initialised at the k-means centres of %d subgraphs of the first %d batches", initialised, cfg.Model.Released.InitBatches)
		}
	}
	if jb != nil {
		bar.printf("micrograph: %d processes (%s) of %d libtorch thread(s), %d molecules each per step of %d", jb.Size(), distributed.Backend(dev), torch.NumThreads(), cfg.BatchSize/jb.Size(), cfg.BatchSize)
	}
	if ck != nil {
		bar.printf("micrograph: resuming %s at step %d (%s)", ck.Path, step, start)
		if ck.World != jb.Size() {
			bar.printf("micrograph: %s was written by %d process(es), this run has %d: the batch sequence continues, each process's random draws (dropout, subgraph perturbations) do not",
				ck.Path, ck.World, jb.Size())
		}
		if ck.Threads > 0 && ck.Threads != torch.NumThreads() {
			bar.printf("micrograph: %s was written by processes of %d libtorch thread(s), this run's have %d: sums that libtorch splits over threads may round differently",
				ck.Path, ck.Threads, torch.NumThreads())
		}
		if len(rngMissing) > 0 {
			bar.printf("micrograph: %s holds no state for the %s generator(s): they continue from the run's seed %d, so random draws (dropout, subgraph perturbations) differ from an uninterrupted run",
				ck.Path, strings.Join(rngMissing, ", "), cfg.Seed)
		}
	}

	t := &pretrainer{cfg: cfg, run: run, dev: dev, job: jb, model: m, adam: adam, clipGroups: m.ClipGroups(),
		loader: loader, log: runLog, bar: bar, lastLog: time.Now()}
	checkpointed := step
	for step < total {
		asked := false
		select {
		case <-env.Stop:
			asked = true
		default:
		}
		// Alone, a stop is obeyed at once; in a job every rank stops after
		// the step whose summed losses carry the first rank's request.
		if asked && jb == nil || t.stopAgreed {
			res.Stopped = true
		}
		if res.Stopped {
			break
		}
		b, err := loader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if t.pending != nil {
				t.pending.values.Free()
			}
			return nil, err
		}
		step++
		values, skipped, err := t.step(b, asked) // queued on the device, not yet read
		next := &pendingStep{step: step, epoch: b.Pos.Epoch + 1, values: values, skipped: skipped,
			molecules: b.NumGraphs() * jb.Size(), queued: time.Now()}
		loader.Release(b)
		if err != nil {
			if t.pending != nil {
				t.pending.values.Free()
			}
			return nil, err
		}
		// Read the previous step's losses now that this one is queued: the
		// device never waits for the host.
		if err := t.flush(); err != nil {
			next.values.Free()
			return nil, err
		}
		t.pending = next
		if step%int64(cfg.CheckpointEvery) == 0 {
			if err := t.checkpoint(step); err != nil {
				return nil, err
			}
			checkpointed = step
		}
	}
	if err := t.flush(); err != nil {
		return nil, err
	}
	if step > checkpointed || ck == nil && step == 0 {
		if err := t.checkpoint(step); err != nil {
			return nil, err
		}
	}
	res.Steps, res.Checkpoint = step, t.lastCheckpoint
	if res.Checkpoint == "" && ck != nil {
		res.Checkpoint = ck.Path
	}
	return res, nil
}

// pretrainer carries a run's state through its steps.
type pretrainer struct {
	cfg   runfolder.Config
	run   string
	dev   torch.Device
	job   *job // nil alone
	model *model.MicroGraph
	adam  *optim.Adam
	// clipGroups are the model's gradient-clipping groups, listed once.
	clipGroups [][]*torch.Tensor
	loader     *feed.Loader
	log        *runfolder.Log
	bar        *progress

	pending        *pendingStep
	molecules      int       // since the last log line
	lastLog        time.Time // when the step of the last log line was queued
	lastCheckpoint string
	stopAgreed     bool // a rank asked to stop, as the last flushed step says
}

// pendingStep is a step whose losses are still on the device.
type pendingStep struct {
	step      int64
	epoch     int
	values    *torch.Tensor // total, node_mot, mot_sub, reg, contra, subgraphs; in a job also stop (ranks asking to stop)
	skipped   bool
	molecules int
	queued    time.Time // once steps are queued as fast as the device runs them, their spacing is its pace
}

// step runs one optimiser step on a batch and returns its losses, stacked
// and still on the device. With SkipNonFinite it reads the loss first and
// skips the update of a non-finite one. In a data-parallel job the losses are
// the global batch's means (see globalShares), the gradients are summed
// across ranks, and stop says that this rank was asked to stop; a failed
// collective is the error (or, within the model's maths, a panic as any
// failed tensor op).
func (t *pretrainer) step(b *feed.Batch, stop bool) (values *torch.Tensor, skipped bool, err error) {
	s := torch.NewScope()
	defer s.Close()
	out := t.model.Forward(b.Graph(t.dev), true)
	l := out.Losses
	if t.job != nil {
		l = t.job.globalShares(t.model, out)
	}
	t.adam.ZeroGrad()
	l.Total.Backward()
	parts := []*torch.Tensor{l.Total}
	for _, p := range l.Parts {
		parts = append(parts, p.Tensor)
	}
	parts = append(parts, l.Subgraphs.ToDType(l.Total.DType()))
	if t.job != nil {
		// A rank's stop request travels with the losses it sums.
		stopFlag := 0.0
		if stop {
			stopFlag = 1
		}
		parts = append(parts, torch.Full(nil, stopFlag, torch.Options{DType: l.Total.DType(), Device: t.dev}))
	}
	values = torch.Stack(parts, 0).ToDType(torch.Float64)
	if t.job != nil {
		if err := t.job.group.AllReduce(values, torch.ReduceSum); err != nil {
			return nil, false, err
		}
		if err := distributed.SumGradients(t.job.group, t.job.params(t.model)); err != nil {
			return nil, false, err
		}
	}
	if t.cfg.ClipGradNorm > 0 {
		for _, group := range t.clipGroups {
			torch.ClipGradNorm(group, t.cfg.ClipGradNorm)
		}
	}
	if t.cfg.SkipNonFinite && !metrics.IsFinite(values.Narrow(0, 0, 1).Item()) {
		t.adam.ZeroGrad()
		skipped = true
	} else {
		t.adam.Step()
	}
	return s.Keep(values), skipped, nil
}

// flush reads the pending step's losses, logs them, and stops the run on a
// non-finite loss unless it was skipped.
func (t *pretrainer) flush() error {
	p := t.pending
	if p == nil {
		return nil
	}
	t.pending = nil
	v := torch.ToSlice[float64](p.values)
	p.values.Free()
	// v: the loss, its parts, the subgraphs and, in a job, the stop flag.
	names := model.PartNames(t.cfg.Model)
	r := runfolder.LogRecord{Step: p.step, Epoch: p.epoch, Loss: metrics.Value(v[0]),
		Subgraphs: int64(v[1+len(names)]), LR: metrics.Value(t.adam.LR), Skipped: p.skipped}
	for i, name := range names {
		r.Parts = append(r.Parts, runfolder.LossPart{Name: name, Value: metrics.Value(v[1+i])})
	}
	t.stopAgreed = t.stopAgreed || len(v) > 2+len(names) && v[2+len(names)] > 0 // only a job's steps carry a stop flag
	t.molecules += p.molecules
	if p.step%int64(t.cfg.LogEvery) == 0 || !metrics.IsFinite(v[0]) {
		r.MoleculesPerS = metrics.Value(float64(t.molecules) / p.queued.Sub(t.lastLog).Seconds())
		t.molecules, t.lastLog = 0, p.queued
		if t.log != nil {
			if err := t.log.Write(r); err != nil {
				return err
			}
		}
		t.bar.update(r)
	}
	if !metrics.IsFinite(v[0]) && !p.skipped {
		e := &NonFiniteLossError{Step: p.step, Loss: v[0], Parts: r.Parts}
		if paths, _ := runfolder.ReadableCheckpoints(t.run, nil); len(paths) > 0 {
			e.LastCheckpoint = paths[0]
		}
		return e
	}
	if p.skipped {
		t.bar.printf("micrograph: step %d: non-finite loss %v, update skipped", p.step, v[0])
	}
	return nil
}

// NonFiniteLossError stops a run whose loss became NaN or infinite (unless
// Config.SkipNonFinite skips such batches); nothing of that step is saved.
type NonFiniteLossError struct {
	Step           int64
	Loss           float64
	Parts          []runfolder.LossPart
	LastCheckpoint string // the newest checkpoint, which resuming continues from; "" if none
}

func (e *NonFiniteLossError) Error() string {
	where := "no checkpoint was written yet"
	if e.LastCheckpoint != "" {
		where = "the last good checkpoint is " + e.LastCheckpoint
	}
	parts := make([]string, len(e.Parts))
	for i, p := range e.Parts {
		parts[i] = fmt.Sprintf("%s %v", p.Name, float64(p.Value))
	}
	return fmt.Sprintf("step %d: the loss is %v (%s); stopped without saving: %s",
		e.Step, e.Loss, strings.Join(parts, ", "), where)
}

// checkpoint saves the run's state after step (flushing first, so that a
// checkpoint never holds the result of a non-finite step).
func (t *pretrainer) checkpoint(step int64) error {
	if err := t.flush(); err != nil {
		return err
	}
	rngs, err := t.job.gatherRNG()
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	defer func() {
		for _, n := range rngs {
			n.Tensor.Free()
		}
	}()
	if t.job.Rank() != 0 {
		return nil
	}
	path, err := runfolder.SaveCheckpoint(t.run, step, t.loader.Position(), t.cfg, t.model, t.adam, rngs, t.job.Size(), torch.NumThreads())
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	t.lastCheckpoint = path
	return nil
}

// session is what a run and a bench share: the device and the molecules
// pre-training uses, then the model, its optimiser and the loader.
type session struct {
	cfg     runfolder.Config
	dev     torch.Device
	workers int                 // goroutines collating batches
	job     *job                // nil alone
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
	set, err := corpus.OpenPretrainSet(cfg.Data, env.OpenOptions(), cfg.Model.Eta)
	if err != nil {
		return nil, err
	}
	if err := checkPretrainData(cfg, set.Filter); err != nil {
		set.Close()
		return nil, err
	}
	return &session{cfg: cfg, dev: dev, workers: env.Workers, set: set, indices: set.Indices, filter: set.Filter}, nil
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
		return nil, nil, err
	}
	if err := s.cfg.Precision.Apply(m.Store); err != nil {
		m.Free()
		return nil, nil, err
	}
	if r := s.job.Rank(); r > 0 {
		torch.ManualSeed(rankSeed(s.cfg.Seed, r))
	}
	if s.cfg.WeightDecay > 0 {
		return m, optim.NewAdamW(m.Store.Trainable(), s.cfg.LR, s.cfg.WeightDecay), nil
	}
	return m, optim.NewAdam(m.Store.Trainable(), s.cfg.LR), nil
}

// initMotifs sets a new released-objective run's motif table from the
// subgraphs of the run's first batches (docs/method.md §12.5); those
// batches are then trained on as usual.
func (s *session) initMotifs(m *model.MicroGraph) (subgraphs int, err error) {
	n := s.cfg.Model.Released.InitBatches
	if n == 0 {
		return 0, nil
	}
	loader, err := s.newLoader(1, feed.Position{})
	if err != nil {
		return 0, err
	}
	defer loader.Close()
	var graphs []*graph.Graph
	scope := torch.NewScope()
	defer scope.Close()
	for range n {
		b, err := loader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		graphs = append(graphs, b.Graph(s.dev))
		defer loader.Release(b) // the host structure is read until InitMotifs returns
	}
	rows, err := m.InitMotifs(graphs)
	return len(rows), err
}

// newLoader streams shuffled whole batches of the filtered molecules for
// epochs epochs (0: without end) from position start.
func (s *session) newLoader(epochs int, start feed.Position) (*feed.Loader, error) {
	return feed.NewLoader(feed.LoaderConfig{
		Dataset: s.set.Molecules, Indices: s.indices, BatchSize: s.cfg.BatchSize, Shuffle: true, Seed: s.cfg.Seed,
		DropLast: true, Epochs: epochs, Start: start, Workers: s.workers, Prepare: s.prepare,
		Shard: s.job.Rank(), Shards: s.job.Size(),
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
// checkpoint has no state for (a run moved to another device, or a file
// written before every GPU's state was saved, or a rank the run did not have
// before): those continue from --seed (rankSeed), so their draws differ from
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
