package suite

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// Benchmarks are docs/method.md §7's seven downstream benchmarks, in the paper's
// column order.
var Benchmarks = []string{"bace", "bbbp", "clintox", "hiv", "sider", "tox21", "toxcast"}

// BenchmarkOf is the benchmark a dataset holds, told by its folder or file
// name: OGB's folder (ogbg_molbace, ogbg-molbbbp) or MoleculeNet's CSV
// (bace.csv, BBBP.csv, HIV.csv.gz), case ignored.
func BenchmarkOf(path string) (string, error) {
	name := strings.ToLower(filepath.Base(path))
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".csv")
	for _, prefix := range []string{"ogbg_mol", "ogbg-mol"} {
		name = strings.TrimPrefix(name, prefix)
	}
	if !slices.Contains(Benchmarks, name) {
		return "", fmt.Errorf("cannot tell which benchmark %s is: name it after one of %s (as OGB's ogbg_molNAME folder or NAME.csv)",
			path, strings.Join(Benchmarks, ", "))
	}
	return name, nil
}

// The evaluations of docs/method.md §7, as Config.Evaluations names them.
const (
	EvaluationFinetune = "finetune"
	EvaluationLinear   = "linear"
)

// evaluationKind describes one of the suite's evaluations, once: its name
// (Config.Evaluations, Entry.Evaluation), its heading in tables,
// the paper's figures, and its settings in a Config. Everything the
// suite does per evaluation goes through evaluationKinds.
type evaluationKind struct {
	name    string
	heading string
	// The paper's rows: MICRO-Graph pre-trained, and Non-Pretrain.
	paperPretrained, paperRandom paperRow
	of                           func(Config) evaluate.Evaluation
	// shared are the settings that the runs without pre-training taken
	// from an earlier suite (Config.RandomFrom) must share with this one's:
	// all but fine-tuning's recipe, which each side may choose for itself.
	shared func(Config) any
}

// evaluationKinds are the evaluations of docs/method.md §7, in the order the
// suite's tables list them.
var evaluationKinds = []evaluationKind{
	{
		name: EvaluationFinetune, heading: "Fine-tune",
		paperPretrained: paperRow{
			rocAUC: map[string]float64{
				"bace": 77.22, "bbbp": 84.38, "clintox": 77.02, "hiv": 75.07, "sider": 56.67, "tox21": 77.04, "toxcast": 65.23,
			},
			average: 73.23,
		},
		paperRandom: paperRow{
			rocAUC: map[string]float64{
				"bace": 72.80, "bbbp": 82.13, "clintox": 74.98, "hiv": 73.38, "sider": 55.65, "tox21": 76.10, "toxcast": 63.34,
			},
			average: 71.19,
		},
		of:     func(c Config) evaluate.Evaluation { return c.Finetune },
		shared: func(c Config) any { return c.Finetune.WithoutRecipe() },
	},
	{
		name: EvaluationLinear, heading: "Feature extraction",
		paperPretrained: paperRow{
			rocAUC: map[string]float64{
				"bace": 70.83, "bbbp": 82.97, "clintox": 73.49, "hiv": 73.34, "sider": 57.32, "tox21": 71.82, "toxcast": 59.46,
			},
			average: 69.73,
		},
		// The paper reports no Non-Pretrain row for feature extraction.
		of:     func(c Config) evaluate.Evaluation { return c.Linear },
		shared: func(c Config) any { return c.Linear },
	},
}

// kindOf is the evaluation named name; ok is false for none.
func kindOf(name string) (k evaluationKind, ok bool) {
	i := slices.IndexFunc(evaluationKinds, func(k evaluationKind) bool { return k.name == name })
	if i < 0 {
		return evaluationKind{}, false
	}
	return evaluationKinds[i], true
}

// headingOf is the heading of the evaluation named name in tables.
func headingOf(name string) string {
	k, _ := kindOf(name)
	return k.heading
}

// paperRow is a row of the paper's Tables 1 and 2 as docs/method.md §7 quotes
// it: ROC-AUC (%) by benchmark, and the average the paper states. A row the
// paper does not report has no figures (rocAUC nil).
type paperRow struct {
	rocAUC  map[string]float64
	average float64
}

