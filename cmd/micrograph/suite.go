package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

func runSuite(args []string) error {
	cfg := suite.Config{Finetune: evaluate.DefaultFinetuneConfig(), Linear: evaluate.DefaultLinearEvalConfig()}
	cfg.Evaluations = []string{suite.EvaluationFinetune, suite.EvaluationLinear}
	protocols := []string{string(evaluate.ProtocolScaffold), string(evaluate.ProtocolCV10)}
	ft, lin := &cfg.Finetune, &cfg.Linear
	var out string
	fs := newFlags("suite", "--encoder a.pt[,b.pt,…] --datasets PATH... --out DIR [flags]",
		"Runs the paper's downstream evaluation (docs/method.md §7) on the benchmarks given\n"+
			"("+strings.Join(suite.Benchmarks, ", ")+"; OGB folders such as ogbg_molbace or MoleculeNet\n"+
			"CSVs such as BBBP.csv, told apart by name): every evaluation under every protocol with each\n"+
			"pre-trained encoder and without pre-training (the same architecture randomly initialised).\n"+
			"Protocols: scaffold (OGB's split, epoch or λ chosen on valid) and cv10 (the paper's 10-fold\n"+
			"cross-validation, epoch or λ chosen on the test ROC-AUC averaged over the folds: optimistic).\n"+
			"Several encoders (pre-training runs with different seeds) let the comparison carry\n"+
			"pre-training's variance: encoder i runs seeds --seed+i·S … --seed+(i+1)·S−1 (S = --seeds),\n"+
			"and so do the random encoders it is paired with. For every benchmark, evaluation and\n"+
			"protocol the table gives Δ = pre-trained − random with a two-sided paired t-test (pairs:\n"+
			"the encoders when there are several, else the seeds, or seeds × folds), † when p < 0.05, and\n"+
			"the mean Δ over benchmarks with its 95 % interval. Prints the table in the paper's layout,\n"+
			"next to the paper's figures, and writes it to DIR/suite.md and every result to DIR/suite.json\n"+
			"(DIR is made if missing; its parent must exist). The settings of the finetune and linear-eval\n"+
			"commands apply; --seeds to both evaluations, the column flags to every CSV benchmark.\n"+
			"The runs of every evaluation (seeds, folds, encoders, both sides) are made side by side, one\n"+
			"per core by default (--jobs), each giving what it gives alone with the same --threads (on a GPU\n"+
			"too: the runs use deterministic algorithms only; docs/commands.md#what-holds-on-each-device), and each\n"+
			"is kept in DIR/runs as it finishes: the same command started again, after a stop or with more\n"+
			"--seeds, makes only the runs DIR/runs lacks and ends with the table an uninterrupted call gives\n"+
			"(a run is kept under everything it depends on: the data's and the encoder's content, the\n"+
			"settings, seed and split; remove DIR/runs to make them all again).")
	fs.StringSliceVar(&cfg.EncoderPaths, "encoder", nil, "pre-trained encoders, comma-separated, one per pre-training run: shipped models' names ("+defaultModel+")\nor .pt files from micrograph export with their .json")
	fs.StringSliceVar(&cfg.Datasets, "datasets", nil, "benchmark datasets: paths after the flag, comma-separated, or the flag repeated")
	columnFlags(fs, &ft.Columns)
	fs.StringVar(&out, "out", "", "folder for suite.md and suite.json, written once everything is done, and runs/, a file per\n"+
		"finished run, written as each finishes")
	fs.StringVar(&cfg.RandomFrom, "random-from", "", "an earlier suite's --out folder (or suite.json) whose runs without pre-training are\n"+
		"taken instead of made again; its datasets (paths and content), settings, seeds and architecture must be these,\n"+
		"but for fine-tuning's recipe (--lr and the recipe flags below), which may differ: the table then says which\n"+
		"each side used")
	fs.StringSliceVar(&cfg.Evaluations, "evaluations", cfg.Evaluations, "evaluations to run: finetune, linear (feature extraction)")
	fs.StringSliceVar(&protocols, "protocols", protocols, "protocols to run: scaffold, cv10 (cvK: K folds)")
	fs.IntVar(&ft.Seeds, "seeds", ft.Seeds, "runs per encoder, split and evaluation, seeded --seed, --seed+1, …")
	fs.IntVar(&ft.Epochs, "epochs", ft.Epochs, "fine-tuning epochs per run")
	fs.IntVar(&ft.BatchSize, "batch-size", ft.BatchSize, "fine-tuning batch size")
	recipeFlags(fs, &ft.Recipe)
	fs.Float64Var(&ft.Dropout, "dropout", ft.Dropout, "encoder dropout while fine-tuning")
	l2GridFlag(fs, &lin.L2Grid, "l2-grid", "linear evaluation's L2 strengths λ (mean BCE + λ/2·‖w‖² per task)")
	fs.IntVar(&lin.Steps, "linear-steps", lin.Steps, "linear evaluation's full-batch Adam steps per fit")
	fs.Float64Var(&lin.LR, "linear-lr", lin.LR, "linear evaluation's Adam learning rate")
	precisionFlag(fs, &ft.Precision)
	seedFlag(fs, &ft.Seed)
	var rt runtimeFlags
	rt.register(fs, true)
	var jobs int
	jobsFlag(fs, &jobs)
	if err := parseFlags(fs, expandDatasets(args), "encoder", "datasets", "out"); err != nil {
		return err
	}
	for _, path := range cfg.EncoderPaths {
		if _, _, err := modelRef("--encoder", path, false); err != nil {
			return err
		}
	}
	for _, p := range protocols {
		cfg.Protocols = append(cfg.Protocols, evaluate.Protocol(p))
	}
	lin.Seeds = ft.Seeds
	lin.Precision, lin.Seed, lin.Columns = ft.Precision, ft.Seed, ft.Columns
	env, err := rt.parse(fs, nil)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagError(fs, &cfg, err)
	}
	if err := checkResultFolder("--out", out); err != nil {
		return err
	}
	if env, err = withJobs(fs, jobs, cfg.Runs(), env); err != nil {
		return err
	}
	if err := checkSuiteOutputs(out, &cfg, &rt); err != nil {
		return err
	}
	if err := suite.CheckSameSuite(out, cfg); err != nil {
		return flagError(fs, &cfg, err)
	}
	unlock, err := suite.LockFolder(out)
	if err != nil {
		return fmt.Errorf("--out %w", err)
	}
	defer unlock()
	res, runErr := suite.Run(cfg, env, suite.Options{RunFiles: filepath.Join(out, suite.RunsFolder)})
	if res == nil {
		return flagError(fs, &cfg, runErr)
	}
	// The table goes to stdout first, so that a failed write loses nothing.
	table := res.Markdown()
	fmt.Fprint(stdout, table)
	// After a failure, the evaluations finished before it, as partial.
	md, js, err := res.Save(out, table, runErr != nil)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return fmt.Errorf("%w (the %d evaluations finished before it are in %s)", runErr, len(res.Entries), js)
	}
	printf("suite: %d evaluations in %.1fs; table in %s, results in %s", len(res.Entries), res.Seconds, md, js)
	return nil
}

