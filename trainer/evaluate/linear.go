package evaluate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/trainer/evaluate/linfit"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// LinearEvalConfig is a linear evaluation ("feature extraction", docs/method.md
// §7): a frozen encoder's mean-pooled graph embeddings, and on them one
// L2-regularised logistic regression per task.
//
// The classifier is fitted with libtorch: features are standardised with the
// train part's mean and std; for every L2 strength λ of L2Grid at once, a
// weight vector w_t and bias per task t minimise, full batch, with Adam for
// Steps steps at rate LR,
//
//	mean over the train molecules labelled for t of BCE(x·w_t + b_t, y_t) + λ/2·‖w_t‖²
//
// (scikit-learn's LogisticRegression with C = 1/(λ·n_t)). Tasks and grid
// values share nothing, so this is T·|L2Grid| separate fits. On the scaffold
// split each task then keeps the λ with the highest valid ROC-AUC (the first
// in grid order on ties; the best λ on mean valid ROC-AUC for a task whose
// valid labels hold one class), and its test ROC-AUC is reported. With
// cross-validation (the paper's protocol) there is no valid part: each seed
// keeps the one λ, for every task, whose mean test ROC-AUC averaged over the
// seed's folds is highest, which is optimistic (see ProtocolCV10).
type LinearEvalConfig struct {
	// Common is what is measured on which data; without EncoderPath a
	// random encoder of the Encoder architecture (the baseline), drawn anew
	// for each seed. Dropout does not matter: the encoder runs in evaluation
	// mode.
	Common

	L2Grid []float64 `json:"l2_grid"` // λ values tried
	Steps  int       `json:"steps"`   // full-batch Adam steps per fit
	LR     float64   `json:"lr"`      // Adam's rate for the classifier

	// LabelFractions, when not empty, fit every run once per fraction on
	// that share of its split's train molecules (LabelSubsets, drawn from
	// the run's seed: the same molecules for every encoder), valid and test
	// unchanged: the label-scarce regime. Empty: every train label.
	LabelFractions []float64 `json:"label_fractions,omitempty"`
}

// DefaultLinearEvalConfig is 10 seeds on the scaffold split (docs/method.md §7),
// λ from 10 down to 1e-5 by decades, 500 Adam steps at rate 0.01, and §1's
// encoder architecture for the random baseline.
func DefaultLinearEvalConfig() LinearEvalConfig {
	return LinearEvalConfig{
		Common: defaultCommon(),
		L2Grid: []float64{10, 1, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5},
		Steps:  500,
		LR:     0.01,
	}
}

// Validate reports the first setting that cannot work, naming its field.
func (c LinearEvalConfig) Validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if c.EncoderPath == "" {
		arch := c.Encoder
		arch.Dropout = 0 // evaluation mode
		if err := arch.Validate(); err != nil {
			return field.Within("encoder", err)
		}
	}
	if len(c.L2Grid) == 0 {
		return field.Errorf("l2_grid", "", "must hold at least one value")
	}
	for _, l := range c.L2Grid {
		if !(l >= 0) || math.IsInf(l, 0) {
			return field.Errorf("l2_grid", l, "must hold finite values, not negative")
		}
	}
	if err := field.Finite("lr", c.LR); err != nil {
		return err
	}
	switch {
	case c.Steps < 1:
		return field.Errorf("steps", c.Steps, "must be positive")
	case !(c.LR > 0):
		return field.Errorf("lr", c.LR, "must be positive")
	}
	return ValidateLabelFractions(c.LabelFractions)
}

