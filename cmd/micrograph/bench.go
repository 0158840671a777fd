package main

import (
	"encoding/json"
	"time"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

func runBench(args []string) error {
	if finetune, rest := isFinetuneBench(args); finetune {
		return runBenchFinetune(rest)
	}
	cfg := pretrain.BenchConfig{Pretrain: runfolder.DefaultConfig(), Warmup: 3, Steps: 20}
	pc := &cfg.Pretrain
	var rt runtimeFlags
	var nproc int
	fs := benchFlags(&cfg, &rt, &nproc)
	if err := parseFlags(fs, args, "data"); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagError(fs, &cfg, err)
	}
	if err := rt.checkCache(input{"--data", pc.Data, true}); err != nil {
		return err
	}
	plan, err := planLaunch(launchRequest{fs: fs, args: args, rt: &rt, nproc: nproc, cfg: pc, fresh: true,
		check:    func(n int) error { return flagError(fs, pc, pretrain.CheckBenchLaunch(cfg, n)) },
		openData: func(env runenv.Env) error { return flagError(fs, pc, pretrain.CheckData(*pc, env)) }})
	if err != nil {
		return err
	}
	if plan.ranks > 1 {
		return plan.start("bench", pretrain.DefaultTimeout+30*time.Second)
	}
	sayJobWait(plan.job, pretrain.DefaultTimeout)
	res, err := pretrain.Bench(cfg, plan.env, pretrain.Options{Job: plan.job})
	if err != nil {
		return flagError(fs, pc, err)
	}
	if plan.job != nil && plan.job.Rank > 0 {
		return nil // rank 0 reports for the job
	}
	b, _ := json.Marshal(res)
	printf("%s", b)
	return nil
}

// benchFlags registers bench's flags into cfg, rt and nproc.
func benchFlags(cfg *pretrain.BenchConfig, rt *runtimeFlags, nproc *int) *pflag.FlagSet {
	fs := newFlags("bench", "--data DIR|CSV [--device D] [--threads T] [--nproc N] [--steps N | --epoch] [model flags]",
		"Times pre-training steps (forward, backward, Adam) on --data after --warmup untimed ones\n"+
			"and prints one JSON line: molecules_per_s, s_per_step, s_per_epoch, data_wait_fraction,\n"+
			"peak_memory_bytes (GPU: allocator peak; CPU: peak RSS), device, libtorch, threads (libtorch's\n"+
			"intra-op threads per process) and processes (each on its part of every batch), precision,\n"+
			"product_gflops (a batch's atoms × d by d × d in the precision's dtype), and the libtorch\n"+
			"operators dispatched: ops_per_step (batch upload, forward, backward, Adam; counted on one more\n"+
			"step), ops_upload (of these, putting the batch on the device), ops_collate (run by the loader\n"+
			"per batch; none on the CPU).\n\n"+
			"Without --threads and --nproc it times what pretrain does by default (on a CPU of several\n"+
			"cores, one process per core, each on its part of every batch: see pretrain --help); with\n"+
			"them, what they say. With several processes molecules_per_s is the global batch's over the\n"+
			"slowest process's time and peak_memory_bytes the processes' sum, and ranks gives each\n"+
			"process's part of a timed step: its atoms and molecules, and its seconds computing, waiting\n"+
			"for batches and in each kind of collective (sinkhorn, norm_forward, norm_backward,\n"+
			"negatives_forward, negatives_backward, loss_weights, losses, gradients: issuing it and waiting\n"+
			"for the other processes and the transfer; docs/distributed.md).\n\n"+
			"bench --finetune times fine-tuning steps instead: see micrograph bench --finetune --help.")
	pc := &cfg.Pretrain
	fs.StringVar(&pc.Data, "data", "", "OGB dataset folder, or CSV file of SMILES")
	objectiveFlags(fs, &pc.Model)
	fs.IntVar(&pc.BatchSize, "batch-size", pc.BatchSize, "molecules per batch")
	fs.Float64Var(&pc.LR, "lr", pc.LR, "Adam learning rate")
	fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "untimed steps first")
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "timed steps")
	fs.BoolVar(&cfg.Epoch, "epoch", false, "time one whole epoch instead of --steps")
	fs.BoolVar(&pc.Deterministic, "deterministic", false, "deterministic algorithms only (bit-identical repeated runs)")
	precisionFlag(fs, &pc.Precision)
	splitFlags(fs, pc)
	fs.IntVar(nproc, "nproc", 1, "local processes sharing each batch, as pretrain --nproc")
	seedFlag(fs, &pc.Seed)
	rt.register(fs, true)
	return fs
}
