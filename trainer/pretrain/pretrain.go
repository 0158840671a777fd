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
	// Opened, if set, is called once the data is open (a CSV featurised)
	// and the other processes of a job joined, before anything is written:
	// from then on a Stop ends the run with a checkpoint.
	Opened func()
	// Job, with WorldSize > 1, makes this process one rank of a
	// data-parallel run (usually distributed.FromEnv's torchrun
	// environment); nil runs alone.
	Job *distributed.Env
	// Timeout bounds the rendezvous and every collective of a data-parallel
	// run, so that a rank that dies or hangs ends the others; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Sinks receive the logged steps after log.jsonl and the progress
	// display do (on rank 0; other ranks write none). They stay the
	// caller's, to close after Run returns.
	Sinks []Sink
}

// Result summarises a finished or stopped run.
type Result struct {
	Steps      int64  // optimiser steps done in all
	Checkpoint string // the last checkpoint written; empty when stopped before anything was written
	Stopped    bool   // ended early by Stop
	// While says, when Stop ended the run before anything was written,
	// what it was doing: featurising the data into the cache, or waiting
	// for the other processes of the job.
	While  string
	Filter data.FilterStats
}

// Run runs MICRO-Graph pre-training (docs/method.md §3) in folder run:
// config.json, log.jsonl with one line per logged step, and checkpoints/.
// Killed at any moment and resumed, it logs exactly what an uninterrupted run
// logs (on the CPU), because the model, the optimiser, the random generators
// and the data position all come back from the checkpoint. env.Progress
// receives the progress display (a bar on a terminal) and messages; closing
// env.Stop ends the run after the current step with a checkpoint.
func Run(run string, cfg runfolder.Config, env runenv.Env, opt Options) (*Result, error) {
	validate := func() error { return check(run, cfg, opt.Resume) }
	return runenv.Run(env, validate, func() (*Result, error) { return runPretraining(run, cfg, env, opt) })
}

// check judges a run's settings and its folder, before any work.
func check(run string, cfg runfolder.Config, resume bool) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return runfolder.CheckRunFolder(run, resume)
}

// runPretraining is Run after runenv's prologue.
func runPretraining(run string, cfg runfolder.Config, env runenv.Env, opt Options) (res *Result, err error) {
	t, err := newPretrainer(run, cfg, env, opt)
	switch {
	case errors.Is(err, data.ErrStopped):
		return &Result{Stopped: true, While: "featurising " + cfg.Data + " into the cache"}, nil // nothing written
	case errors.Is(err, ErrStoppedJoining):
		return &Result{Stopped: true, While: "waiting for the other processes of the job"}, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = t.Close(err) }()
	defer torch.Recover(&err) // a failed tensor op is the error Close is given
	t.banner()
	return t.train(env.Stop)
}

// pretrainer is a run: what it trains, on what, and where it writes, from
// newPretrainer to Close.
type pretrainer struct {
	cfg     runfolder.Config
	run     string
	dev     torch.Device
	session *session
	procs   processes
	// release gives the run folder back (rank 0; nil elsewhere).
	release func(*error)
	resumed *runfolder.Checkpoint // the checkpoint the run continues; nil for a new run
	model   *model.MicroGraph
	adam    *optim.Adam
	// clipGroups are the model's gradient-clipping groups, listed once.
	clipGroups [][]*torch.Tensor
	loader     *feed.Loader
	// sinks receive the logged steps on rank 0 (none elsewhere): log.jsonl
	// and the progress display, which the run closes, then Options.Sinks.
	sinks []Sink
	own   int       // how many of sinks are the run's own
	bar   *progress // the progress display, which also shows the run's messages

	steps          int64    // optimiser steps done
	total          int64    // steps the run ends at
	rngMissing     []string // generators the resumed checkpoint has no state for
	initialised    string   // what the objective did to a new run's parameters, for the banner
	pending        *pendingStep
	molecules      int       // since the last log line
	lastLog        time.Time // when the step of the last log line was queued
	lastCheckpoint string
	stopAgreed     bool // a rank asked to stop, as the last flushed step says
}

