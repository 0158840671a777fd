package pretrain

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"

	"github.com/micrograph/micrograph/data"
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
	var initialised string // what the objective did to a new run's parameters
	if ck == nil {
		if initialised, err = se.initialise(m); err != nil {
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
	if d := m.Objective.Describe(); d != "" {
		bar.printf("micrograph: %s", d)
	}
	if initialised != "" {
		bar.printf("micrograph: %s", initialised)
	}
	if jb != nil {
		bar.printf("micrograph: %d processes (%s), %d molecules each per step of %d", jb.Size(), distributed.Backend(dev), cfg.BatchSize/jb.Size(), cfg.BatchSize)
	}
	if ck != nil {
		bar.printf("micrograph: resuming %s at step %d (%s)", ck.Path, step, start)
		if ck.World != jb.Size() {
			bar.printf("micrograph: %s was written by %d process(es), this run has %d: the batch sequence continues, each process's random draws (dropout, subgraph perturbations) do not",
				ck.Path, ck.World, jb.Size())
		}
		if len(rngMissing) > 0 {
			bar.printf("micrograph: %s holds no state for the %s generator(s): they continue from the run's seed %d, so random draws (dropout, subgraph perturbations) differ from an uninterrupted run",
				ck.Path, strings.Join(rngMissing, ", "), cfg.Seed)
		}
	}

	t := &pretrainer{cfg: cfg, run: run, dev: dev, job: jb, model: m, adam: adam, clipGroups: m.Objective.ClipGroups(),
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