// LinearEvalResult is a linear evaluation's outcome, written as JSON.
//
// On regression tasks (Metric MetricRMSE) the probe is a ridge regression
// (fitRidgeRun) and the figures named ROC-AUC are RMSE, lower being better.
type LinearEvalResult struct {
	Evaluation   string           `json:"evaluation"` // "linear"
	Metric       string           `json:"metric"`     // MetricROCAUC or MetricRMSE: what Test, Valid and the selection use
	Protocol     Protocol         `json:"protocol"`   // as Config.Protocol
	Folds        int              `json:"folds"`      // cross-validation folds; 0 on the scaffold split
	Config       LinearEvalConfig `json:"config"`     // as run: Encoder is the architecture used
	Device       string           `json:"device"`
	Dataset      DatasetSummary   `json:"dataset"`
	Pretrained   bool             `json:"pretrained"` // weights loaded from Config.EncoderPath
	EmbeddingDim int              `json:"embedding_dim"`

	// Seed by seed, fold by fold within a seed, and within a fold by label
	// fraction in Config.LabelFractions' order.
	Runs []LinearEvalRun `json:"runs"`

	// Selected is, with cross-validation, each seed's λ chosen on the test
	// ROC-AUC averaged over its folds (optimistic: see ProtocolCV10), for
	// each label fraction.
	Selected []SelectedL2 `json:"selected,omitempty"`

	// Test, Valid and TestPerTask are over the runs of the largest label
	// fraction (every run without Config.LabelFractions).
	Test         metrics.Stat  `json:"test"`  // test ROC-AUC at the chosen λ, over runs
	Valid        metrics.Stat  `json:"valid"` // valid ROC-AUC at the chosen λ; undefined with cross-validation
	TestPerTask  []TaskStat    `json:"test_per_task"`
	TestMAE      *metrics.Stat `json:"test_mae,omitempty"` // regression: test MAE at the chosen λ, over runs
	EmbedSeconds float64       `json:"embed_seconds"`      // computing embeddings, in all
	// Seconds is the evaluation's wall time; in a suite, where its runs
	// share the cores with others, the sum of its runs' times.
	Seconds float64 `json:"seconds"`

	// ByFraction summarises the runs of each label fraction, in
	// Config.LabelFractions' order; empty without them.
	ByFraction []FractionStat `json:"by_fraction,omitempty"`
}

// SelectedL2 is the λ a seed's folds report under cross-validation.
type SelectedL2 struct {
	Seed          uint64        `json:"seed"`
	LabelFraction float64       `json:"label_fraction"` // share of the train labels the folds fitted on
	L2            float64       `json:"l2"`
	FoldMean      metrics.Value `json:"fold_mean"` // mean test ROC-AUC at L2 averaged over the folds
}

// FractionStat is linear evaluation with one share of the train labels.
type FractionStat struct {
	Fraction float64      `json:"fraction"`
	Train    []int        `json:"train"` // labelled molecules fitted on, per split in order
	Test     metrics.Stat `json:"test"`
	Valid    metrics.Stat `json:"valid"`
}

// LinearEvalRun is one seed on one split with one share of its train labels.
type LinearEvalRun struct {
	Seed  uint64 `json:"seed"`
	Split string `json:"split"`
	Train int    `json:"train"` // molecules fitted on: LabelSubsets of the split's train part
	Valid int    `json:"valid"`
	Test  int    `json:"test"`

	LabelFraction float64 `json:"label_fraction"` // share of the train part fitted on
	TrainPart     int     `json:"train_part"`     // molecules in the split's train part

	// Per λ of the grid, in its order: mean valid ROC-AUC over tasks (null
	// without a valid part), mean test ROC-AUC over tasks, and the final
	// training BCE (mean over tasks, without the penalty), which shows
	// whether the fits converged.
	ValidByL2     []metrics.Value `json:"valid_by_l2"`
	TestByL2      []metrics.Value `json:"test_by_l2"`
	TrainLossByL2 []metrics.Value `json:"train_loss_by_l2"`

	L2          []float64     `json:"l2"` // λ chosen for each task
	ValidROCAUC metrics.Value `json:"valid_roc_auc"`
	TestROCAUC  metrics.Value `json:"test_roc_auc"`
	// Regression tasks: RMSE and MAE instead of ROC-AUC (null).
	ValidRMSE   metrics.Value   `json:"valid_rmse,omitempty"`
	TestRMSE    metrics.Value   `json:"test_rmse,omitempty"`
	TestMAE     metrics.Value   `json:"test_mae,omitempty"`
	TestPerTask []metrics.Value `json:"test_per_task"` // null for a task lacking a class in the test part
	Seconds     float64         `json:"seconds"`

	testPerTaskByL2 [][]float64 // [λ][task], for the selection across folds
	testMAEByL2     []float64   // regression: mean test MAE over tasks per λ
}

