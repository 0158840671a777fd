package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

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
	columnFlags(fs, &cfg.Columns)
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
	fs.BoolVar(&cfg.Deterministic, "deterministic", cfg.Deterministic, "deterministic algorithms only: on a GPU, repeated runs and a run resumed after a stop\n"+
		"give the uninterrupted run's losses bit for bit; without it they agree to float32 rounding of\n"+
		"sums in another order, then drift apart (on the CPU they are always bit for bit;\n"+
		"docs/commands.md#what-holds-on-each-device)")
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

// jobFlags are pretrain's flags for data-parallel runs.
type jobFlags struct {
	nproc   int
	timeout time.Duration
}

// pretrainCommand is a pretrain command line, parsed: the run's settings
// (the objective's defaults or the resumed run's, under the flags given),
// its folder, and where and how it runs.
type pretrainCommand struct {
	fs     *pflag.FlagSet
	cfg    runfolder.Config
	run    string
	resume bool
	rt     runtimeFlags
	jf     jobFlags
}

// parsePretrain reads pretrain's command line, refusing misuse before any
// work.
func parsePretrain(args []string) (*pretrainCommand, error) {
	c := &pretrainCommand{cfg: runfolder.DefaultConfig()}
	var objective string
	c.fs = pretrainFlags(&c.cfg, &c.run, &c.resume, &objective, &c.rt, &c.jf)
	if err := parseFlags(c.fs, args, "run"); err != nil {
		return nil, err
	}
	if err := checkRunFlag(c.run); err != nil {
		return nil, err
	}
	asked := objective
	var saved runfolder.Config
	var err error
	if c.resume {
		// The run's own settings, overridden by the flags given.
		if saved, err = runfolder.ReadConfig(c.run); err != nil {
			return nil, err
		}
		c.cfg = saved
	} else if c.cfg, err = runfolder.DefaultConfigOf(objective); err != nil {
		return nil, flagError(c.fs, &c.cfg, err)
	}
	// The flags given, over the run's or the objective's defaults.
	c.fs = pretrainFlags(&c.cfg, &c.run, &c.resume, &objective, &c.rt, &c.jf)
	if err := c.fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	switch {
	case c.resume && c.fs.Changed("objective") && asked != c.cfg.Model.Objective():
		return nil, usageError{fmt.Errorf("--objective %s: the run in %s trains the %s objective", asked, c.run, c.cfg.Model.Objective())}
	case c.resume:
		// A flag that contradicts the run is misuse, refused before any work.
		if err := runfolder.CheckResume(saved, c.cfg); err != nil {
			return nil, usageError{fmt.Errorf("--resume %s: %w", c.run, err)}
		}
	case c.cfg.Data == "":
		return nil, usageError{errMissing("--data")}
	}
	if c.jf.timeout <= 0 {
		return nil, usageError{fmt.Errorf("--timeout %v must be positive", c.jf.timeout)}
	}
	return c, nil
}

// blame is err as misuse of the flag that set the field it names or, on
// resume, where the run's settings are config.json's, that file's unless a
// flag set it.
func (c *pretrainCommand) blame(err error) error {
	if c.resume {
		return savedError(c.fs, &c.cfg, runfolder.ConfigPath(c.run), err)
	}
	return flagError(c.fs, &c.cfg, err)
}

func runPretrain(args []string) error {
	c, err := parsePretrain(args)
	if err != nil {
		return err
	}
	if err := checkRunPlace(c.run, c.cfg.Data, &c.rt); err != nil {
		return err
	}
	plan, err := planLaunch(launchRequest{fs: c.fs, args: args, rt: &c.rt, nproc: c.jf.nproc, cfg: &c.cfg, fresh: !c.resume,
		check: func(n int) error {
			if err := pretrain.CheckSplit(c.cfg, n); err != nil && c.resume && c.jf.nproc > 1 {
				// The run's settings are fixed; the flag just given splits them.
				return usageError{fmt.Errorf("--nproc %d: %w (the run's settings, in %s)", n, err, runfolder.ConfigPath(c.run))}
			}
			return c.blame(pretrain.CheckLaunch(c.run, c.cfg, c.resume, n))
		},
		openData: func(env runenv.Env) error {
			if err := openDataOnce(c.cfg, env); !errors.Is(err, errStoppedFeaturising) {
				return c.blame(err)
			}
			return errStoppedFeaturising
		}})
	switch {
	case errors.Is(err, errStoppedFeaturising):
		return stoppedBeforeWriting("featurising " + c.cfg.Data + " into the cache")
	case err != nil:
		return err
	case plan.ranks > 1:
		return plan.start("pretrain", c.jf.timeout+30*time.Second)
	}
	var opened atomic.Bool // a stop before the data is open (a CSV featurised) ends at once, and says so after
	w := runenv.WatchSignals(func() {
		if opened.Load() {
			logf("signal received: finishing the step and checkpointing (again to quit at once)")
		}
	})
	defer w.Close()
	env := plan.env
	env.Stop = w.Stop()
	sayJobWait(plan.job, c.jf.timeout)
	res, err := pretrain.Run(c.run, c.cfg, env, pretrain.Options{Resume: c.resume, Job: plan.job, Timeout: c.jf.timeout,
		Opened: func() { opened.Store(true) }})
	var nonFinite *pretrain.NonFiniteLossError
	switch {
	case errors.As(err, &nonFinite):
		hint := "--skip-nonfinite skips such batches"
		if nonFinite.LastCheckpoint != "" {
			hint = "--resume continues from the last good checkpoint, and " + hint
		}
		return fmt.Errorf("%w; %s", err, hint)
	case err != nil:
		return c.blame(err)
	case res.Stopped && res.Checkpoint == "":
		return stoppedBeforeWriting(res.While)
	case plan.job != nil && plan.job.Rank > 0:
		return nil // rank 0 reports for the run
	case res.Stopped:
		logf("stopped at step %d; checkpoint %s; continue with: micrograph pretrain --run %s --resume", res.Steps, res.Checkpoint, c.run)
	default:
		printf("pre-trained %d steps: checkpoint %s, log %s", res.Steps, res.Checkpoint, runfolder.LogPath(c.run))
	}
	return nil
}

// checkRunPlace refuses a --run that is another run's own file or folder,
// the data, or inside the data's folder; data that is the run folder or
// one of its own files; and a --cache refused as an output folder or lying
// at the run folder or its own files (a new run's folder must be empty).
func checkRunPlace(run, data string, rt *runtimeFlags) error {
	in := input{"--data", data, true}
	if err := checkOutputFolder("--run", run, in); err != nil {
		return err
	}
	if err := checkRunInputs(run, in); err != nil {
		return err
	}
	if err := rt.checkCache(in); err != nil {
		return err
	}
	return checkRunInputs(run, input{"--cache", rt.cache, false})
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
