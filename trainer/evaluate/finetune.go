package evaluate

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// FinetuneConfig is a fine-tuning experiment, docs/method.md §7's "transfer
// fine-tune" protocol. DefaultFinetuneConfig holds §1's downstream settings.
type FinetuneConfig struct {
	// Common is what is measured on which data; without EncoderPath the
	// Encoder architecture is trained from scratch ("Non-Pretrain"). Its
	// Dropout is ignored in favour of Dropout.
	Common
	Dropout float64 `json:"dropout"` // encoder dropout while fine-tuning (§1: 0.5)

	Epochs    int `json:"epochs"`
	BatchSize int `json:"batch_size"`
	// Recipe is how the runs train (its fields sit beside these in JSON):
	// Adam's rate, and the options that keep pre-trained features.
	Recipe

	// Save, when not empty, is a new folder to write the selected models
	// into, an ensemble (infer.Ensemble): every seed's model at its
	// selected epoch, each a folder as infer.SaveModel writes, or with
	// SaveTop only the SaveTop best by valid. It needs a valid part: the
	// scaffold protocol.
	Save    string `json:"save,omitempty"`
	SaveTop int    `json:"save_top,omitempty"`
}

// DefaultFinetuneConfig is docs/method.md §1's downstream setting: Adam 1e-3
// on every parameter, batch 32, 100 epochs, dropout 0.5, 10 seeds, on the
// scaffold split, with §1's encoder architecture for runs without a
// pre-trained encoder.
func DefaultFinetuneConfig() FinetuneConfig {
	return FinetuneConfig{
		Common:    defaultCommon(),
		Dropout:   0.5,
		Epochs:    100,
		BatchSize: 32,
		Recipe:    Recipe{LR: 1e-3},
	}
}

// WithoutRecipe is c without its Recipe, how the model is trained: what
// two fine-tunings must have in common for one's runs without pre-training
// to stand for the other's (suite.Config.RandomFrom), each side being free
// to train with the recipe that suits it.
func (c FinetuneConfig) WithoutRecipe() FinetuneConfig {
	c.Recipe = Recipe{}
	return c
}

// Validate reports the first setting that cannot work, naming its field.
func (c FinetuneConfig) Validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := field.Finite("dropout", c.Dropout); err != nil {
		return err
	}
	switch {
	case c.Dropout < 0 || c.Dropout >= 1:
		return field.Errorf("dropout", c.Dropout, "must be in [0, 1)")
	case c.Epochs < 1:
		return field.Errorf("epochs", c.Epochs, "must be positive")
	case c.BatchSize < 1:
		return field.Errorf("batch_size", c.BatchSize, "must be positive")
	}
	if err := c.Recipe.validate(c.Epochs, c.Protocol.CrossValidated()); err != nil {
		return err
	}
	switch {
	case c.SaveTop < 0:
		return field.Errorf("save_top", c.SaveTop, "must not be negative")
	case c.SaveTop > 0 && c.Save == "":
		return field.Errorf("save_top", c.SaveTop, "needs a folder to save the models in")
	case c.SaveTop > c.Seeds:
		return field.Errorf("save_top", c.SaveTop, "must be at most the number of seeds, %d", c.Seeds)
	case c.Save != "" && c.Protocol.CrossValidated():
		return field.Errorf("save", c.Save, "needs protocol %s: cross-validation has no valid part to choose the saved model on", ProtocolScaffold)
	case c.EncoderPath == "":
		arch := c.Encoder
		arch.Dropout = c.Dropout // the one trained with
		return field.Within("encoder", arch.Validate())
	}
	return nil
}

