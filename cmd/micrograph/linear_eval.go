package main

import (
	"errors"
	"fmt"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// errDropoutFrozen answers --dropout given to linear-eval.
var errDropoutFrozen = errors.New("--dropout: the frozen encoder runs in evaluation mode, without dropout")

func runLinearEval(args []string) error {
	cfg := evaluate.DefaultLinearEvalConfig()
	fs := newFlags("linear-eval", "--data DIR|CSV --out FILE [--encoder encoder.pt] [flags]",
		"Linear evaluation (\"feature extraction\", docs/method.md §7): embeds every molecule\n"+
			"with the frozen encoder (evaluation mode, mean pooling), fits one L2-regularised logistic\n"+
			"regression per task on the train part's standardised embeddings (full-batch Adam, every λ\n"+
			"of --l2-grid), keeps per task the λ with the best valid ROC-AUC, and reports its test ROC-AUC\n"+
			"(OGB's rules), mean ± std over seeds. --protocol cv10 is the paper's protocol instead: 10-fold\n"+
			"cross-validation over the whole dataset with no valid part, reporting the one λ whose test\n"+
			"ROC-AUC averaged over the folds is best; choosing on test makes that figure optimistic.\n"+
			"Without --encoder the encoder is random (a new one per seed) with the architecture flags\n"+
			"below: the baseline without pre-training.\n"+
			"With --label-fractions every run is repeated on shares of the train labels (the\n"+
			"label-scarce regime): nested subsets of the train part drawn from the run's seed, so that\n"+
			"every encoder evaluated with the same --seed fits on the same molecules.\n"+
			"Regression tasks (labels other than 0 and 1; see --task-types) get an exact ridge regression\n"+
			"per task and λ (mean squared error + λ·‖w‖², intercept free) instead, the λ with the lowest\n"+
			"valid RMSE, and report test RMSE and MAE (lower is better).\n"+
			"The runs (seeds, folds) are made side by side, one per core by default (--jobs), each\n"+
			"giving what it gives alone with the same --threads; on a GPU too, where the runs use\n"+
			"deterministic algorithms only (docs/commands.md#what-holds-on-each-device).")
	var ev evaluationFlags
	ev.register(fs, &cfg.Common, "a random encoder, the baseline", " (the classifiers' initialisation; a random encoder's too)", "λ")
	l2GridFlag(fs, &cfg.L2Grid, "l2-grid", "L2 strengths λ tried: each task minimises mean BCE + λ/2·‖w‖²")
	fs.Float64SliceVar(&cfg.LabelFractions, "label-fractions", nil,
		"shares of the train labels to fit on, each in (0, 1], e.g. 0.01,0.05,0.2,1; valid and test unchanged")
	fs.Lookup("label-fractions").DefValue = "all"
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "full-batch Adam steps per fit")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "Adam learning rate of the classifiers")
	ev.registerRuntime(fs, &cfg.Common)
	// The encoder runs in evaluation mode, where dropout does nothing.
	if err := fs.MarkHidden("dropout"); err != nil {
		return err
	}
	if err := parseFlags(fs, args, "data", "out"); err != nil {
		return err
	}
	if fs.Changed("dropout") {
		return usageError{errDropoutFrozen}
	}
	if err := ev.check(fs, &cfg.Common, &cfg); err != nil {
		return err
	}

	res, err := evaluate.LinearEval(cfg, ev.env)
	if err != nil {
		return flagError(fs, &cfg, err)
	}
	if err := atomicfile.WriteJSON(ev.out, res); err != nil {
		return err
	}
	selection := fmt.Sprintf("valid %.4f ± %.4f", res.Valid.Mean, res.Valid.Std)
	if res.Protocol.CrossValidated() {
		selection = optimisticSelection
	}
	var byFraction string
	for i, f := range res.ByFraction {
		sep := ","
		if i == 0 {
			sep = "; test by share of train labels:"
		}
		byFraction += fmt.Sprintf("%s %.4g %% %.4f ± %.4f", sep, 100*f.Fraction, f.Test.Mean, f.Test.Std)
	}
	figure := fmt.Sprintf("test ROC-AUC %.4f ± %.4f", res.Test.Mean, res.Test.Std)
	if res.TestMAE != nil {
		figure = fmt.Sprintf("test RMSE %.4f ± %.4f, MAE %.4f ± %.4f", res.Test.Mean, res.Test.Std, res.TestMAE.Mean, res.TestMAE.Std)
	}
	printf("linear-eval %s, %s, %s: %s over %d runs (%s)%s, %.1fs; result in %s",
		res.Dataset.Name, res.Protocol, encoderKind(res.Pretrained), figure, res.Test.N, selection, byFraction, res.Seconds, ev.out)
	return nil
}
