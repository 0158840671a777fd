package pretrain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/micrograph/micrograph/trainer/metrics"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
)

// Options are how a run talks to its caller.
type Options struct {
	// Resume continues RUNDIR from its newest readable checkpoint.
	Resume bool
	// Progress receives the progress display and messages (usually
	// os.Stderr); nil is silent.
	Progress *os.File
	// Stop, when closed (SIGINT, SIGTERM), ends the run after the current
	// step with a checkpoint.
	Stop <-chan struct{}
	// Dataset options for opening Data.
	Dataset data.OpenOptions
}

// Result summarises a finished or stopped run.
type Result struct {
	Steps      int64  // optimiser steps done in all
	Checkpoint string // the last checkpoint written
	Stopped    bool   // ended early by Stop
	Filter     data.FilterStats
}

// Run runs MICRO-Graph pre-training (docs/method.md §3) in folder run:
// config.json, log.jsonl with one line per logged step, and checkpoints/.
// Killed at any moment and resumed, it logs exactly what an uninterrupted run
// logs (on the CPU), because the model, the optimiser, the random generators
// and the data position all come back from the checkpoint.
func Run(run string, cfg Config, opt Options) (res *Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// libtorch keeps grad mode and scopes per OS thread: drive it from one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Everything that can be refused is checked before RUNDIR is touched.
	dev, err := torch.ParseDevice(cfg.Device)
	if err != nil {
		return nil, err
	}
	ds, err := data.Open(cfg.Data, opt.Dataset)
	if err != nil {
		return nil, err
	}
	// Data: every molecule that can form a subgraph (§4's η filter), at
	// least one whole batch of them.
	indices, filter := data.PretrainFilter(ds, ds.All(), cfg.Model.Eta)
	if err := checkPretrainData(cfg, filter); err != nil {
		return nil, err
	}
	ck, release, err := prepareRun(run, &cfg, opt.Resume)
	if err != nil {
		return nil, err
	}
	defer release(&err)
	if ck != nil {
		defer ck.Free()
	}
	if cfg.Threads > 0 {
		torch.SetNumThreads(cfg.Threads)
	}
	if cfg.Deterministic {
		if err := torch.SetDeterministic(true); err != nil {
			return nil, err
		}
	}
	torch.ManualSeed(cfg.Seed)
	res = &Result{Filter: filter}

	// Model and optimiser, from the checkpoint when resuming.
	m, err := model.New(cfg.Model, dev, torch.Float32)
	if err != nil {
		return nil, err
	}
	defer m.Free()
	adam := optim.NewAdam(m.Store.Trainable(), cfg.LR)
	defer adam.Free()
	var step int64
	var start data.Position
	var rngMissing []string
	if ck != nil {
		if rngMissing, err = restore(ck, m, adam, dev); err != nil {
			return nil, err
		}
		step, start = ck.Step, ck.Position
	}

	prepare := func(*data.Batch) error { return nil }
	if dev.IsCUDA() {
		prepare = data.PinMemory
	}
	loader, err := data.NewLoader(data.LoaderConfig{
		Dataset: ds, Indices: indices, BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed,
		DropLast: true, Epochs: cfg.Epochs, Start: start, Workers: cfg.Workers, Prepare: prepare,
	})
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	perEpoch := int64(loader.BatchesPerEpoch())
	total := perEpoch * int64(cfg.Epochs)
	if cfg.MaxSteps > 0 {
		total = min(total, int64(cfg.MaxSteps))
	}

	runLog, err := openRunLog(run, step)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := runLog.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	bar := newProgress(opt.Progress, step, total, perEpoch)
	defer bar.finish()
	bar.printf("micrograph: %s: %d molecules for pre-training (%d left out: %d under η=%d atoms, %d without bonds, %d with isolated atoms); %d steps per epoch",
		cfg.Data, filter.Kept, filter.Removed(), filter.TooSmall, cfg.Model.Eta, filter.NoBonds, filter.IsolatedAtoms, perEpoch)
	if ck != nil {
		bar.printf("micrograph: resuming %s at step %d (%s)", ck.Path, step, start)
		if len(rngMissing) > 0 {
			bar.printf("micrograph: %s holds no state for the %s generator(s): they continue from --seed %d, so random draws (dropout, subgraph perturbations) differ from an uninterrupted run",
				ck.Path, strings.Join(rngMissing, ", "), cfg.Seed)
		}
	}

	t := &pretrainer{cfg: cfg, run: run, dev: dev, model: m, adam: adam, loader: loader, log: runLog, bar: bar, lastLog: time.Now()}
	checkpointed := step
	for step < total {
		select {
		case <-opt.Stop:
			res.Stopped = true
		default:
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
		values, skipped := t.step(b) // queued on the device, not yet read
		next := &pendingStep{step: step, epoch: b.Pos.Epoch + 1, values: values, skipped: skipped,
			molecules: b.NumGraphs(), queued: time.Now()}
		loader.Release(b)
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
	cfg    Config
	run    string
	dev    torch.Device
	model  *model.MicroGraph
	adam   *optim.Adam
	loader *data.Loader
	log    *runLog
	bar    *progress

	pending        *pendingStep
	molecules      int       // since the last log line
	lastLog        time.Time // when the step of the last log line was queued
	lastCheckpoint string
}

// pendingStep is a step whose losses are still on the device.
type pendingStep struct {
	step      int64
	epoch     int
	values    *torch.Tensor // total, node_mot, mot_sub, reg, contra, subgraphs
	skipped   bool
	molecules int
	queued    time.Time // once steps are queued as fast as the device runs them, their spacing is its pace
}

// step runs one optimiser step on a batch and returns its losses, stacked
// and still on the device. With SkipNonFinite it reads the loss first and
// skips the update of a non-finite one.
func (t *pretrainer) step(b *data.Batch) (values *torch.Tensor, skipped bool) {
	s := torch.NewScope()
	defer s.Close()
	out := t.model.Forward(b.Graph(t.dev), true)
	t.adam.ZeroGrad()
	out.Total.Backward()
	if t.cfg.ClipGradNorm > 0 {
		t.adam.ClipGradNorm(t.cfg.ClipGradNorm)
	}
	if t.cfg.SkipNonFinite && !metrics.IsFinite(out.Total.Item()) {
		t.adam.ZeroGrad()
		skipped = true
	} else {
		t.adam.Step()
	}
	l := out.Losses
	return s.Keep(torch.Stack([]*torch.Tensor{l.Total, l.NodeMot, l.MotSub, l.Reg, l.Contra,
		l.Subgraphs.ToDType(l.Total.DType())}, 0).ToDType(torch.Float64)), skipped
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
	r := LogRecord{
		Step: p.step, Epoch: p.epoch,
		Loss: metrics.Value(v[0]), NodeMot: metrics.Value(v[1]), MotSub: metrics.Value(v[2]), Reg: metrics.Value(v[3]), Contra: metrics.Value(v[4]),
		Subgraphs: int64(v[5]), LR: metrics.Value(t.adam.LR), Skipped: p.skipped,
	}
	t.molecules += p.molecules
	if p.step%int64(t.cfg.LogEvery) == 0 || !metrics.IsFinite(v[0]) {
		r.MoleculesPerS = metrics.Value(float64(t.molecules) / p.queued.Sub(t.lastLog).Seconds())
		t.molecules, t.lastLog = 0, p.queued
		if err := t.log.Write(r); err != nil {
			return err
		}
		t.bar.update(r)
	}
	if !metrics.IsFinite(v[0]) && !p.skipped {
		hint := "no checkpoint was written yet"
		if paths, _ := listCheckpoints(t.run); len(paths) > 0 {
			hint = "the last good checkpoint is " + paths[0] + "; --resume continues from it"
		}
		return fmt.Errorf("step %d: the loss is %v (node_mot %v, mot_sub %v, reg %v, contra %v); stopped without saving: "+
			"%s, and --skip-nonfinite skips such batches",
			p.step, v[0], v[1], v[2], v[3], v[4], hint)
	}
	if p.skipped {
		t.bar.printf("micrograph: step %d: non-finite loss %v, update skipped", p.step, v[0])
	}
	return nil
}

// checkpoint saves the run's state after step (flushing first, so that a
// checkpoint never holds the result of a non-finite step).
func (t *pretrainer) checkpoint(step int64) error {
	if err := t.flush(); err != nil {
		return err
	}
	path, err := saveCheckpoint(t.run, step, t.loader.Position(), t.cfg, t.model, t.adam)
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	t.lastCheckpoint = path
	return nil
}

// checkPretrainData refuses settings under which the filtered dataset
// makes no batch (the loader drops an incomplete last one).
func checkPretrainData(cfg Config, f data.FilterStats) error {
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

// prepareRun locks the run folder (making it for a new run) and, when
// resuming, loads the newest readable checkpoint (nil if the run has none
// yet) and checks that cfg may continue it. It writes config.json. release
// gives the lock back once the run ends; given the run's error, it first
// removes what this call made for a new run that failed before its first
// checkpoint, so that a corrected command can start it again.
func prepareRun(run string, cfg *Config, resume bool) (ck *Checkpoint, release func(*error), err error) {
	st, statErr := os.Stat(run)
	if statErr == nil && !st.IsDir() {
		return nil, nil, fmt.Errorf("run folder %s is a file", run)
	}
	if resume && statErr != nil {
		return nil, nil, fmt.Errorf("resume: %s holds no run: %w", run, statErr)
	}
	made := statErr != nil // a new run's folder, made here
	if made {
		if err := os.MkdirAll(run, 0o755); err != nil {
			return nil, nil, err
		}
	}
	lock, err := lockRun(run)
	if err != nil {
		if made {
			os.Remove(run) // empty unless another process took it meanwhile
		}
		return nil, nil, err
	}
	newRun := !resume
	unlock := func(runErr *error) {
		if newRun && *runErr != nil {
			if paths, _ := listCheckpoints(run); len(paths) == 0 {
				removeNewRun(run, made)
			}
		}
		lock.release()
	}
	defer func() {
		if err != nil {
			unlock(&err)
		}
	}()

	saved, err := ReadConfig(run)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if !resume {
		if exists {
			newRun = false // not ours to remove
			return nil, nil, fmt.Errorf("folder %s already holds a run: resume it, or choose another folder", run)
		}
		if err := WriteConfig(run, *cfg); err != nil {
			return nil, nil, err
		}
		return nil, unlock, nil
	}
	if !exists {
		return nil, nil, fmt.Errorf("resume: %s holds no run (no config.json)", run)
	}
	// A checkpoint folder that cannot be read must stop the resume: going on
	// from step 0 would truncate the log and prune the real checkpoints.
	paths, err := listCheckpoints(run)
	if err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	if len(paths) > 0 {
		var skipped []string
		if ck, skipped, err = LatestCheckpoint(run); err != nil {
			return nil, nil, err
		}
		for _, s := range skipped {
			fmt.Fprintf(os.Stderr, "micrograph: skipping an unreadable checkpoint: %s\n", s)
		}
		saved = ck.Config
	}
	if err := CheckResume(saved, *cfg); err != nil {
		if ck != nil {
			ck.Free()
		}
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	if err := WriteConfig(run, *cfg); err != nil {
		if ck != nil {
			ck.Free()
		}
		return nil, nil, err
	}
	return ck, unlock, nil
}

// removeNewRun removes what a failed new run wrote: the whole folder when
// it made it, else only the run's own files, leaving the user's folder.
func removeNewRun(run string, made bool) {
	if made {
		os.RemoveAll(run)
		return
	}
	for _, p := range []string{ConfigPath(run), LogPath(run), checkpointDir(run), LockPath(run)} {
		os.RemoveAll(p)
	}
}

// restore puts a checkpoint's model, optimiser and generator states back.
// A step draws only from the CPU generator (its dropout kernel and every
// random op on CPU tensors) and, on a GPU, from that GPU's (dropout, rand,
// bernoulli); each generator saved for a device this process has is
// restored. missing names the generators the step draws from that the
// checkpoint has no state for (a run moved to another device, or a file
// written before every GPU's state was saved): those continue from --seed, so
// their draws differ from an uninterrupted run's.
func restore(ck *Checkpoint, m *model.MicroGraph, adam *optim.Adam, dev torch.Device) (missing []string, err error) {
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
	for _, n := range ck.RNG {
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
