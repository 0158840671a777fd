package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runBench(args []string) error {
	if finetune, rest := isFinetuneBench(args); finetune {
		return runBenchFinetune(rest)
	}
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
			"slowest process's time and peak_memory_bytes the processes' sum.\n\n"+
			"bench --finetune times fine-tuning steps instead: see micrograph bench --finetune --help.")
	cfg := pretrain.BenchConfig{Pretrain: runfolder.DefaultConfig(), Warmup: 3, Steps: 20}
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
	nproc := fs.Int("nproc", 1, "local processes sharing each batch, as pretrain --nproc")
	seedFlag(fs, &pc.Seed)
	var rt runtimeFlags
	rt.register(fs, true)
	if err := parseFlags(fs, args, "data"); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
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
	switch {
	case *nproc < 1:
		return usageError{fmt.Errorf("--nproc %d must be positive", *nproc)}
	case *nproc > 1 && job != nil:
		return usageError{fmt.Errorf("--nproc %d under a launcher that set WORLD_SIZE=%d: give one or the other", *nproc, job.WorldSize)}
	case *nproc > 1:
		if err := pretrain.CheckBenchLaunch(cfg, *nproc); err != nil {
			return flagError(fs, pc, err)
		}
		return launchRanks("bench", *nproc, withoutFlag(args, "nproc"), pretrain.DefaultTimeout+30*time.Second)
	case job == nil && defaultsToSplit(fs) && !env.Device.IsCUDA():
		// What pretrain does by default, for a new run.
		split := defaultCPUSplit(defaultSplitConfig(fs, *pc), cpuCores(), availableMemory())
		if split.processes > 1 {
			if err := pretrain.CheckBenchLaunch(cfg, split.processes); err != nil {
				return flagError(fs, pc, err)
			}
			if err := pretrain.CheckData(*pc, env); err != nil {
				return flagError(fs, pc, err)
			}
			return launchRanks("bench", split.processes, splitArgs(args, split), pretrain.DefaultTimeout+30*time.Second)
		}
	}
	if pc.Deterministic {
		cublasDeterminism()
	}
	res, err := pretrain.Bench(cfg, env, pretrain.Options{Job: job})
	if err != nil {
		return flagError(fs, pc, err)
	}
	if job != nil && job.Rank > 0 {
		return nil // rank 0 reports for the job
	}
	b, _ := json.Marshal(res)
	printf("%s", b)
	return nil
}
