package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/spf13/pflag"
)

func runFinetune(args []string) error {
	cfg := evaluate.DefaultFinetuneConfig()
	cfg.Encoder.Dropout = cfg.Dropout // --dropout is the fine-tuning dropout
	fs := newFlags("finetune", "--data DIR|CSV --out FILE [--encoder encoder.pt] [flags]",
		"Fine-tunes an encoder with a graph-property head on a labelled dataset (docs/method.md §7):\n"+
			"BCE with logits on the labelled entries, Adam; after every epoch ROC-AUC (OGB's rules) on the\n"+
			"valid and test parts; reports the test ROC-AUC at the epoch of best valid ROC-AUC, mean ± std\n"+
			"over seeds. --protocol cv10 is the paper's protocol instead: 10-fold cross-validation over the\n"+
			"whole dataset with no valid part, reporting the epoch whose test ROC-AUC averaged over the folds\n"+
			"is best; choosing on test makes that figure optimistic. Without --encoder the encoder is randomly initialised\n"+
			"(the Non-Pretrain baseline) with the architecture flags below; with it, the architecture\n"+
			"is the encoder's. Writes every epoch's figures, per task, to --out (JSON).\n"+
			"Regression tasks (labels other than 0 and 1; see --task-types) train on the MSE of labels\n"+
			"standardised with the train part's mean and std, and RMSE (lower is better) selects and is\n"+
			"reported, with MAE. --save DIR keeps every seed's selected model, an ensemble, for micrograph predict.\n"+
			"The recipe flags (--encoder-lr, --linear-probe-start, --freeze-epochs, --weight-decay,\n"+
			"--warmup-epochs, --average-with-start, --patience) are the field's ways of keeping pre-trained\n"+
			"features through fine-tuning (docs/method.md §7.3); their defaults are the paper's recipe,\n"+
			"which is the one to use with the shipped model: in a study of all four on bace, bbbp, clintox\n"+
			"and sider it did best on valid, and over ten seeds it is +0.81 points ahead of training from\n"+
			"scratch, no gain measured (95 % interval [-0.54, +2.16]; docs/finetune-study.md).\n"+
			"The runs (seeds, folds) are made side by side, one per core by default (--jobs), each\n"+
			"giving what it gives alone with the same --threads; on a GPU too, where the runs use\n"+
			"deterministic algorithms only (docs/commands.md#what-holds-on-each-device).")
	var ev evaluationFlags
	ev.register(fs, &cfg.Common, "random initialisation", "", "epoch")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs per run")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "molecules per training batch")
	recipeFlags(fs, &cfg.Recipe)
	fs.StringVar(&cfg.Save, "save", "", "new folder for the selected models, an ensemble: DIR/ensemble.json lists the members, best\n"+
		"valid first; DIR/seed-N holds seed N's model at its best valid epoch (model.pt: encoder.* and head.*\n"+
		"with PyTorch names; model.json: architecture, tasks, label standardisation, data, figures),\n"+
		"usable alone; needs --protocol scaffold")
	fs.IntVar(&cfg.SaveTop, "save-top", 0, "with --save, keep only the K seeds with the best valid figures (0: every seed)")
	ev.registerRuntime(fs, &cfg.Common)
	if err := parseFlags(fs, args, "data", "out"); err != nil {
		return err
	}
	cfg.Dropout = cfg.Encoder.Dropout
	if err := ev.check(fs, &cfg.Common, &cfg); err != nil {
		return err
	}
	if cfg.Save != "" {
		if _, err := os.Stat(cfg.Save); err == nil {
			return usageError{fmt.Errorf("--save %s already exists", cfg.Save)}
		}
		inputs, err := optionalEncoder(cfg.EncoderPath)
		if err != nil {
			return err
		}
		if err := checkOutputFolder("--save", cfg.Save, append(inputs, input{"--data", cfg.Data, true}, input{"--out", ev.out, false})...); err != nil {
			return err
		}
		if err := checkWritableFolder("--save", cfg.Save, filepath.Dir(filepath.Clean(cfg.Save))); err != nil {
			return err
		}
	}

	res, err := evaluate.Finetune(cfg, ev.env)
	if err != nil {
		return flagError(fs, &cfg, err)
	}
	if err := atomicfile.WriteJSON(ev.out, res); err != nil {
		return err
	}
	selection := fmt.Sprintf("best valid %.4f ± %.4f", res.Valid.Mean, res.Valid.Std)
	if res.Protocol.CrossValidated() {
		selection = optimisticSelection
	}
	figure := fmt.Sprintf("test ROC-AUC %.4f ± %.4f", res.Test.Mean, res.Test.Std)
	if res.TestMAE != nil {
		figure = fmt.Sprintf("test RMSE %.4f ± %.4f, MAE %.4f ± %.4f", res.Test.Mean, res.Test.Std, res.TestMAE.Mean, res.TestMAE.Std)
	}
	printf("finetune %s, %s, %s: %s over %d runs (%s), %.1fs; result in %s",
		res.Dataset.Name, res.Protocol, encoderKind(res.Pretrained), figure, res.Test.N, selection, res.Seconds, ev.out)
	if s := res.Saved; s != nil {
		best := s.Members[0]
		printf("saved %d models (%s) in %s; the best, seed %d at epoch %d: valid %.4f, test %.4f",
			len(s.Members), s.Selection, s.Dir, best.Seed, best.Epoch, best.Valid, best.Test)
	}
	return nil
}