// figures are the run's valid and test values of the selection metric.
func (r *LinearEvalRun) figures(regression bool) (valid, test metrics.Value) {
	if regression {
		return r.ValidRMSE, r.TestRMSE
	}
	return r.ValidROCAUC, r.TestROCAUC
}

// LinearEval embeds every molecule with the frozen encoder (evaluation mode:
// running batch-norm statistics, no dropout; mean pooling as in
// pre-training) and fits the per-task logistic regressions described at
// LinearEvalConfig on every split and seed. A pre-trained encoder's
// embeddings are computed once; the random baseline draws a new encoder per
// seed, so that its spread includes the encoder's.
func LinearEval(cfg LinearEvalConfig, env runenv.Env) (*LinearEvalResult, error) {
	return runenv.Run(env, cfg.Validate, func() (*LinearEvalResult, error) { return linearEval(cfg, env) })
}

// linearEval is LinearEval after runenv's prologue.
func linearEval(cfg LinearEvalConfig, env runenv.Env) (*LinearEvalResult, error) {
	start := time.Now()
	p, err := cfg.Plan(cfg.Common, env)
	if err != nil {
		return nil, err
	}
	results, err := runAll(env, p.Runs)
	if err != nil {
		return nil, err
	}
	out, err := p.Outcome(results)
	if err != nil {
		return nil, err
	}
	out.Linear.Seconds = time.Since(start).Seconds()
	return out.Linear, nil
}

// fractions are the label fractions each run fits on: LabelFractions, or
// every label.
func (c LinearEvalConfig) fractions() []float64 {
	if len(c.LabelFractions) == 0 {
		return []float64{1}
	}
	return c.LabelFractions
}

// Plan opens the data and encoder of c with common in place of its shared
// settings where env says, checks every seed's splits, and lists the runs:
// the fits of every label fraction on each split of each seed. Each seed's
// progress lines go to env.Progress as Plan.Outcome summarises it.
func (c LinearEvalConfig) Plan(common Common, env runenv.Env) (*Plan, error) {
	c.Common = common
	se, err := c.Common.open(env)
	if err != nil {
		return nil, err
	}
	defer se.close()
	res := LinearEvalResult{Evaluation: "linear", Metric: MetricROCAUC, Protocol: c.Protocol, Folds: c.Protocol.Folds(), Config: c, Device: se.dev.String(),
		Dataset: summarizeDataset(c.Data, se.ds, c.Protocol), Pretrained: se.state != nil, EmbeddingDim: se.arch.Hidden}
	res.Config.Encoder = se.arch
	if se.regression {
		res.Metric = MetricRMSE
		for _, l := range c.L2Grid {
			if !(l > 0) {
				return nil, field.Errorf("l2_grid", l, "must hold positive values for ridge regression (the tasks of %s are regression tasks)", res.Dataset.Name)
			}
		}
	}
	splits, err := c.Common.checkSplits(se)
	if err != nil {
		return nil, err
	}
	run, progress := res.Config, env.Progress
	return &Plan{
		Runs:    planRuns(RunSpec{Linear: &run}, c.Seed, splits),
		outcome: func(records []runRecord) (Outcome, error) { return linearOutcome(res, records, splits, progress) },
	}, nil
}

