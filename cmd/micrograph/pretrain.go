package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/spf13/pflag"
)

// pretrainFlags registers pretrain's flags into cfg.
func pretrainFlags(cfg *pretrain.Config, run *string, resume *bool, cache *string, limits *data.Limits) *pflag.FlagSet {
	fs := newFlags("pretrain", "--data DIR|CSV --run RUNDIR [flags]",
		"Pre-trains a DeeperGCN encoder with MICRO-Graph (docs/method.md) and writes\n"+
			"RUNDIR/config.json, RUNDIR/log.jsonl (one line per logged step) and checkpoints in\n"+
			"RUNDIR/checkpoints/ (libtorch's format, atomic, the last --keep kept). SIGINT or SIGTERM\n"+
			"finishes the step, checkpoints and exits 0; --resume continues from the newest readable\n"+
			"checkpoint, keeping the run's settings except those given (only the run's length and\n"+
			"where it runs may change).")
	fs.StringVar(&cfg.Data, "data", cfg.Data, "OGB dataset folder, or CSV file of SMILES (featurised once and cached)")
	fs.StringVar(run, "run", "", "run folder")
	fs.BoolVar(resume, "resume", false, "continue the run in --run")
	objectiveFlags(fs, &cfg.Model)
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "molecules per batch")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "Adam learning rate")
	fs.Float64Var(&cfg.ClipGradNorm, "clip-grad-norm", cfg.ClipGradNorm, "clip gradients to this global L2 norm (0: no clipping)")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs over the filtered dataset")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "stop after this many optimiser steps in all (0: no limit)")
	fs.IntVar(&cfg.CheckpointEvery, "checkpoint-every", cfg.CheckpointEvery, "steps between checkpoints")
	fs.IntVar(&cfg.Keep, "keep", cfg.Keep, "checkpoints kept")
	fs.IntVar(&cfg.LogEvery, "log-every", cfg.LogEvery, "steps between log.jsonl lines")
	fs.BoolVar(&cfg.SkipNonFinite, "skip-nonfinite", cfg.SkipNonFinite, "skip the update of a batch whose loss is NaN or Inf instead of stopping")
	fs.BoolVar(&cfg.Deterministic, "deterministic", cfg.Deterministic, "deterministic algorithms only: repeated GPU runs give bit-identical losses")
	runtimeFlags(fs, &cfg.Device, &cfg.Threads, &cfg.Workers, &cfg.Seed)
	fs.StringVar(cache, "cache", "", cacheFlagHelp)
	limitFlags(fs, limits)
	return fs
}

func runPretrain(args []string) error {
	cfg := pretrain.DefaultConfig()
	var run, cache string
	var resume bool
	var limits data.Limits
	fs := pretrainFlags(&cfg, &run, &resume, &cache, &limits)
	if err := parseFlags(fs, args, "run"); err != nil {
		return err
	}
	if resume {
		// The run's own settings, overridden by the flags given.
		saved, err := pretrain.ReadConfig(run)
		if err != nil {
			return err
		}
		cfg = saved
		fs = pretrainFlags(&cfg, &run, &resume, &cache, &limits)
		if err := fs.Parse(args); err != nil {
			return usageError{err}
		}
	} else if cfg.Data == "" {
		return usageError{errMissing("--data")}
	}
	if err := validatePretrain(fs, &cfg, run); err != nil {
		return err
	}
	dataset, err := datasetOptions(fs, cache, limits)
	if err != nil {
		return err
	}

	if cfg.Deterministic {
		cublasDeterminism()
	}

	stop := make(chan struct{})
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		<-signals
		logf("signal received: finishing the step and checkpointing (again to quit at once)")
		close(stop)
		<-signals
		os.Exit(130)
	}()

	res, err := pretrain.Run(run, cfg, pretrain.Options{
		Resume: resume, Progress: os.Stderr, Stop: stop, Dataset: dataset,
	})
	var nonFinite *pretrain.NonFiniteLossError
	if errors.As(err, &nonFinite) {
		hint := "--skip-nonfinite skips such batches"
		if nonFinite.LastCheckpoint != "" {
			hint = "--resume continues from the last good checkpoint, and " + hint
		}
		return fmt.Errorf("%w; %s", err, hint)
	}
	if err != nil {
		return flagError(fs, &cfg, err)
	}
	if res.Stopped {
		logf("stopped at step %d; checkpoint %s; continue with: micrograph pretrain --run %s --resume", res.Steps, res.Checkpoint, run)
	} else {
		printf("pre-trained %d steps: checkpoint %s, log %s", res.Steps, res.Checkpoint, pretrain.LogPath(run))
	}
	return nil
}

// validatePretrain judges every setting of a pre-training run before
// anything is written; fs's flags were registered into cfg.
func validatePretrain(fs *pflag.FlagSet, cfg *pretrain.Config, run string) error {
	if err := cfg.Validate(); err != nil {
		return flagError(fs, cfg, err)
	}
	if st, err := os.Stat(run); err == nil && !st.IsDir() {
		return usageError{fmt.Errorf("--run %s is a file, not a folder", run)}
	}
	return nil
}
