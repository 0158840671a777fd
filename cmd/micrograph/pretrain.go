package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

// pretrainFlags registers pretrain's flags into cfg.
func pretrainFlags(cfg *runfolder.Config, run *string, resume *bool, objective *string, rt *runtimeFlags, job *jobFlags) *pflag.FlagSet {
	fs := newFlags("pretrain", "--data DIR|CSV --run RUNDIR [flags]",
		"Pre-trains a DeeperGCN encoder with MICRO-Graph (docs/method.md) and writes\n"+
			"RUNDIR/config.json, RUNDIR/log.jsonl (one line per logged step) and checkpoints in\n"+
			"RUNDIR/checkpoints/ (libtorch's format, atomic, the last --keep kept). SIGINT or SIGTERM\n"+
			"finishes the step, checkpoints and exits 0 (while a CSV is first featurised, it stops that\n"+
			"and exits 0 with nothing written); --resume continues from the newest readable\n"+
			"checkpoint, keeping the run's settings except those given (only the run's length and\n"+
			"where it runs may change).\n\n"+
			"Data-parallel: --nproc N runs N local processes, each on its part of every batch\n"+
			"(docs/method.md §3.3); under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)\n"+
			"this process is one of them. Rank 0 writes RUNDIR.\n\n"+
			"On a CPU of several cores, without --threads and --nproc, a new run of the paper objective\n"+
			"splits every batch over one process per core (at most 8, each with at least 64 molecules of\n"+
			"the batch and 1 GiB of free memory; cores beyond that become threads), with batch norm and\n"+
			"L_contra's negatives over the global batch (--sync-batch-norm --global-negatives, saved with\n"+
			"the run): the one-process method, faster, with each process's own random draws. The released\n"+
			"objective, and a run saved without those two settings, use one process and every core as\n"+
			"threads. --threads T alone is one process of T threads, as is --nproc 1.")
	fs.StringVar(&cfg.Data, "data", cfg.Data, "OGB dataset folder, CSV file of SMILES (featurised once and cached), or corpus folder\n(micrograph featurize --shard-rows; its shards stay on disk, memory-mapped)")
	fs.StringVar(run, "run", "", "run folder")
	fs.BoolVar(resume, "resume", false, "continue the run in --run")
	fs.StringVar(objective, "objective", cfg.Model.Objective(), objectiveHelp())
	objectiveFlags(fs, &cfg.Model)
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "molecules per batch")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "Adam learning rate")
	fs.Float64Var(&cfg.ClipGradNorm, "clip-grad-norm", cfg.ClipGradNorm, "clip gradients to this L2 norm (0: no clipping); the released objective clips the motif table apart")
	fs.Float64Var(&cfg.WeightDecay, "weight-decay", cfg.WeightDecay, "AdamW's decoupled weight decay (0: Adam without decay)")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs over the filtered dataset")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "stop after this many optimiser steps in all (0: no limit)")
	fs.IntVar(&cfg.CheckpointEvery, "checkpoint-every", cfg.CheckpointEvery, "steps between checkpoints")
	fs.IntVar(&cfg.Keep, "keep", cfg.Keep, "checkpoints kept")
	fs.IntVar(&cfg.LogEvery, "log-every", cfg.LogEvery, "steps between log.jsonl lines")
	fs.BoolVar(&cfg.SkipNonFinite, "skip-nonfinite", cfg.SkipNonFinite, "skip the update of a batch whose loss is NaN or Inf instead of stopping")
	fs.BoolVar(&cfg.Deterministic, "deterministic", cfg.Deterministic, "deterministic algorithms only: repeated GPU runs give bit-identical losses")
	precisionFlag(fs, &cfg.Precision)
	splitFlags(fs, cfg)
	fs.IntVar(&job.nproc, "nproc", 1, "local processes sharing each batch (data-parallel; Gloo on CPUs, NCCL on GPUs);\n"+
		"on a CPU without --nproc and --threads, the paper objective runs as one process per core (see above)")
	fs.DurationVar(&job.timeout, "timeout", pretrain.DefaultTimeout, "with several processes: how long a rank waits for the others before failing")
	seedFlag(fs, &cfg.Seed)
	rt.register(fs, true)
	return fs
}