// newPretrainer opens the data, joins the other processes, prepares the run
// folder and builds (or restores) the model, optimiser, loader, log and
// progress display. Everything that can be refused is checked before the
// run folder is touched; env.Stop closed while a CSV is featurised into
// the cache ends it at once with data.ErrStopped, and while the other
// processes are awaited with ErrStoppedJoining, nothing written.
func newPretrainer(run string, cfg runfolder.Config, env runenv.Env, opt Options) (_ *pretrainer, err error) {
	if !opt.Resume {
		// The run records where its data is from anywhere: a resume from
		// another working folder finds it.
		if abs, err := filepath.Abs(cfg.Data); err == nil {
			cfg.Data = abs
		}
	}
	se, err := openSession(cfg, env)
	if err != nil {
		return nil, err
	}
	t := &pretrainer{run: run, dev: se.dev, session: se, procs: alone{}}
	defer func() {
		if err != nil {
			err = t.Close(err)
		}
	}()
	defer torch.Recover(&err)
	cfg.DataKey = se.set.Key
	if err := t.join(cfg, opt, env.Stop); err != nil {
		return nil, err
	}
	procs := t.procs
	if opt.Opened != nil {
		opt.Opened()
	}
	// Rank 0 alone writes the run folder; the others read its checkpoint.
	if procs.Rank() == 0 {
		if t.resumed, t.release, err = runfolder.Prepare(run, &cfg, opt.Resume); err != nil {
			return nil, err
		}
	}
	if t.resumed, err = procs.sameCheckpoint(run, t.resumed); err != nil {
		return nil, err
	}
	t.cfg, se.cfg = cfg, cfg // as runfolder.Prepare completed it when resuming
	if err := t.build(cfg.Epochs); err != nil {
		return nil, err
	}
	perEpoch := int64(t.loader.BatchesPerEpoch())
	t.total = perEpoch * int64(cfg.Epochs)
	if cfg.MaxSteps > 0 {
		t.total = min(t.total, int64(cfg.MaxSteps))
	}
	if procs.Rank() > 0 {
		t.bar = newProgress(nil, t.steps, t.total, perEpoch) // rank 0 speaks for the run
		return t, nil
	}
	log, err := runfolder.OpenLog(run, t.steps)
	if err != nil {
		return nil, err
	}
	t.bar = newProgress(env.Terminal(), t.steps, t.total, perEpoch)
	t.sinks = append([]Sink{log, t.bar}, opt.Sinks...)
	t.own = 2
	return t, nil
}

// join makes this process one of the processes opt's job names (or leaves
// it alone), making sure that every one of them was given cfg; stop closed
// ends the wait for the others with ErrStoppedJoining.
func (t *pretrainer) join(cfg runfolder.Config, opt Options, stop <-chan struct{}) error {
	procs, err := joinJob(cfg, opt, t.dev, stop)
	if err != nil {
		return err
	}
	t.procs, t.session.procs = procs, procs
	return procs.sameConfig(cfg)
}

// build makes what a run's steps, and a bench's, train with: the model and
// optimiser with their clip groups (buildModel), and the loader, from where
// the resumed checkpoint stood, for epochs epochs (0: without end).
func (t *pretrainer) build(epochs int) (err error) {
	if err := t.buildModel(); err != nil {
		return err
	}
	start := feed.Position{}
	if t.resumed != nil {
		t.steps, start = t.resumed.Step, t.resumed.Position
	}
	t.loader, err = t.session.newLoader(epochs, start)
	return err
}

// buildModel makes the model and optimiser, from the resumed checkpoint or
// freshly (the objective then readies its parameters), and attaches them to
// the other processes.
func (t *pretrainer) buildModel() (err error) {
	if t.model, t.adam, err = t.session.newModel(); err != nil {
		return err
	}
	t.clipGroups = t.model.Objective.ClipGroups()
	if t.resumed != nil {
		if t.rngMissing, err = restore(t.resumed, t.model, t.adam, t.dev, t.procs.Rank()); err != nil {
			return err
		}
	}
	if err := t.procs.attach(t.model, t.cfg); err != nil {
		return err
	}
	if t.resumed == nil {
		t.initialised, err = t.session.initialise(t.model)
	}
	return err
}

