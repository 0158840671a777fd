package evaluate

import (
	"fmt"
	"time"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// FinetuneBenchConfig is a throughput measurement of fine-tuning steps: the
// steps finetune takes (forward, loss, backward, both optimisers) on batches
// drawn from every molecule of Finetune.Data, after Warmup untimed ones. The
// runs' evaluations are not timed.
type FinetuneBenchConfig struct {
	Finetune FinetuneConfig // data, encoder, batch size, dropout, recipe, precision, seed
	Warmup   int            // untimed steps first
	Steps    int            // timed steps
}

// FinetuneBenchResult is what `micrograph bench --finetune` prints, one JSON
// line; the fields are bench's (pretrain.BenchResult) of the same names.
type FinetuneBenchResult struct {
	Mode             string          `json:"mode"` // "finetune"
	MoleculesPerS    float64         `json:"molecules_per_s"`
	SPerStep         float64         `json:"s_per_step"`
	DataWaitFraction float64         `json:"data_wait_fraction"`
	PeakMemoryBytes  int64           `json:"peak_memory_bytes"`
	Device           string          `json:"device"`
	Libtorch         string          `json:"libtorch"`
	OpenBLAS         string          `json:"openblas,omitempty"`
	Steps            int             `json:"steps"`
	BatchSize        int             `json:"batch_size"`
	Threads          int             `json:"threads"`
	Precision        model.Precision `json:"precision"`
}

// Validate reports the first setting that cannot work, naming its field.
func (c FinetuneBenchConfig) Validate() error {
	if err := c.Finetune.Validate(); err != nil {
		return err
	}
	switch {
	case c.Warmup < 0:
		return field.Errorf("warmup", c.Warmup, "must not be negative")
	case c.Steps < 1:
		return field.Errorf("steps", c.Steps, "must be positive")
	}
	return nil
}

// BenchFinetune times fine-tuning steps where env says.
func BenchFinetune(cfg FinetuneBenchConfig, env runenv.Env) (*FinetuneBenchResult, error) {
	return runenv.Run(env, cfg.Validate, func() (*FinetuneBenchResult, error) { return benchFinetune(cfg, env) })
}

// benchFinetune is BenchFinetune after runenv's prologue.
func benchFinetune(cfg FinetuneBenchConfig, env runenv.Env) (*FinetuneBenchResult, error) {
	ft := cfg.Finetune
	se, err := ft.Common.open(env)
	if err != nil {
		return nil, err
	}
	defer se.close()
	arch := se.arch
	arch.Dropout = ft.Dropout
	torch.ManualSeed(ft.Seed)
	clf, err := model.NewClassifier(arch, se.ds.NumTasks(), se.dev, torch.Float32)
	if err != nil {
		return nil, err
	}
	defer clf.Free()
	if err := ft.Precision.Apply(clf.Store); err != nil {
		return nil, err
	}
	if se.state != nil {
		if err := torch.LoadState(clf.EncoderState(), se.state); err != nil {
			return nil, fmt.Errorf("encoder %s: %w", ft.EncoderPath, err)
		}
	}
	opt := ft.Recipe.newOptimizers(clf)
	defer opt.free()
	loader, err := feed.NewLoader(feed.LoaderConfig{
		Dataset: se.ds, Indices: se.ds.All(), BatchSize: ft.BatchSize, Shuffle: true, Seed: ft.Seed,
		Epochs: (cfg.Warmup+cfg.Steps)/max(1, se.ds.NumGraphs()/ft.BatchSize) + 2, Workers: se.workers, Prepare: batchPrepare(se.dev),
	})
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	steps := epochSteps{dev: se.dev, regression: se.regression, recipe: ft.Recipe}
	s := torch.NewScope()
	defer s.Close()
	var wait time.Duration
	var loss *torch.Tensor
	molecules := 0 // timed: the loader's last batch of an epoch is smaller
	run := func(n int, timed bool) error {
		for i := range n {
			began := time.Now()
			b, err := loader.Next()
			if err != nil {
				return err
			}
			if timed {
				wait += time.Since(began)
				molecules += len(b.Graphs)
			}
			loss.Free()
			loss = trainStep(clf, opt, b, steps, i, loader.BatchesPerEpoch())
			loader.Release(b)
		}
		return nil
	}
	if err := run(cfg.Warmup, false); err != nil {
		return nil, err
	}
	if err := torch.Synchronize(se.dev); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := run(cfg.Steps, true); err != nil {
		return nil, err
	}
	loss.Item() // what the epoch's mean loss waits for
	if err := torch.Synchronize(se.dev); err != nil {
		return nil, err
	}
	elapsed := time.Since(start).Seconds()
	res := &FinetuneBenchResult{
		Mode: "finetune", MoleculesPerS: float64(molecules) / elapsed, SPerStep: elapsed / float64(cfg.Steps),
		DataWaitFraction: wait.Seconds() / elapsed, Device: se.dev.String(), Libtorch: torch.Version(), OpenBLAS: torch.OpenBLASCore(),
		Steps: cfg.Steps, BatchSize: ft.BatchSize, Threads: torch.NumThreads(), Precision: ft.Precision,
	}
	if res.PeakMemoryBytes, err = runenv.PeakMemory(se.dev); err != nil {
		return nil, err
	}
	return res, nil
}
