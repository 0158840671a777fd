package evaluate

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// FinetuneConfig is a fine-tuning experiment, docs/method.md §7's "transfer
// fine-tune" protocol. DefaultFinetuneConfig holds §1's downstream settings.
type FinetuneConfig struct {
	// Common is what is measured on which data; without EncoderPath the
	// Encoder architecture is trained from scratch ("Non-Pretrain"). Its
	// Dropout is ignored in favour of Dropout.
	Common
	Dropout float64 `json:"dropout"` // encoder dropout while fine-tuning (§1: 0.5)

	Epochs    int     `json:"epochs"`
	BatchSize int     `json:"batch_size"`
	LR        float64 `json:"lr"` // Adam
}

// DefaultFinetuneConfig is docs/method.md §1's downstream setting: Adam 1e-3,
// batch 32, 100 epochs, dropout 0.5, 10 seeds, on the scaffold split, with
// §1's encoder architecture for runs without a pre-trained encoder.
func DefaultFinetuneConfig() FinetuneConfig {
	return FinetuneConfig{
		Common:    defaultCommon(),
		Dropout:   0.5,
		Epochs:    100,
		BatchSize: 32,
		LR:        1e-3,
	}
}

// Validate reports the first setting that cannot work, naming its field.
func (c FinetuneConfig) Validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := field.First(field.Finite("dropout", c.Dropout), field.Finite("lr", c.LR)); err != nil {
		return err
	}
	switch {
	case c.Dropout < 0 || c.Dropout >= 1:
		return field.Errorf("dropout", c.Dropout, "must be in [0, 1)")
	case c.Epochs < 1:
		return field.Errorf("epochs", c.Epochs, "must be positive")
	case c.BatchSize < 1:
		return field.Errorf("batch_size", c.BatchSize, "must be positive")
	case !(c.LR > 0):
		return field.Errorf("lr", c.LR, "must be positive")
	case c.EncoderPath == "":
		arch := c.Encoder
		arch.Dropout = c.Dropout // the one trained with
		return field.Within("encoder", arch.Validate())
	}
	return nil
}

// FinetuneResult is a fine-tuning experiment's outcome, written as JSON.
// ROC-AUC values follow OGB's rules (ROCAUC) and lie in [0, 1].
type FinetuneResult struct {
	Evaluation string         `json:"evaluation"` // "finetune"
	Protocol   string         `json:"protocol"`   // as Config.Protocol
	Folds      int            `json:"folds"`      // cross-validation folds; 0 on the scaffold split
	Config     FinetuneConfig `json:"config"`     // as run: Encoder is the architecture trained, dropout included
	Device     string         `json:"device"`
	Dataset    DatasetSummary `json:"dataset"`
	Pretrained bool           `json:"pretrained"` // weights loaded from Config.EncoderPath

	Runs []FinetuneRun `json:"runs"` // seed by seed, fold by fold within a seed

	// Selected is, with cross-validation, each seed's epoch chosen on the
	// test ROC-AUC averaged over its folds (optimistic: see ProtocolCV10).
	Selected []SelectedEpoch `json:"selected,omitempty"`

	// Test is the test ROC-AUC at each run's selected epoch (BestEpoch),
	// over runs: the figure docs/method.md §7 reports. Valid is the best valid
	// ROC-AUC (undefined with cross-validation, which has no valid part).
	Test        metrics.Stat `json:"test"`
	Valid       metrics.Stat `json:"valid"`
	TestPerTask []TaskStat   `json:"test_per_task"` // at each run's selected epoch
	Seconds     float64      `json:"seconds"`
}

// SelectedEpoch is the epoch a seed's folds report under cross-validation.
type SelectedEpoch struct {
	Seed     uint64        `json:"seed"`
	Epoch    int           `json:"epoch"`     // from 1
	FoldMean metrics.Value `json:"fold_mean"` // test ROC-AUC at Epoch averaged over the folds
}

// FinetuneRun is one seed on one split.
type FinetuneRun struct {
	Seed  uint64 `json:"seed"`
	Split string `json:"split"` // "scaffold" or "cvK-foldI"
	Train int    `json:"train"` // molecules in each part
	Valid int    `json:"valid"`
	Test  int    `json:"test"`

	// Per epoch, in order: mean training loss over the epoch's batches, and
	// evaluation-mode ROC-AUC on the valid (null without one) and test parts.
	TrainLoss    []metrics.Value `json:"train_loss"`
	ValidROCAUC  []metrics.Value `json:"valid_roc_auc"`
	TestROCAUC   []metrics.Value `json:"test_roc_auc"`
	EpochSeconds []float64       `json:"epoch_seconds"`

	// BestEpoch, from 1, is the selected epoch: the first with the highest
	// valid ROC-AUC, or with cross-validation the seed's (SelectedEpoch).
	BestEpoch   int             `json:"best_epoch"`
	BestValid   metrics.Value   `json:"best_valid"`
	TestAtBest  metrics.Value   `json:"test_at_best"`
	TestPerTask []metrics.Value `json:"test_per_task"` // at BestEpoch; null for a task lacking a class in the test part
	Seconds     float64         `json:"seconds"`

	testPerTaskByEpoch [][]float64 // for the selection across folds
}