// Config is the paper's downstream evaluation: every evaluation under
// every protocol on every benchmark, with each pre-trained encoder and
// without pre-training (the same architecture, randomly initialised).
//
// Several encoders (pre-training runs with different seeds) make the
// comparison carry pre-training's own variance. Encoder i is
// evaluated with the seeds Seed + i·Seeds … Seed + (i+1)·Seeds − 1 of its
// evaluation's settings, and so is the i-th random replicate: the random
// side has as many independent initialisations as the pre-trained side has
// (encoder, seed) runs, and each pre-trained run is paired with the random
// run of the same seed (same folds, same classifier initialisation).
type Config struct {
	EncoderPaths []string            `json:"encoder_paths"` // one or more exported encoders of the same architecture
	Datasets     []string            `json:"datasets"`      // one OGB folder or CSV per benchmark
	Evaluations  []string            `json:"evaluations"`   // EvaluationFinetune and/or EvaluationLinear
	Protocols    []evaluate.Protocol `json:"protocols"`     // evaluate.ProtocolScaffold and/or evaluate.ProtocolCV10 (any "cvK")
	// The settings of each evaluation; Data, EncoderPath, Encoder, evaluate.Protocol
	// and Seed are set for each run.
	Finetune evaluate.FinetuneConfig   `json:"finetune"`
	Linear   evaluate.LinearEvalConfig `json:"linear"`
	// RandomFrom names an earlier suite's suite.json whose runs without
	// pre-training are taken instead of made again: the random side depends
	// only on the architecture, the benchmarks, the protocols and the
	// evaluations' settings and seeds, so suites of several pre-training
	// methods with those in common share it. Every one of those must match,
	// but for fine-tuning's recipe (evaluate.FinetuneConfig.WithoutRecipe):
	// each side may be fine-tuned with its own, which the result records
	// (Result.RandomFinetune); a run the earlier suite lacks is made.
	RandomFrom string `json:"random_from,omitempty"`
}

// Validate reports the first setting that cannot work, naming its field. The
// evaluations' own settings are checked as they will run.
func (c Config) Validate() error {
	if err := checkNames("encoder_paths", c.EncoderPaths, func(p string) bool { return p != "" }, "must name an exported encoder"); err != nil {
		return err
	}
	if len(c.Datasets) == 0 {
		return field.Errorf("datasets", "", "must name at least one benchmark")
	}
	seen := map[string]string{}
	for _, path := range c.Datasets {
		b, err := BenchmarkOf(path)
		if err != nil {
			return field.Errorf("datasets", path, "%v", err)
		}
		if other, dup := seen[b]; dup {
			return field.Errorf("datasets", path, "and %s are both %s", other, b)
		}
		seen[b] = path
	}
	var names []string
	for _, k := range evaluationKinds {
		names = append(names, k.name)
	}
	isEvaluation := func(e string) bool { _, ok := kindOf(e); return ok }
	want := "must be " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if err := checkNames("evaluations", c.Evaluations, isEvaluation, want); err != nil {
		return err
	}
	isProtocol := func(p evaluate.Protocol) bool { return p.Validate() == nil }
	if err := checkNames("protocols", c.Protocols, isProtocol, evaluate.ProtocolWant); err != nil {
		return err
	}
	// A setting may depend on the protocol (patience needs a valid part):
	// each evaluation is checked under every protocol the suite runs it
	// with, as the command of that evaluation alone would check it.
	for _, name := range c.Evaluations {
		k, _ := kindOf(name)
		ev := k.of(c)
		for _, p := range c.Protocols {
			common := ev.Settings()
			common.Data, common.EncoderPath, common.Protocol = c.Datasets[0], c.EncoderPaths[0], p
			if err := ev.Check(common); err != nil {
				if len(c.Protocols) > 1 {
					err = field.Note(err, fmt.Sprintf("the suite runs %s under protocol %s", name, p))
				}
				return field.Within(name, err)
			}
		}
	}
	return nil
}

// Runs is how many runs the suite makes, without those RandomFrom may
// give: every evaluation's (evaluate.Common.Runs) under every protocol on
// every benchmark, with each encoder and without pre-training.
func (c Config) Runs() int {
	n := 0
	for _, name := range c.Evaluations {
		k, ok := kindOf(name)
		if !ok {
			continue
		}
		for _, p := range c.Protocols {
			common := k.of(c).Settings()
			common.Protocol = p
			n += common.Runs()
		}
	}
	return n * len(c.Datasets) * len(c.EncoderPaths) * 2
}

// checkNames checks the list field name: not empty, each entry valid
// (else the error says what it must be, as want does), none twice.
func checkNames[T ~string](name string, entries []T, valid func(T) bool, want string) error {
	if len(entries) == 0 {
		return field.Errorf(name, "", "must not be empty")
	}
	for i, e := range entries {
		if !valid(e) {
			return field.Errorf(name, string(e), "%s", want)
		}
		if slices.Contains(entries[:i], e) {
			return field.Errorf(name, string(e), "is given twice")
		}
	}
	return nil
}