// Close releases everything the run holds, given the run's error err, and
// returns the run's error: err (a failed collective explained), or the
// first failure to close the log. Given an error, it also removes a new
// run's folder that holds no checkpoint yet (runfolder.Prepare). Sinks of
// Options are left to their maker.
func (t *pretrainer) Close(err error) error {
	for i := t.own - 1; i >= 0; i-- {
		if cerr := t.sinks[i].Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if t.loader != nil {
		t.loader.Close()
	}
	if t.pending != nil {
		t.pending.values.Free()
	}
	if t.model != nil {
		t.adam.Free()
		t.model.Free()
	}
	if t.resumed != nil {
		t.resumed.Free()
	}
	err = t.procs.explain(err)
	if t.release != nil {
		t.release(&err)
	}
	t.procs.close()
	t.session.close()
	return err
}

// banner says what the run trains on, with what, and from where.
func (t *pretrainer) banner() {
	cfg, f, bar := t.cfg, t.session.filter, t.bar
	bar.printf("micrograph: %s: %d molecules for pre-training (%d left out: %d under η=%d atoms, %d without bonds, %d with isolated atoms); %d steps per epoch",
		cfg.Data, f.Kept, f.Removed(), f.TooSmall, cfg.Model.Eta, f.NoBonds, f.IsolatedAtoms, t.loader.BatchesPerEpoch())
	for _, line := range []string{t.model.Objective.Describe(), t.initialised, t.procs.describe(cfg, t.dev)} {
		if line != "" {
			bar.printf("micrograph: %s", line)
		}
	}
	ck := t.resumed
	if ck == nil {
		return
	}
	bar.printf("micrograph: resuming %s at step %d (%s)", ck.Path, ck.Step, ck.Position)
	if n := torch.NumThreads(); ck.Threads > 0 && ck.Threads != n && !t.dev.IsCUDA() {
		bar.printf("micrograph: %s was written with %d thread(s), this run has %d: its losses and weights will follow an uninterrupted run's only to the last bits (with %d thread(s) it resumes bit-identically; docs/run-folder.md)",
			ck.Path, ck.Threads, n, ck.Threads)
	}
	if ck.World != t.procs.Size() {
		bar.printf("micrograph: %s was written by %d process(es), this run has %d: the batch sequence continues, each process's random draws (dropout, subgraph perturbations) do not",
			ck.Path, ck.World, t.procs.Size())
	}
	if len(t.rngMissing) > 0 {
		bar.printf("micrograph: %s holds no state for the %s generator(s): they continue from the run's seed %d, so random draws (dropout, subgraph perturbations) differ from an uninterrupted run",
			ck.Path, strings.Join(t.rngMissing, ", "), cfg.Seed)
	}
}

// train runs steps until the run's length, a stop or the end of the data,
// checkpointing every CheckpointEvery steps and at the end.
func (t *pretrainer) train(stop <-chan struct{}) (*Result, error) {
	res := &Result{Filter: t.session.filter}
	checkpointed := t.steps
	t.lastLog = time.Now()
	for t.steps < t.total {
		asked := closed(stop)
		if t.procs.stopping(asked) || t.stopAgreed {
			res.Stopped = true
			break
		}
		b, err := t.loader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := t.advance(b, asked); err != nil {
			return nil, err
		}
		if t.steps%int64(t.cfg.CheckpointEvery) == 0 {
			if err := t.checkpoint(); err != nil {
				return nil, err
			}
			checkpointed = t.steps
		}
	}
	if err := t.flush(); err != nil {
		return nil, err
	}
	if t.steps > checkpointed || t.resumed == nil && t.steps == 0 {
		if err := t.checkpoint(); err != nil {
			return nil, err
		}
	}
	res.Steps, res.Checkpoint = t.steps, t.lastCheckpoint
	if res.Checkpoint == "" && t.resumed != nil {
		res.Checkpoint = t.resumed.Path
	}
	return res, nil
}

// closed says whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