// Finetune trains a classifier (encoder + graph head, model.Classifier) on
// every split and seed, and reports the test ROC-AUC at the epoch of best
// valid ROC-AUC, mean ± std over runs (docs/method.md §7); with cross-validation
// (the paper's protocol) each seed draws its own folds and its runs report
// the epoch of best fold-averaged test ROC-AUC. The loss is BCE with
// logits over labelled entries only; training batches are reshuffled every
// epoch from the run's seed; evaluation covers every molecule of a part.
func Finetune(cfg FinetuneConfig) (*FinetuneResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	// libtorch keeps grad mode and scopes per OS thread: drive it from one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	se, err := cfg.Common.open()
	if err != nil {
		return nil, err
	}
	defer se.close()
	arch, state, dev, ds, folds := se.arch, se.state, se.dev, se.ds, se.folds
	arch.Dropout = cfg.Dropout
	name := filepath.Base(cfg.Data)

	res := &FinetuneResult{Evaluation: "finetune", Protocol: cfg.Protocol, Folds: folds, Config: cfg, Device: dev.String(),
		Dataset: summarizeDataset(cfg.Data, ds, folds), Pretrained: state != nil}
	res.Config.Encoder = arch
	for i := range cfg.Seeds {
		seed := cfg.Seed + uint64(i)
		splits, err := evaluationSplits(name, ds, folds, seed)
		if err != nil {
			return nil, err
		}
		seedRuns := make([]FinetuneRun, 0, len(splits))
		for _, split := range splits {
			f := &finetuner{cfg: &res.Config, name: name, ds: ds, split: split, dev: dev, seed: seed}
			var run FinetuneRun
			var runErr error
			if err := torch.Catch(func() { run, runErr = f.run(state) }); err != nil || runErr != nil {
				return nil, fmt.Errorf("seed %d, %s split: %w", f.seed, split.Name, errors.Join(err, runErr))
			}
			seedRuns = append(seedRuns, run)
		}
		if folds > 0 {
			res.Selected = append(res.Selected, selectEpochOnFolds(seed, seedRuns))
		}
		res.Runs = append(res.Runs, seedRuns...)
	}

	tests, valids := make([]float64, len(res.Runs)), make([]float64, len(res.Runs))
	perTask := make([][]metrics.Value, len(res.Runs))
	for i, r := range res.Runs {
		tests[i], valids[i], perTask[i] = float64(r.TestAtBest), float64(r.BestValid), r.TestPerTask
	}
	res.Test, res.Valid = metrics.StatOf(tests), metrics.StatOf(valids)
	res.TestPerTask = perTaskStats(ds.Tasks, perTask)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// selectEpochOnFolds applies the paper's selection to one seed's fold runs:
// each run reports the epoch with the best test ROC-AUC averaged over the
// folds.
func selectEpochOnFolds(seed uint64, runs []FinetuneRun) SelectedEpoch {
	curves := make([][]metrics.Value, len(runs))
	for f, r := range runs {
		curves[f] = r.TestROCAUC
	}
	best, mean := SelectOnFoldMean(curves)
	for f := range runs {
		r := &runs[f]
		r.BestEpoch, r.TestAtBest, r.TestPerTask = best+1, r.TestROCAUC[best], toValues(r.testPerTaskByEpoch[best])
	}
	return SelectedEpoch{Seed: seed, Epoch: best + 1, FoldMean: metrics.Value(mean)}
}

// finetuner is one run: a seed on a split.
type finetuner struct {
	cfg   *FinetuneConfig
	name  string // the dataset's, in progress lines
	ds    *data.Dataset
	split *data.Split
	dev   torch.Device
	seed  uint64
}

// run trains from a fresh classifier (pre-trained encoder weights from state
// when not nil) for cfg.Epochs epochs, evaluating after each.
func (f *finetuner) run(state []torch.Named) (FinetuneRun, error) {
	start := time.Now()
	run := FinetuneRun{Seed: f.seed, Split: f.split.Name, Train: len(f.split.Train), Valid: len(f.split.Valid), Test: len(f.split.Test),
		BestValid: metrics.Value(math.NaN()), TestAtBest: metrics.Value(math.NaN())}
	// The seed fixes the head's (and a scratch encoder's) initialisation and
	// the dropout masks; the loader's shuffles follow it too.
	torch.ManualSeed(f.seed)
	clf, err := model.NewClassifier(f.cfg.Encoder, f.ds.NumTasks(), f.dev, torch.Float32)
	if err != nil {
		return run, err
	}
	defer clf.Free()
	if state != nil {
		if err := torch.LoadState(clf.EncoderState(), state); err != nil {
			return run, fmt.Errorf("encoder %s: %w", f.cfg.EncoderPath, err)
		}
	}
	adam := optim.NewAdam(clf.Store.Trainable(), f.cfg.LR)
	defer adam.Free()
	loader, err := data.NewLoader(data.LoaderConfig{
		Dataset: f.ds, Indices: f.split.Train, BatchSize: f.cfg.BatchSize, Shuffle: true, Seed: f.seed,
		Epochs: f.cfg.Epochs, Workers: f.cfg.Workers, Prepare: batchPrepare(f.dev),
	})
	if err != nil {
		return run, err
	}
	defer loader.Close()

	validLabels, testLabels := splitLabels(f.ds, f.split.Valid), splitLabels(f.ds, f.split.Test)
	for epoch := 1; epoch <= f.cfg.Epochs; epoch++ {
		epochStart := time.Now()
		loss, err := trainEpoch(clf, adam, loader, f.dev)
		if err != nil {
			return run, fmt.Errorf("epoch %d: %w", epoch, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return run, fmt.Errorf("epoch %d: the training loss is %v: the model diverged (is the learning rate %g too high, or the encoder %s damaged?)",
				epoch, loss, f.cfg.LR, encoderName(f.cfg.EncoderPath))
		}
		testPerTask, test, err := f.evaluate(clf, f.split.Test, testLabels)
		if err != nil {
			return run, fmt.Errorf("epoch %d, test: %w", epoch, err)
		}
		run.TrainLoss = append(run.TrainLoss, metrics.Value(loss))
		run.TestROCAUC = append(run.TestROCAUC, metrics.Value(test))
		run.testPerTaskByEpoch = append(run.testPerTaskByEpoch, testPerTask)
		validText := "" // cross-validation selects across folds afterwards
		if len(f.split.Valid) > 0 {
			_, valid, err := f.evaluate(clf, f.split.Valid, validLabels)
			if err != nil {
				return run, fmt.Errorf("epoch %d, valid: %w", epoch, err)
			}
			run.ValidROCAUC = append(run.ValidROCAUC, metrics.Value(valid))
			// Model selection on valid only (§7); the earliest epoch wins ties.
			if run.BestEpoch == 0 || valid > float64(run.BestValid) {
				run.BestEpoch, run.BestValid, run.TestAtBest = epoch, metrics.Value(valid), metrics.Value(test)
				run.TestPerTask = toValues(testPerTask)
			}
			validText = fmt.Sprintf(", valid ROC-AUC %.4f", valid)
		}
		run.EpochSeconds = append(run.EpochSeconds, time.Since(epochStart).Seconds())
		if f.cfg.Progress != nil {
			fmt.Fprintf(f.cfg.Progress, "finetune %s: seed %d, %s split, epoch %d/%d: loss %.4f%s, test ROC-AUC %.4f (%.1fs)\n",
				f.name, f.seed, f.split.Name, epoch, f.cfg.Epochs, loss, validText, test, time.Since(epochStart).Seconds())
		}
	}
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}

// trainEpoch runs one epoch of optimiser steps and returns the mean of the
// batches' losses. The losses stay on the device until the epoch ends, so
// that the steps never wait to read them.
func trainEpoch(clf *model.Classifier, adam *optim.Adam, loader *data.Loader, dev torch.Device) (float64, error) {
	epoch := torch.NewScope()
	defer epoch.Close()
	losses := make([]*torch.Tensor, 0, loader.BatchesPerEpoch())
	for range loader.BatchesPerEpoch() {
		b, err := loader.Next()
		if err != nil {
			return 0, err
		}
		func() {
			s := torch.NewScope()
			defer s.Close()
			defer loader.Release(b)
			labels, mask := b.Targets(dev)
			loss := MaskedBCEWithLogits(clf.Forward(b.Graph(dev), true), labels, mask)
			adam.ZeroGrad()
			loss.Backward()
			adam.Step()
			losses = append(losses, s.Keep(loss.Detach()))
		}()
	}
	return torch.Stack(losses, 0).Mean().Item(), nil
}

// evaluate is the evaluation-mode ROC-AUC of the classifier on molecules idx
// (labels: their label matrix), per task and averaged by OGB's rules.
func (f *finetuner) evaluate(clf *model.Classifier, idx []int32, labels []float32) ([]float64, float64, error) {
	scores := make([]float32, 0, len(labels))
	err := forEachBatch(f.ds, idx, f.cfg.Workers, f.dev, func(b *data.Batch, _ *torch.Scope) {
		scores = append(scores, torch.ToSlice[float32](clf.Forward(b.Graph(f.dev), false))...)
	})
	if err != nil {
		return nil, 0, err
	}
	return metrics.ROCAUC(labels, scores, f.ds.NumTasks())
}

// encoderName names an encoder in messages: its file, or the random one.
func encoderName(path string) string {
	if path == "" {
		return "(random)"
	}
	return path
}