// linearOutcome is res completed with its runs' records (splits[i] of seed
// i, in order): under cross-validation each seed's λ chosen on its folds
// for each label fraction, and the summaries over runs. Each seed's runs
// are told to progress.
func linearOutcome(res LinearEvalResult, records []runRecord, splits []int, progress io.Writer) (Outcome, error) {
	cfg := res.Config
	regression := res.Metric == MetricRMSE
	metric := "ROC-AUC"
	if regression {
		metric = "RMSE"
	}
	fractions := cfg.fractions()
	res.EmbedSeconds, res.Seconds = 0, 0
	k := 0
	for i, n := range splits {
		seed := cfg.Seed + uint64(i)
		seedRuns := make([]LinearEvalRun, 0, n*len(fractions))
		for range n {
			if len(records[k].Linear) != len(fractions) {
				return Outcome{}, fmt.Errorf("the result of run %d holds %d linear fits, not %d", k, len(records[k].Linear), len(fractions))
			}
			for _, r := range records[k].Linear {
				seedRuns = append(seedRuns, r.run())
				res.Seconds += r.Seconds
			}
			res.EmbedSeconds += records[k].EmbedSeconds
			k++
		}
		if cfg.Protocol.CrossValidated() {
			// The paper's selection, made for each label fraction on its own folds.
			for _, fraction := range fractions {
				var idx []int
				var runs []LinearEvalRun
				for j, r := range seedRuns {
					if r.LabelFraction == fraction {
						idx, runs = append(idx, j), append(runs, r)
					}
				}
				sel := selectL2OnFolds(seed, cfg.L2Grid, runs, regression)
				sel.LabelFraction = fraction
				res.Selected = append(res.Selected, sel)
				for k, j := range idx {
					seedRuns[j] = runs[k]
				}
			}
		}
		if progress != nil {
			for _, run := range seedRuns {
				fmt.Fprintf(progress, "linear-eval %s: seed %d, %s\n", res.Dataset.Name, seed, run.progressLine(cfg, metric, regression))
			}
		}
		res.Runs = append(res.Runs, seedRuns...)
	}
	res.Seconds += res.EmbedSeconds

	res.Test, res.Valid, res.TestPerTask = summarizeLinearRuns(res.Runs, slices.Max(fractions), res.Dataset.Tasks, regression)
	if regression {
		var maes []float64
		for _, r := range res.Runs {
			if r.LabelFraction == slices.Max(fractions) {
				maes = append(maes, float64(r.TestMAE))
			}
		}
		mae := metrics.StatOf(maes)
		res.TestMAE = &mae
	}
	for _, fraction := range cfg.LabelFractions {
		s := FractionStat{Fraction: fraction}
		s.Test, s.Valid, _ = summarizeLinearRuns(res.Runs, fraction, res.Dataset.Tasks, regression)
		for _, r := range res.Runs[:len(res.Runs)/cfg.Seeds] { // the first seed's runs
			if r.LabelFraction == fraction {
				s.Train = append(s.Train, r.Train)
			}
		}
		res.ByFraction = append(res.ByFraction, s)
	}
	out := Outcome{Test: res.Test, Linear: &res}
	for _, run := range res.Runs {
		_, test := run.figures(regression)
		out.RunTests = append(out.RunTests, test)
	}
	return out, nil
}

// progressLine says how a run went, for the progress output: its split,
// label share, validation figure (or the λ chosen across folds) and test
// figure.
func (run LinearEvalRun) progressLine(cfg LinearEvalConfig, metric string, regression bool) string {
	validFigure, testFigure := run.figures(regression)
	valid := fmt.Sprintf("valid %s %.4f", metric, validFigure)
	if cfg.Protocol.CrossValidated() {
		valid = fmt.Sprintf("λ %g chosen on the fold-averaged test", run.L2[0])
	}
	share := ""
	if len(cfg.LabelFractions) > 0 {
		share = fmt.Sprintf(", %.4g %% of train labels", 100*run.LabelFraction)
	}
	return fmt.Sprintf("%s split%s: %s, test %s %.4f (%.1fs)", run.Split, share, valid, metric, testFigure, run.Seconds)
}