// The shared helpers of finetune, linear-eval and suite follow.

// recipeFlags registers the fine-tuning recipe's flags (finetune and suite).
func recipeFlags(fs *pflag.FlagSet, r *evaluate.Recipe) {
	fs.Float64Var(&r.LR, "lr", r.LR, "Adam learning rate: the head's, and the encoder's unless --encoder-lr")
	fs.Float64Var(&r.EncoderLR, "encoder-lr", r.EncoderLR, "the encoder's own Adam learning rate (0: --lr), e.g. 1e-4 with --lr 1e-3 (MolCLR, GROVER)")
	fs.BoolVar(&r.LinearProbeStart, "linear-probe-start", r.LinearProbeStart, "start the head from a linear probe fitted on the frozen encoder, then fine-tune\n"+
		"everything (LP-FT, Kumar et al. 2022); the probe's λ per task is chosen on valid")
	fs.IntVar(&r.FreezeEpochs, "freeze-epochs", r.FreezeEpochs, "train only the head for the first N epochs (the encoder in evaluation mode, not updated)")
	fs.Float64Var(&r.WeightDecay, "weight-decay", r.WeightDecay, "AdamW's decoupled weight decay on every parameter (0: Adam)")
	fs.IntVar(&r.WarmupEpochs, "warmup-epochs", r.WarmupEpochs, "raise the learning rates linearly over the first N epochs' steps")
	fs.Float64Var(&r.AverageWithStart, "average-with-start", r.AverageWithStart, "evaluate, select and save w·starting weights + (1−w)·fine-tuned ones\n"+
		"(WiSE-FT with α = 1−w; 0: off)")
	fs.IntVar(&r.Patience, "patience", r.Patience, "stop a run after N epochs without a better valid figure (0: never; needs --protocol scaffold)")
}

// evaluationFlags are the flags finetune and linear-eval share: the settings
// of evaluate.Common, the encoder's architecture and the run's place, the
// result file and the dataset cache.
type evaluationFlags struct {
	out, taskTypes string
	jobs           int
	rt             runtimeFlags
	env            runenv.Env // parsed by check
}

// register adds the shared flags that say what is measured; none says what runs without
// --encoder, seedsAlso what else the seeds fix, selected what the protocol
// chooses (epoch or λ).
func (e *evaluationFlags) register(fs *pflag.FlagSet, c *evaluate.Common, none, seedsAlso, selected string) {
	fs.StringVar(&c.Data, "data", "", "OGB dataset folder, or CSV file of SMILES and labels (featurised once and cached; scaffold split)")
	columnFlags(fs, &c.Columns)
	fs.StringVar(&c.EncoderPath, "encoder", "", encoderHelp+"; none: "+none)
	fs.StringVar(&e.out, "out", "", "result file (JSON), written atomically once every run is done; its folder must exist")
	fs.IntVar(&c.Seeds, "seeds", c.Seeds, "runs per split, seeded --seed, --seed+1, …"+seedsAlso)
	fs.StringVar(&e.taskTypes, "task-types", "", "NAME=TYPE,…: the type (classification or regression) of the tasks named, instead of\n"+
		"the one their labels imply (classification when every label is 0, 1 or missing, else regression)")
	fs.StringVar((*string)(&c.Protocol), "protocol", string(c.Protocol), "scaffold: OGB's scaffold split, "+selected+" chosen on valid; cv10: the paper's 10-fold cross-validation over the whole dataset (folds drawn per seed), reporting the "+selected+" with the best test ROC-AUC averaged over the folds, which is optimistic (cvK: K folds)")
}

