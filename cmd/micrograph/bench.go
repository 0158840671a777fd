package main

import (
	"encoding/json"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runBench(args []string) error {
	fs := newFlags("bench", "--data DIR|CSV [--device D] [--threads T] [--steps N | --epoch] [model flags]",
		"Times pre-training steps (forward, backward, Adam) on --data after --warmup untimed ones\n"+
			"and prints one JSON line: molecules_per_s, s_per_step, s_per_epoch, data_wait_fraction,\n"+
			"peak_memory_bytes (GPU: allocator peak; CPU: peak RSS), device, libtorch, threads (libtorch's\n"+
			"intra-op threads per process) and processes (each on its part of every batch), precision,\n"+
			"product_gflops (a batch's atoms × d by d × d in the precision's dtype), and the libtorch\n"+
			"operators dispatched: ops_per_step (batch upload, forward, backward, Adam; counted on one more\n"+
			"step), ops_upload (of these, putting the batch on the device), ops_collate (run by the loader\n"+
			"per batch; none on the CPU).")
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
	seedFlag(fs, &pc.Seed)
	var rt runtimeFlags
	rt.register(fs, true)
	if err := parseFlags(fs, args, "data"); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagError(fs, &cfg, err)
	}
	env, err := rt.parse(fs, nil)
	if err != nil {
		return err
	}
	if pc.Deterministic {
		cublasDeterminism()
	}
	res, err := pretrain.Bench(cfg, env)
	if err != nil {
		return flagError(fs, pc, err)
	}
	b, _ := json.Marshal(res)
	printf("%s", b)
	return nil
}