// selectL2OnFolds applies the paper's selection to one seed's fold runs:
// each run reports, for every task, the λ of grid with the best mean test
// figure (highest ROC-AUC, lowest RMSE) averaged over the folds.
func selectL2OnFolds(seed uint64, grid []float64, runs []LinearEvalRun, regression bool) SelectedL2 {
	curves := make([][]metrics.Value, len(runs))
	for f, r := range runs {
		curves[f] = r.TestByL2
	}
	best, mean := selectOnFolds(curves, regression)
	for f := range runs {
		r := &runs[f]
		r.L2 = slices.Repeat([]float64{grid[best]}, len(r.testPerTaskByL2[best]))
		r.TestPerTask = toValues(r.testPerTaskByL2[best])
		if regression {
			r.TestRMSE, r.TestMAE = r.TestByL2[best], metrics.Value(r.testMAEByL2[best])
		} else {
			r.TestROCAUC = r.TestByL2[best]
		}
	}
	return SelectedL2{Seed: seed, L2: grid[best], FoldMean: metrics.Value(mean)}
}

// summarizeLinearRuns summarises the runs of one label fraction: test and
// valid ROC-AUC, and test per task.
func summarizeLinearRuns(runs []LinearEvalRun, fraction float64, tasks []string, regression bool) (test, valid metrics.Stat, perTask []TaskStat) {
	var tests, valids []float64
	var byTask [][]metrics.Value
	for _, r := range runs {
		if r.LabelFraction == fraction {
			v, t := r.figures(regression)
			tests, valids, byTask = append(tests, float64(t)), append(valids, float64(v)), append(byTask, r.TestPerTask)
		}
	}
	return metrics.StatOf(tests), metrics.StatOf(valids), perTaskStats(tasks, byTask)
}

// embedMolecules is the mean-pooled embedding (n×d, on dev, owned by the
// caller) of every molecule of ds by the encoder arch in evaluation mode,
// with the weights of state, or randomly initialised from seed without them;
// its products in precision p.
func embedMolecules(ds *data.Dataset, arch model.EncoderConfig, state []torch.Named, seed uint64, dev torch.Device, p model.Precision, workers int) (*torch.Tensor, error) {
	torch.ManualSeed(seed)
	store := nn.NewStore(dev, torch.Float32)
	defer store.Free()
	if err := p.Apply(store); err != nil {
		return nil, err
	}
	// At the store's root the tensors are named as in an exported encoder.
	enc := model.NewDeeperGCN(store.Root(), arch)
	defer enc.Free()
	if state != nil {
		if err := torch.LoadState(store.State(), state); err != nil {
			return nil, fmt.Errorf("encoder: %w", err)
		}
	}
	s := torch.NewScope()
	defer s.Close()
	chunks := make([]*torch.Tensor, 0, ds.NumGraphs()/evalBatchSize+1)
	err := forEachBatch(ds, ds.All(), workers, dev, func(b *feed.Batch, batch *torch.Scope) {
		g := b.Graph(dev)
		chunks = append(chunks, batch.Keep(ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)))
	})
	if err != nil {
		return nil, err
	}
	all := torch.Cat(chunks, 0)
	// A damaged encoder gives NaN or Inf, which no classifier can use.
	if bad := int(all.IsFinite().LogicalNot().ToDType(torch.Float32).SumDim(1, false).GtScalar(0).ToDType(torch.Float32).Sum().Item()); bad > 0 {
		return nil, fmt.Errorf("%w: %d of the %d molecules have NaN or infinite embeddings", errNonFiniteEmbedding, bad, ds.NumGraphs())
	}
	return all.Unscope(), nil
}

// errNonFiniteEmbedding marks an encoder whose output cannot be used.
var errNonFiniteEmbedding = errors.New("the encoder's weights give non-finite embeddings")