// checkResultFolder makes sure, before hours of work, that the folder dir
// exists and takes new files, or can be made in a folder that does.
func checkResultFolder(flag, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return usageError{fmt.Errorf("%s %s is a file; want a folder", flag, dir)}
	case err == nil:
		return checkWritableFolder(flag, dir, dir)
	}
	return checkWritableFolder(flag, dir, filepath.Dir(dir))
}

// checkSuiteOutputs refuses an --out folder or --cache at which suite would
// write over one of its inputs (the encoders, the benchmarks, the earlier
// suite of --random-from) or a run's own files.
func checkSuiteOutputs(out string, cfg *suite.Config, rt *runtimeFlags) error {
	var inputs []input
	for _, e := range cfg.EncoderPaths {
		in, err := optionalEncoder(e)
		if err != nil {
			return err
		}
		inputs = append(inputs, in...)
	}
	for _, d := range cfg.Datasets {
		inputs = append(inputs, input{"--datasets", d, true})
	}
	if cfg.RandomFrom != "" {
		inputs = append(inputs, input{"--random-from", suite.ResultFile(cfg.RandomFrom), false})
	}
	if err := checkOutputFolder("--out", out, inputs...); err != nil {
		return err
	}
	for _, name := range suite.OutputFiles {
		if err := checkPlace("--out "+out+": its "+name, filepath.Join(out, name), inputs); err != nil {
			return err
		}
	}
	return rt.checkCache(inputs...)
}

// expandDatasets lets --datasets take several paths in a row, as a shell
// glob gives them: "--datasets a b --out d" becomes
// "--datasets a --datasets b --out d".
func expandDatasets(args []string) []string {
	var out []string
	inList := false // the tokens so far are --datasets and its paths
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--datasets" && i+1 < len(args):
			out = append(out, a, args[i+1])
			i++
			inList = true
		case strings.HasPrefix(a, "--datasets="):
			out = append(out, a)
			inList = true
		case inList && !strings.HasPrefix(a, "-"):
			out = append(out, "--datasets", a)
		default:
			out = append(out, a)
			inList = false
		}
	}
	return out
}