// FinetuneResult is a fine-tuning experiment's outcome, written as JSON.
// ROC-AUC values follow OGB's rules (ROCAUC) and lie in [0, 1]. On
// regression tasks (Metric MetricRMSE) the figures named ROC-AUC below are
// RMSE in the labels' units, lower being better, and MAE is reported too.
type FinetuneResult struct {
	Evaluation string         `json:"evaluation"` // "finetune"
	Metric     string         `json:"metric"`     // MetricROCAUC or MetricRMSE: what Test, Valid and the selection use
	Protocol   Protocol       `json:"protocol"`   // as Config.Protocol
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
	// TestMAE is regression's test MAE at each run's selected epoch.
	TestMAE *metrics.Stat `json:"test_mae,omitempty"`
	// Saved is the ensemble Config.Save holds.
	Saved *SavedEnsemble `json:"saved,omitempty"`
	// Seconds is the evaluation's wall time; in a suite, where its runs
	// share the cores with others, the sum of its runs' times.
	Seconds float64 `json:"seconds"`
}

// The metrics an evaluation selects and reports on.
const (
	MetricROCAUC = infer.MetricROCAUC // classification tasks: higher is better
	MetricRMSE   = infer.MetricRMSE   // regression tasks, in the labels' units: lower is better
)

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
	// evaluation-mode ROC-AUC on the valid (null without one) and test parts;
	// on regression tasks RMSE and the test MAE instead (the loss is then
	// the MSE in standardised units).
	TrainLoss    []metrics.Value `json:"train_loss"`
	ValidROCAUC  []metrics.Value `json:"valid_roc_auc"`
	TestROCAUC   []metrics.Value `json:"test_roc_auc"`
	ValidRMSE    []metrics.Value `json:"valid_rmse,omitempty"`
	TestRMSE     []metrics.Value `json:"test_rmse,omitempty"`
	TestMAE      []metrics.Value `json:"test_mae,omitempty"`
	EpochSeconds []float64       `json:"epoch_seconds"`

	// BestEpoch, from 1, is the selected epoch: the first with the best
	// valid figure (highest ROC-AUC, lowest RMSE), or with cross-validation
	// the seed's (SelectedEpoch). BestValid and TestAtBest are that metric.
	BestEpoch     int             `json:"best_epoch"`
	BestValid     metrics.Value   `json:"best_valid"`
	TestAtBest    metrics.Value   `json:"test_at_best"`
	TestMAEAtBest metrics.Value   `json:"test_mae_at_best,omitempty"`
	TestPerTask   []metrics.Value `json:"test_per_task"` // at BestEpoch; null for a task lacking a class in the test part
	// StoppedAt is the last epoch trained when Recipe.Patience stopped the
	// run early; 0 when it ran every epoch.
	StoppedAt int `json:"stopped_at,omitempty"`
	// ProbeL2 is the λ each task's linear probe took (Recipe.LinearProbeStart).
	ProbeL2 []float64 `json:"probe_l2,omitempty"`
	Seconds float64   `json:"seconds"`

	testPerTaskByEpoch [][]float64 // for the selection across folds
	// The model at BestEpoch (CPU copies) and the label standardisation it
	// was trained with, kept only to be saved (Config.Save).
	snapshot []torch.Named
	std      metrics.Standardizer
}

// Finetune trains a classifier (encoder + graph head, model.Classifier) on
// every split and seed, and reports the test ROC-AUC at the epoch of best
// valid ROC-AUC, mean ± std over runs (docs/method.md §7); with cross-validation
// (the paper's protocol) each seed draws its own folds and its runs report
// the epoch of best fold-averaged test ROC-AUC. The loss is BCE with
// logits over labelled entries only; training batches are reshuffled every
// epoch from the run's seed; evaluation covers every molecule of a part.
func Finetune(cfg FinetuneConfig, env runenv.Env) (*FinetuneResult, error) {
	return runenv.Run(env, cfg.Validate, func() (*FinetuneResult, error) { return finetune(cfg, env) })
}