// FitLinear fits the logistic regressions of every task and grid value on
// split's train part and evaluates them (see LinearEvalConfig).
func FitLinear(cfg *LinearEvalConfig, ds *data.Dataset, split *data.Split, embeddings *torch.Tensor, seed uint64) (LinearEvalRun, error) {
	start := time.Now()
	run := LinearEvalRun{Seed: seed, Split: split.Name, Train: len(split.Train), Valid: len(split.Valid), Test: len(split.Test)}
	s := torch.NewScope()
	defer s.Close()
	dev := embeddings.Device()
	tasks, grid := ds.NumTasks(), len(cfg.L2Grid)
	rows := func(idx []int32) *torch.Tensor {
		i := make([]int64, len(idx))
		for k, g := range idx {
			i[k] = int64(g)
		}
		return embeddings.IndexSelect(0, torch.FromSlice(i).To(dev, false))
	}

	// Standardise on the train part's statistics; a constant feature stays 0.
	mean, std := linfit.Standardisation(rows(split.Train))
	standardise := func(x *torch.Tensor) *torch.Tensor { return x.Sub(mean).Div(std) }
	w, b, bce := linfit.FitLogistic(standardise(rows(split.Train)), splitLabels(ds, split.Train), linfit.Logistic{
		Tasks: tasks, Grid: cfg.L2Grid, Steps: cfg.Steps, LR: cfg.LR, Seed: seed})
	run.TrainLossByL2 = toValues(torch.ToSlice[float64](bce.MeanDim(1, false).ToDType(torch.Float64)))

	// Scores of every grid value on a part: G×len(idx)×T, row-major.
	scores := func(part []int32) []float32 {
		return torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](standardise(rows(part)).MatMul(w).Add(b)) })
	}
	var validScores []float32
	if len(split.Valid) > 0 {
		validScores = scores(split.Valid)
	}
	testScores := scores(split.Test)
	validLabels, testLabels := splitLabels(ds, split.Valid), splitLabels(ds, split.Test)
	for g := range grid {
		perTask, mean, err := metrics.ROCAUC(testLabels, testScores[g*len(testLabels):(g+1)*len(testLabels)], tasks)
		if err != nil {
			return run, fmt.Errorf("test, λ=%g: %w", cfg.L2Grid[g], err)
		}
		run.testPerTaskByL2 = append(run.testPerTaskByL2, perTask)
		run.TestByL2 = append(run.TestByL2, metrics.Value(mean))
	}
	if len(split.Valid) == 0 {
		// Cross-validation: the λ is chosen across folds (selectL2OnFolds).
		run.ValidROCAUC, run.TestROCAUC = metrics.Value(math.NaN()), metrics.Value(math.NaN())
		run.Seconds = time.Since(start).Seconds()
		return run, nil
	}
	perPart := len(validLabels)
	validByTask := make([][]float64, grid) // [g][t]
	for g := range grid {
		perTask, mean, err := metrics.ROCAUC(validLabels, validScores[g*perPart:(g+1)*perPart], tasks)
		if err != nil {
			return run, fmt.Errorf("valid, λ=%g: %w", cfg.L2Grid[g], err)
		}
		validByTask[g] = perTask
		run.ValidByL2 = append(run.ValidByL2, metrics.Value(mean))
	}

	chosen := linfit.BestPerTask(run.ValidByL2, validByTask, tasks)
	for _, g := range chosen {
		run.L2 = append(run.L2, cfg.L2Grid[g])
	}
	_, valid, err := metrics.ROCAUC(validLabels, linfit.PickScores(validScores, len(split.Valid), chosen), tasks)
	if err != nil {
		return run, fmt.Errorf("valid: %w", err)
	}
	testPerTask, test, err := metrics.ROCAUC(testLabels, linfit.PickScores(testScores, len(split.Test), chosen), tasks)
	if err != nil {
		return run, fmt.Errorf("test: %w", err)
	}
	run.ValidROCAUC, run.TestROCAUC, run.TestPerTask = metrics.Value(valid), metrics.Value(test), toValues(testPerTask)
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}