// registerRuntime adds, after the command's own flags, the shared flags of
// the encoder's architecture, the place of the run and the dataset cache.
func (e *evaluationFlags) registerRuntime(fs *pflag.FlagSet, c *evaluate.Common) {
	encoderFlags(fs, &c.Encoder)
	precisionFlag(fs, &c.Precision)
	seedFlag(fs, &c.Seed)
	e.rt.register(fs, true)
	jobsFlag(fs, &e.jobs)
}

// check refuses, after parsing, what cannot run (cfg is the whole
// configuration, validated and named in errors by flag), completes c and
// parses the runtime flags into e.env.
func (e *evaluationFlags) check(fs *pflag.FlagSet, c *evaluate.Common, cfg interface{ Validate() error }) error {
	inputs, err := optionalEncoder(c.EncoderPath)
	if err != nil {
		return err
	}
	if err := checkNotCorpus("--data", c.Data); err != nil {
		return err
	}
	if err := rejectArchitectureFlags(fs, c.EncoderPath); err != nil {
		return err
	}
	types, err := data.ParseTaskTypes(e.taskTypes)
	if err != nil {
		return usageError{fmt.Errorf("--task-types %q: %v", e.taskTypes, err)}
	}
	c.TaskTypes = types
	if err := cfg.Validate(); err != nil {
		return flagError(fs, cfg, err)
	}
	if e.env, err = e.rt.parse(fs, nil); err != nil {
		return err
	}
	if e.env, err = withJobs(fs, e.jobs, c.Runs(), e.env); err != nil {
		return err
	}
	inputs = append(inputs, input{"--data", c.Data, true})
	if err := checkOutput("--out", e.out, inputs...); err != nil {
		return err
	}
	return e.rt.checkCache(inputs...)
}

// architectureFlags are encoderFlags' flags that shape the encoder, which
// an encoder file fixes.
var architectureFlags = []string{"hidden", "layers", "mlp-layers", "learn-t", "t", "bond-per-layer"}

// rejectArchitectureFlags is a usage error when an architecture flag is given
// together with an encoder file, whose description decides the architecture.
func rejectArchitectureFlags(fs *pflag.FlagSet, encoderPath string) error {
	if encoderPath == "" {
		return nil
	}
	for _, name := range architectureFlags {
		if fs.Changed(name) {
			return usageError{fmt.Errorf("--%s: the architecture comes from --encoder %s, not from flags", name, encoderPath)}
		}
	}
	return nil
}

// checkWritableFolder makes sure that dir (where flag's value path goes)
// exists and takes new files, leaving nothing behind.
func checkWritableFolder(flag, path, dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError{fmt.Errorf("%s %s: folder %s does not exist", flag, path, dir)}
	}
	probe, err := os.CreateTemp(dir, ".micrograph-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: folder %s does not take new files: %w", flag, path, dir, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// l2GridFlag registers linear evaluation's λ grid, its default written as
// %g values rather than pflag's fixed-point ones.
func l2GridFlag(fs *pflag.FlagSet, grid *[]float64, name, usage string) {
	fs.Float64SliceVar(grid, name, *grid, usage)
	shown := make([]string, len(*grid))
	for i, l := range *grid {
		shown[i] = strconv.FormatFloat(l, 'g', -1, 64)
	}
	fs.Lookup(name).DefValue = "[" + strings.Join(shown, ",") + "]"
}

// optimisticSelection says in a summary how cross-validation chose.
const optimisticSelection = "chosen on the fold-averaged test ROC-AUC: optimistic"

// encoderKind says in a summary which encoder a result used.
func encoderKind(pretrained bool) string {
	if pretrained {
		return "pre-trained encoder"
	}
	return "random encoder (no pre-training)"
}