// finetune is Finetune after runenv's prologue.
func finetune(cfg FinetuneConfig, env runenv.Env) (*FinetuneResult, error) {
	start := time.Now()
	if cfg.Save != "" {
		// Refused now rather than after the training.
		if _, err := os.Stat(cfg.Save); err == nil {
			return nil, fmt.Errorf("save %s: already exists", cfg.Save)
		}
	}
	p, err := cfg.Plan(cfg.Common, env)
	if err != nil {
		return nil, err
	}
	var res *FinetuneResult
	run := func() error {
		results, err := runAll(env, p.Runs)
		if err != nil {
			return err
		}
		out, err := p.Outcome(results)
		res = out.Finetune
		return err
	}
	if cfg.Save == "" {
		err = run()
	} else {
		// Every run writes its member into the folder's temporary; the
		// folder appears once the members kept and ensemble.json are in.
		err = atomicfile.WriteDir(cfg.Save, func(tmp string) error {
			for i := range p.Runs {
				p.Runs[i].Member = filepath.Join(tmp, memberDir(p.Runs[i].Seed))
			}
			if err := run(); err != nil {
				return err
			}
			return keepMembers(res, tmp)
		})
	}
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// Plan opens the data and encoder of c with common in place of its shared
// settings where env says, checks every seed's splits, and lists the runs:
// a fresh classifier trained on each split of each seed.
func (c FinetuneConfig) Plan(common Common, env runenv.Env) (*Plan, error) {
	c.Common = common
	se, err := c.Common.open(env)
	if err != nil {
		return nil, err
	}
	defer se.close()
	res := FinetuneResult{Evaluation: "finetune", Metric: MetricROCAUC, Protocol: c.Protocol, Folds: c.Protocol.Folds(), Config: c, Device: se.dev.String(),
		Dataset: summarizeDataset(c.Data, se.ds, c.Protocol), Pretrained: se.state != nil}
	if se.regression {
		res.Metric = MetricRMSE
	}
	res.Config.Encoder = se.arch
	res.Config.Encoder.Dropout = c.Dropout
	splits, err := c.Common.checkSplits(se)
	if err != nil {
		return nil, err
	}
	if c.Save != "" {
		// What each saved member's model.json will say, checked before the
		// training rather than when the first member is written.
		if err := infer.CheckTaskNames(se.ds.Tasks); err != nil {
			return nil, fmt.Errorf("save %s: cannot hold the models of %s: %w", c.Save, c.Data, err)
		}
	}
	run := res.Config
	return &Plan{
		Runs:    planRuns(RunSpec{Finetune: &run}, c.Seed, splits),
		outcome: func(records []runRecord) (Outcome, error) { return finetuneOutcome(res, records, splits) },
	}, nil
}

// finetuneOutcome is res completed with its runs' records (splits[i] of
// seed i, in order): under cross-validation each seed's epoch chosen on its
// folds, and the summaries over runs.
func finetuneOutcome(res FinetuneResult, records []runRecord, splits []int) (Outcome, error) {
	regression := res.Metric == MetricRMSE
	k := 0
	for i, n := range splits {
		seedRuns := make([]FinetuneRun, 0, n)
		for range n {
			if records[k].Finetune == nil {
				return Outcome{}, fmt.Errorf("the result of run %d is not a fine-tuning run's", k)
			}
			seedRuns = append(seedRuns, records[k].Finetune.run())
			k++
		}
		if res.Protocol.CrossValidated() {
			res.Selected = append(res.Selected, selectEpochOnFolds(res.Config.Seed+uint64(i), seedRuns, regression))
		}
		res.Runs = append(res.Runs, seedRuns...)
	}

	tests, valids, maes := make([]float64, len(res.Runs)), make([]float64, len(res.Runs)), make([]float64, len(res.Runs))
	perTask := make([][]metrics.Value, len(res.Runs))
	res.Seconds = 0
	for i, r := range res.Runs {
		tests[i], valids[i], maes[i], perTask[i] = float64(r.TestAtBest), float64(r.BestValid), float64(r.TestMAEAtBest), r.TestPerTask
		res.Seconds += r.Seconds
	}
	res.Test, res.Valid = metrics.StatOf(tests), metrics.StatOf(valids)
	if regression {
		mae := metrics.StatOf(maes)
		res.TestMAE = &mae
	}
	res.TestPerTask = perTaskStats(res.Dataset.Tasks, perTask)
	out := Outcome{Test: res.Test, Finetune: &res}
	for _, run := range res.Runs {
		out.RunTests = append(out.RunTests, run.TestAtBest)
	}
	return out, nil
}

// better reports whether figure a beats b: a higher ROC-AUC, or a lower
// RMSE on regression tasks. NaN never beats.
func better(regression bool, a, b float64) bool {
	if regression {
		return a < b || math.IsNaN(b) && !math.IsNaN(a)
	}
	return a > b || math.IsNaN(b) && !math.IsNaN(a)
}

// finetuner is one run: a seed on a split.
type finetuner struct {
	cfg        *FinetuneConfig
	name       string // the dataset's, in progress lines
	ds         *data.Dataset
	regression bool // MSE on standardised labels, RMSE selects
	split      *data.Split
	dev        torch.Device
	workers    int       // goroutines collating batches
	progress   io.Writer // one line per epoch; nil is silent
	seed       uint64
	// observe, for tests, sees the classifier before the first step (epoch
	// 0) and after each epoch's steps, before its evaluation.
	observe func(epoch int, clf *model.Classifier)
}

// run trains from a fresh classifier (pre-trained encoder weights from state
// when not nil) for cfg.Epochs epochs by cfg.Recipe, evaluating after each.
func (f *finetuner) run(state []torch.Named) (FinetuneRun, error) {
	start := time.Now()
	run := FinetuneRun{Seed: f.seed, Split: f.split.Name, Train: len(f.split.Train), Valid: len(f.split.Valid), Test: len(f.split.Test),
		BestValid: metrics.Value(math.NaN()), TestAtBest: metrics.Value(math.NaN())}
	recipe := f.cfg.Recipe
	// The seed fixes the head's (and a scratch encoder's) initialisation and
	// the dropout masks; the loader's shuffles follow it too.
	torch.ManualSeed(f.seed)
	clf, err := model.NewClassifier(f.cfg.Encoder, f.ds.NumTasks(), f.dev, torch.Float32)
	if err != nil {
		return run, err
	}
	defer clf.Free()
	if err := f.cfg.Precision.Apply(clf.Store); err != nil {
		return run, err
	}
	if state != nil {
		if err := torch.LoadState(clf.EncoderState(), state); err != nil {
			return run, fmt.Errorf("encoder %s: %w", f.cfg.EncoderPath, err)
		}
	}
	// Regression trains on labels standardised with the train part's
	// statistics (a copy of the dataset with those labels; the molecules
	// are shared) and is evaluated in the labels' units.
	train := f.ds
	if f.regression {
		run.std = metrics.FitStandardizer(splitLabels(f.ds, f.split.Train), f.ds.NumTasks())
		standardised := *f.ds
		standardised.Labels = run.std.Apply(f.ds.Labels)
		train = &standardised
	}
	if recipe.LinearProbeStart {
		if run.ProbeL2, err = f.linearProbeStart(clf, train); err != nil {
			return run, err
		}
	}
	weights := recipe.evaluatedWeights(clf)
	defer weights.free()
	opt := recipe.newOptimizers(clf)
	defer opt.free()
	loader, err := feed.NewLoader(feed.LoaderConfig{
		Dataset: train, Indices: f.split.Train, BatchSize: f.cfg.BatchSize, Shuffle: true, Seed: f.seed,
		Epochs: f.cfg.Epochs, Workers: f.workers, Prepare: batchPrepare(f.dev),
	})
	if err != nil {
		return run, err
	}
	defer loader.Close()

	validLabels, testLabels := splitLabels(f.ds, f.split.Valid), splitLabels(f.ds, f.split.Test)
	if f.observe != nil {
		f.observe(0, clf)
	}
	metric := "ROC-AUC"
	if f.regression {
		metric = "RMSE"
	}
	for epoch := 1; epoch <= f.cfg.Epochs; epoch++ {
		epochStart := time.Now()
		loss, err := trainEpoch(clf, opt, loader, epochSteps{
			dev: f.dev, regression: f.regression, frozenEncoder: epoch <= recipe.FreezeEpochs,
			recipe: recipe, firstStep: (epoch - 1) * loader.BatchesPerEpoch(),
		})
		if err != nil {
			return run, fmt.Errorf("epoch %d: %w", epoch, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return run, fmt.Errorf("epoch %d: the training loss is %v: the model diverged (is %s too high, or the encoder %s damaged?)",
				epoch, loss, recipe.steps(), encoderName(f.cfg.EncoderPath))
		}
		if f.observe != nil {
			f.observe(epoch, clf)
		}
		run.TrainLoss = append(run.TrainLoss, metrics.Value(loss))
		weights.apply() // what is evaluated, selected and saved
		validText, err := f.evaluateEpoch(&run, clf, epoch, validLabels, testLabels)
		weights.restore()
		if err != nil {
			return run, err
		}
		run.EpochSeconds = append(run.EpochSeconds, time.Since(epochStart).Seconds())
		if f.progress != nil {
			fmt.Fprintf(f.progress, "finetune %s: seed %d, %s split, epoch %d/%d: loss %.4f%s, test %s %.4f (%.1fs)\n",
				f.name, f.seed, f.split.Name, epoch, f.cfg.Epochs, loss, validText, metric, run.testCurve()[epoch-1], time.Since(epochStart).Seconds())
		}
		// Patience counts from the best valid epoch: without a valid part
		// (refused by Validate) there is none, and nothing stops.
		if recipe.Patience > 0 && len(f.split.Valid) > 0 && epoch-run.BestEpoch >= recipe.Patience {
			run.StoppedAt = epoch
			break
		}
	}
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}

// evaluateEpoch records the figures of the classifier as it stands after
// epoch on the test and valid parts, and, on valid, whether the epoch is the
// best so far (the earliest wins ties; cross-validation selects across
// folds afterwards). It returns the valid figure for the progress line.
func (f *finetuner) evaluateEpoch(run *FinetuneRun, clf *model.Classifier, epoch int, validLabels, testLabels []float32) (string, error) {
	test, err := f.evaluate(clf, run.std, f.split.Test, testLabels)
	if err != nil {
		return "", fmt.Errorf("epoch %d, test: %w", epoch, err)
	}
	if f.regression {
		run.TestRMSE = append(run.TestRMSE, metrics.Value(test.value))
		run.TestMAE = append(run.TestMAE, metrics.Value(test.mae))
	} else {
		run.TestROCAUC = append(run.TestROCAUC, metrics.Value(test.value))
	}
	run.testPerTaskByEpoch = append(run.testPerTaskByEpoch, test.perTask)
	if len(f.split.Valid) == 0 {
		return "", nil
	}
	valid, err := f.evaluate(clf, run.std, f.split.Valid, validLabels)
	if err != nil {
		return "", fmt.Errorf("epoch %d, valid: %w", epoch, err)
	}
	metric := "ROC-AUC"
	if f.regression {
		run.ValidRMSE = append(run.ValidRMSE, metrics.Value(valid.value))
		metric = "RMSE"
	} else {
		run.ValidROCAUC = append(run.ValidROCAUC, metrics.Value(valid.value))
	}
	// Model selection on valid only (§7); the earliest epoch wins ties.
	if run.BestEpoch == 0 || better(f.regression, valid.value, float64(run.BestValid)) {
		run.BestEpoch, run.BestValid, run.TestAtBest = epoch, metrics.Value(valid.value), metrics.Value(test.value)
		run.TestPerTask = toValues(test.perTask)
		if f.regression {
			run.TestMAEAtBest = metrics.Value(test.mae)
		}
		if f.cfg.Save != "" {
			torch.FreeNamed(run.snapshot)
			run.snapshot = snapshot(clf)
		}
	}
	return fmt.Sprintf(", valid %s %.4f", metric, valid.value), nil
}

// epochSteps is how an epoch's steps run: on which device, with which loss,
// whether the encoder is frozen (evaluation mode, no gradient), and the
// recipe's warm-up from the epoch's first step (counted over the run).
type epochSteps struct {
	dev           torch.Device
	regression    bool
	frozenEncoder bool
	recipe        Recipe
	firstStep     int
}

// trainEpoch runs one epoch of optimiser steps and returns the mean of the
// batches' losses. The losses stay on the device until the epoch ends, so
// that the steps never wait to read them.
func trainEpoch(clf *model.Classifier, opt *optimizers, loader *feed.Loader, e epochSteps) (float64, error) {
	epoch := torch.NewScope()
	defer epoch.Close()
	steps := loader.BatchesPerEpoch()
	losses := make([]*torch.Tensor, 0, steps)
	for i := range steps {
		b, err := loader.Next()
		if err != nil {
			return 0, err
		}
		losses = append(losses, trainStep(clf, opt, b, e, e.firstStep+i, steps))
		loader.Release(b)
	}
	return torch.Stack(losses, 0).Mean().Item(), nil
}

// trainStep is one optimiser step on batch b, the run's step-th (from 0)
// of stepsPerEpoch an epoch, and returns its loss (0-d, detached, in the
// caller's scope): BCE with logits, or on regression tasks the squared
// error of the standardised labels, over labelled entries.
func trainStep(clf *model.Classifier, opt *optimizers, b *feed.Batch, e epochSteps, step, stepsPerEpoch int) *torch.Tensor {
	s := torch.NewScope()
	defer s.Close()
	labels, mask := b.Targets(e.dev)
	g := b.Graph(e.dev)
	var out *torch.Tensor
	if e.frozenEncoder {
		h := torch.NoGradValue(func() *torch.Tensor { return clf.Encoder.Forward(g, false) })
		out = clf.Head.Forward(h, g)
	} else {
		out = clf.Forward(g, true)
	}
	var loss *torch.Tensor
	if e.regression {
		loss = MaskedMSE(out, labels, mask)
	} else {
		loss = MaskedBCEWithLogits(out, labels, mask)
	}
	opt.setScale(e.recipe.warmupScale(step, stepsPerEpoch))
	opt.zeroGrad()
	loss.Backward()
	opt.step()
	return s.Keep(loss.Detach())
}

// figures are a part's evaluation: the selection metric per task and
// averaged, and on regression tasks the MAE.
type figures struct {
	perTask    []float64
	value, mae float64
}

// evaluate is the evaluation-mode ROC-AUC of the classifier on molecules idx
// (labels: their label matrix), per task and averaged by OGB's rules; on
// regression tasks the RMSE and MAE of its outputs mapped back to the
// labels' units with std.
func (f *finetuner) evaluate(clf *model.Classifier, std metrics.Standardizer, idx []int32, labels []float32) (figures, error) {
	scores := make([]float32, 0, len(labels))
	err := forEachBatch(f.ds, idx, f.workers, f.dev, func(b *feed.Batch, _ *torch.Scope) {
		scores = append(scores, torch.ToSlice[float32](clf.Forward(b.Graph(f.dev), false))...)
	})
	if err != nil {
		return figures{}, err
	}
	var r figures
	if !f.regression {
		r.perTask, r.value, err = metrics.ROCAUC(labels, scores, f.ds.NumTasks())
		return r, err
	}
	preds := std.Restore(scores)
	if r.perTask, r.value, err = metrics.RMSE(labels, preds, f.ds.NumTasks()); err != nil {
		return r, err
	}
	_, r.mae, err = metrics.MAE(labels, preds, f.ds.NumTasks())
	return r, err
}

// encoderName names an encoder in messages: its file, or the random one.
func encoderName(path string) string {
	if path == "" {
		return "(random)"
	}
	return path
}
