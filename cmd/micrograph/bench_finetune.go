package main

import (
	"encoding/json"

	"github.com/micrograph/micrograph/trainer/evaluate"
)

// isFinetuneBench reports whether bench's arguments ask for fine-tuning
// steps (--finetune), and returns them without that flag.
func isFinetuneBench(args []string) (bool, []string) {
	var rest []string
	found := false
	for i, a := range args {
		switch {
		case a == "--":
			return found, append(rest, args[i:]...)
		case a == "--finetune" || a == "--finetune=true":
			found = true
		case a == "--finetune=false":
		default:
			rest = append(rest, a)
		}
	}
	return found, rest
}

func runBenchFinetune(args []string) error {
	cfg := evaluate.FinetuneBenchConfig{Finetune: evaluate.DefaultFinetuneConfig(), Warmup: 3, Steps: 40}
	ft := &cfg.Finetune
	ft.Encoder.Dropout = ft.Dropout
	fs := newFlags("bench --finetune", "--data DIR|CSV [--encoder encoder.pt] [--threads T] [--steps N] [flags]",
		"Times fine-tuning steps (forward, loss, backward, Adam) as finetune takes them, on batches drawn\n"+
			"from every molecule of --data (a labelled dataset), after --warmup untimed ones, and prints one\n"+
			"JSON line: molecules_per_s, s_per_step, data_wait_fraction, peak_memory_bytes (GPU: allocator\n"+
			"peak; CPU: peak RSS), device, libtorch, threads, precision. The defaults are the downstream\n"+
			"sizes (batch 32, dropout 0.5, the paper's encoder); the peer is ../shared/bench/ref_micrograph.py\n"+
			"--finetune --batch 32 --dropout 0.5. Evaluations are not timed.")
	fs.StringVar(&ft.Data, "data", "", "labelled OGB dataset folder, or CSV file of SMILES and labels")
	columnFlags(fs, &ft.Columns)
	fs.StringVar(&ft.EncoderPath, "encoder", "", encoderHelp+"; none: random initialisation")
	fs.IntVar(&ft.BatchSize, "batch-size", ft.BatchSize, "molecules per training batch")
	fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "untimed steps first")
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "timed steps")
	recipeFlags(fs, &ft.Recipe)
	fs.Bool("finetune", true, "time fine-tuning steps (this page); without it bench times pre-training")
	var ev evaluationFlags
	ev.registerRuntime(fs, &ft.Common)
	if err := parseFlags(fs, args, "data"); err != nil {
		return err
	}
	ft.Dropout = ft.Encoder.Dropout
	if _, err := optionalEncoder(ft.EncoderPath); err != nil {
		return err
	}
	if err := rejectArchitectureFlags(fs, ft.EncoderPath); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagError(fs, &cfg, err)
	}
	env, err := ev.rt.parse(fs, nil)
	if err != nil {
		return err
	}
	res, err := evaluate.BenchFinetune(cfg, env)
	if err != nil {
		return flagError(fs, &cfg, err)
	}
	b, _ := json.Marshal(res)
	printf("%s", b)
	return nil
}