// splitFlags registers the settings of a batch split across processes
// (docs/method.md §3.3) into cfg.
func splitFlags(fs *pflag.FlagSet, cfg *runfolder.Config) {
	fs.BoolVar(&cfg.SyncBatchNorm, "sync-batch-norm", cfg.SyncBatchNorm, "with several processes, batch norm over the global batch instead of each process's part")
	fs.BoolVar(&cfg.GlobalNegatives, "global-negatives", cfg.GlobalNegatives, "with several processes, L_contra's negatives from the global batch instead of each process's part")
}

// openDataOnce opens a pre-training run's data where env says and closes
// it (pretrain.CheckData), stopping at SIGINT or SIGTERM while a CSV is
// featurised, as a run does: stopped says so.
func openDataOnce(cfg runfolder.Config, env runenv.Env) (stopped bool, err error) {
	stop := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-signals:
			close(stop)
		case <-done:
		}
	}()
	env.Stop = stop
	err = pretrain.CheckData(cfg, env)
	return errors.Is(err, data.ErrStopped), err
}

// jobFlags are pretrain's flags for data-parallel runs.
type jobFlags struct {
	nproc   int
	timeout time.Duration
}

func runPretrain(args []string) error {
	cfg := runfolder.DefaultConfig()
	var run, objective string
	var resume bool
	var rt runtimeFlags
	var jf jobFlags
	fs := pretrainFlags(&cfg, &run, &resume, &objective, &rt, &jf)
	if err := parseFlags(fs, args, "run"); err != nil {
		return err
	}
	if err := checkRunFlag(run); err != nil {
		return err
	}
	asked := objective
	var saved runfolder.Config
	var err error
	if resume {
		// The run's own settings, overridden by the flags given.
		if saved, err = runfolder.ReadConfig(run); err != nil {
			return err
		}
		cfg = saved
	} else if cfg, err = runfolder.DefaultConfigOf(objective); err != nil {
		return flagError(fs, &cfg, err)
	}
	// The flags given, over the run's or the objective's defaults.
	fs = pretrainFlags(&cfg, &run, &resume, &objective, &rt, &jf)
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if resume && fs.Changed("objective") && asked != cfg.Model.Objective() {
		return usageError{fmt.Errorf("--objective %s: the run in %s trains the %s objective", asked, run, cfg.Model.Objective())}
	}
	if resume {
		// A flag that contradicts the run is misuse, refused before any work.
		if err := runfolder.CheckResume(saved, cfg); err != nil {
			return usageError{fmt.Errorf("--resume %s: %w", run, err)}
		}
	} else if cfg.Data == "" {
		return usageError{errMissing("--data")}
	}
	// A setting that fails from here on is a flag's, or on resume, where the
	// run's settings are config.json's, that file's unless a flag set it.
	blame := func(err error) error {
		if resume {
			return savedError(fs, &cfg, runfolder.ConfigPath(run), err)
		}
		return flagError(fs, &cfg, err)
	}
	job, err := distributedJob()
	if err != nil {
		return err
	}
	env, err := rt.parse(fs, job)
	if err != nil {
		return err
	}
	onCPU := job == nil && defaultsToSplit(fs) && !env.Device.IsCUDA()
	if onCPU && !resume {
		cfg = defaultSplitConfig(fs, cfg)
	}
	switch {
	case jf.nproc < 1:
		return usageError{fmt.Errorf("--nproc %d must be positive", jf.nproc)}
	case jf.timeout <= 0:
		return usageError{fmt.Errorf("--timeout %v must be positive", jf.timeout)}
	case jf.nproc > 1 && job != nil:
		return usageError{fmt.Errorf("--nproc %d under a launcher that set WORLD_SIZE=%d: give one or the other", jf.nproc, job.WorldSize)}
	case jf.nproc > 1:
		if err := pretrain.CheckLaunch(run, cfg, resume, jf.nproc); err != nil {
			return blame(err)
		}
		return launchRanks("pretrain", jf.nproc, withoutFlag(args, "nproc"), jf.timeout+30*time.Second)
	}
	if onCPU {
		cores := cpuCores()
		split := defaultCPUSplit(cfg, cores, availableMemory())
		if split.processes > 1 {
			if err := pretrain.CheckLaunch(run, cfg, resume, split.processes); err != nil {
				return flagError(fs, &cfg, err)
			}
			// The data once, here: a CSV featurised into the cache, where
			// the processes find it; what one process would refuse of it,
			// refused before any starts.
			stopped, err := openDataOnce(cfg, env)
			if stopped {
				logf("stopped while featurising %s into the cache: nothing was written; the same command starts again", cfg.Data)
				return nil
			}
			if err != nil {
				return flagError(fs, &cfg, err)
			}
			logf("%s", describeSplit(split, cores))
			return launchRanks("pretrain", split.processes, splitArgs(args, split), jf.timeout+30*time.Second)
		}
		if split.why != "" {
			logf("one process of %d libtorch threads: %s", cores, split.why)
		}
	}

	if cfg.Deterministic {
		cublasDeterminism()
	}

	stop := make(chan struct{})
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	env.Stop = stop
	var opened atomic.Bool // a stop before the data is open (a CSV featurised) ends at once, and says so after
	done := make(chan struct{})
	defer close(done) // ends the watcher when no second signal comes
	go func() {
		select {
		case <-signals:
		case <-done:
			return
		}
		if opened.Load() {
			logf("signal received: finishing the step and checkpointing (again to quit at once)")
		}
		close(stop)
		select {
		case <-signals:
			os.Exit(130)
		case <-done:
		}
	}()

	res, err := pretrain.Run(run, cfg, env, pretrain.Options{Resume: resume, Job: job, Timeout: jf.timeout,
		Opened: func() { opened.Store(true) }})
	var nonFinite *pretrain.NonFiniteLossError
	if errors.As(err, &nonFinite) {
		hint := "--skip-nonfinite skips such batches"
		if nonFinite.LastCheckpoint != "" {
			hint = "--resume continues from the last good checkpoint, and " + hint
		}
		return fmt.Errorf("%w; %s", err, hint)
	}
	if err != nil {
		return blame(err)
	}
	if job != nil && job.Rank > 0 {
		return nil // rank 0 reports for the run
	}
	if res.Stopped && res.Checkpoint == "" {
		logf("stopped while featurising %s into the cache: nothing was written; the same command starts again", cfg.Data)
		return nil
	}
	if res.Stopped {
		logf("stopped at step %d; checkpoint %s; continue with: micrograph pretrain --run %s --resume", res.Steps, res.Checkpoint, run)
	} else {
		printf("pre-trained %d steps: checkpoint %s, log %s", res.Steps, res.Checkpoint, runfolder.LogPath(run))
	}
	return nil
}

// Bounds on --run, in bytes: Linux's on a name (NAME_MAX), and its on a
// path (PATH_MAX less the terminating NUL) less room for the longest name
// a run holds, checkpoints/.step-000000000.pt.tmp-PID-NNNNNNNNNN.
const (
	maxPath = 4095 - 64
	maxName = 255
)

// checkRunFlag refuses a --run that names no folder or one the system
// cannot make, before anything is made: MkdirAll would leave the folders it
// managed before the name that fails.
func checkRunFlag(run string) error {
	if run == "" {
		return usageError{errors.New(`--run "": want a folder name`)}
	}
	if len(run) > maxPath {
		return usageError{fmt.Errorf("--run is %d bytes long, more than the %d a run folder's path may have", len(run), maxPath)}
	}
	for _, name := range strings.Split(run, string(filepath.Separator)) {
		if len(name) > maxName {
			return usageError{fmt.Errorf("--run %s…: a folder name of %d bytes, more than the %d a name may have", run[:min(len(run), 40)], len(name), maxName)}
		}
	}
	return nil
}
