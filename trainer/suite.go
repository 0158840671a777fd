package trainer

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/micrograph/micrograph/internal/field"
)

// Benchmarks are method.md §7's seven downstream benchmarks, in the paper's
// column order.
var Benchmarks = []string{"bace", "bbbp", "clintox", "hiv", "sider", "tox21", "toxcast"}

// The evaluation protocols of method.md §7, as SuiteConfig.Protocols names them.
const (
	ProtocolFinetune = "finetune"
	ProtocolLinear   = "linear"
)

// paperRow is a row of the paper's Tables 1 and 2 as method.md §7 quotes
// it: ROC-AUC (%) per benchmark in Benchmarks order, and the average the
// paper states. A row the paper does not report has no figures.
type paperRow struct {
	figures []float64
	average float64
}

// paperFigures holds the paper's rows by protocol, pre-trained first.
var paperFigures = map[string][2]paperRow{
	ProtocolFinetune: {
		{[]float64{77.22, 84.38, 77.02, 75.07, 56.67, 77.04, 65.23}, 73.23},
		{[]float64{72.80, 82.13, 74.98, 73.38, 55.65, 76.10, 63.34}, 71.19},
	},
	// The paper reports no Non-Pretrain row for feature extraction.
	ProtocolLinear: {{[]float64{70.83, 82.97, 73.49, 73.34, 57.32, 71.82, 59.46}, 69.73}, {}},
}

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

// SuiteConfig is the paper's downstream evaluation: every protocol on every
// benchmark, with the pre-trained encoder and without pre-training (the same
// architecture, randomly initialised).
type SuiteConfig struct {
	EncoderPath string   `json:"encoder_path"`
	Datasets    []string `json:"datasets"`  // one OGB folder or CSV per benchmark
	Protocols   []string `json:"protocols"` // ProtocolFinetune and/or ProtocolLinear
	// The settings of each protocol; Data, EncoderPath, Encoder and Progress
	// are set for each evaluation.
	Finetune FinetuneConfig   `json:"finetune"`
	Linear   LinearEvalConfig `json:"linear"`

	Progress io.Writer `json:"-"` // the protocols' progress and one line per evaluation; nil is silent
}

// SuiteResult is every evaluation of a suite.
type SuiteResult struct {
	Config  SuiteConfig  `json:"config"`
	Entries []SuiteEntry `json:"entries"` // dataset by dataset, protocol by protocol, pre-trained first
	Seconds float64      `json:"seconds"`
}

// SuiteEntry is one protocol on one benchmark with one encoder: its summary
// and, in Finetune or Linear, the complete result.
type SuiteEntry struct {
	Benchmark  string            `json:"benchmark"`
	Protocol   string            `json:"protocol"`
	Pretrained bool              `json:"pretrained"`
	Test       Stat              `json:"test"`      // test ROC-AUC over runs
	RunTests   []Value           `json:"run_tests"` // each run's test ROC-AUC, in run order
	Finetune   *FinetuneResult   `json:"finetune,omitempty"`
	Linear     *LinearEvalResult `json:"linear,omitempty"`
}

// Validate reports the first setting that cannot work, naming its field. The
// protocols' own settings are checked as they will run.
func (c SuiteConfig) Validate() error {
	if c.EncoderPath == "" {
		return field.Errorf("encoder_path", c.EncoderPath, "must name an exported encoder")
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
	if len(c.Protocols) == 0 {
		return field.Errorf("protocols", "", "must name at least one protocol")
	}
	for i, p := range c.Protocols {
		if p != ProtocolFinetune && p != ProtocolLinear {
			return field.Errorf("protocols", p, "is unknown (want %s or %s)", ProtocolFinetune, ProtocolLinear)
		}
		if slices.Contains(c.Protocols[:i], p) {
			return field.Errorf("protocols", p, "is given twice")
		}
	}
	ft, lin := c.Finetune, c.Linear
	ft.Data, ft.EncoderPath = c.Datasets[0], c.EncoderPath
	lin.Data, lin.EncoderPath = c.Datasets[0], c.EncoderPath
	if slices.Contains(c.Protocols, ProtocolFinetune) {
		if err := ft.Validate(); err != nil {
			return field.Within("finetune", err)
		}
	}
	if slices.Contains(c.Protocols, ProtocolLinear) {
		if err := lin.Validate(); err != nil {
			return field.Within("linear", err)
		}
	}
	return nil
}

// Suite runs every protocol on every dataset, first with the pre-trained
// encoder, then without pre-training: the encoder file's architecture,
// randomly initialised (fine-tuned from scratch, or frozen for linear
// evaluation). Render the outcome with Markdown. When an evaluation fails,
// Suite returns the entries finished before it together with the error.
func Suite(cfg SuiteConfig) (*SuiteResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	info, state, err := LoadEncoder(cfg.EncoderPath)
	if err != nil {
		return nil, err
	}
	freeNamed(state) // each protocol loads the weights itself
	res := &SuiteResult{Config: cfg}
	// A later failure must not throw away hours of finished evaluations.
	partial := func(err error) (*SuiteResult, error) {
		res.Seconds = time.Since(start).Seconds()
		return res, err
	}
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path) // checked by Validate
		for _, protocol := range cfg.Protocols {
			for _, pretrained := range []bool{true, false} {
				encoder := ""
				if pretrained {
					encoder = cfg.EncoderPath
				}
				entry := SuiteEntry{Benchmark: benchmark, Protocol: protocol, Pretrained: pretrained}
				if protocol == ProtocolFinetune {
					c := cfg.Finetune
					c.Data, c.EncoderPath, c.Encoder, c.Progress = path, encoder, info.Encoder, cfg.Progress
					r, err := Finetune(c)
					if err != nil {
						return partial(fmt.Errorf("%s, fine-tuning %s: %w", benchmark, encoderLabel(pretrained), err))
					}
					entry.Finetune, entry.Test = r, r.Test
					for _, run := range r.Runs {
						entry.RunTests = append(entry.RunTests, run.TestAtBest)
					}
				} else {
					c := cfg.Linear
					c.Data, c.EncoderPath, c.Encoder, c.Progress = path, encoder, info.Encoder, cfg.Progress
					r, err := LinearEval(c)
					if err != nil {
						return partial(fmt.Errorf("%s, linear evaluation %s: %w", benchmark, encoderLabel(pretrained), err))
					}
					entry.Linear, entry.Test = r, r.Test
					for _, run := range r.Runs {
						entry.RunTests = append(entry.RunTests, run.TestROCAUC)
					}
				}
				if cfg.Progress != nil {
					fmt.Fprintf(cfg.Progress, "suite: %s %s %s: test ROC-AUC %s\n", protocol, benchmark, encoderLabel(pretrained), percent(entry.Test))
				}
				res.Entries = append(res.Entries, entry)
			}
		}
	}
	return partial(nil)
}

func encoderLabel(pretrained bool) string {
	if pretrained {
		return "with the pre-trained encoder"
	}
	return "without pre-training"
}

// percent writes a ROC-AUC summary as the paper does: "77.22 ± 2.02".
func percent(s Stat) string {
	if math.IsNaN(float64(s.Mean)) {
		return "—"
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*s.Mean, 100*s.Std)
}

// Markdown is the paper-style table of the suite (Tables 1 and 2 of the
// paper, method.md §7): for each protocol run, this encoder, no
// pre-training, and the paper's MICRO-Graph and Non-Pretrain rows; columns
// the seven benchmarks and their average; test ROC-AUC in %, mean ± std over
// runs. The Average of a measured row is the mean of its benchmarks' means,
// ± the std over runs of the per-run averages (when every benchmark has the
// same runs). When not all seven benchmarks ran, averages (the paper's
// included) cover only those that did and are starred.
func (r *SuiteResult) Markdown() string {
	var ran []string
	for _, b := range Benchmarks {
		if slices.ContainsFunc(r.Entries, func(e SuiteEntry) bool { return e.Benchmark == b }) {
			ran = append(ran, b)
		}
	}
	star := ""
	if len(ran) < len(Benchmarks) {
		star = "*"
	}
	var sb strings.Builder
	row := func(cells ...string) { sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	row(slices.Concat([]string{"Protocol", "Model"}, Benchmarks, []string{"Average"})...)
	row(slices.Concat([]string{":--", ":--"}, slices.Repeat([]string{"--:"}, len(Benchmarks)+1))...)

	runs := map[int]bool{}
	for _, protocol := range []string{ProtocolFinetune, ProtocolLinear} {
		if !slices.Contains(r.Config.Protocols, protocol) {
			continue
		}
		name := map[string]string{ProtocolFinetune: "Fine-tune", ProtocolLinear: "Feature extraction"}[protocol]
		for _, pretrained := range []bool{true, false} {
			label := map[bool]string{true: "micrograph pre-trained", false: "no pre-training"}[pretrained]
			cells := []string{name, label}
			var means []float64
			var perRun [][]Value
			for _, b := range Benchmarks {
				i := slices.IndexFunc(r.Entries, func(e SuiteEntry) bool {
					return e.Benchmark == b && e.Protocol == protocol && e.Pretrained == pretrained
				})
				if i < 0 {
					cells = append(cells, "—")
					continue
				}
				e := r.Entries[i]
				cells = append(cells, percent(e.Test))
				means = append(means, float64(e.Test.Mean))
				perRun = append(perRun, e.RunTests)
				runs[e.Test.N] = true
			}
			cells = append(cells, averageCell(means, perRun)+star)
			row(cells...)
		}
		for variant, label := range []string{"paper MICRO-Graph", "paper Non-Pretrain"} {
			paper := paperFigures[protocol][variant]
			cells := []string{name, label}
			var shown []float64
			for i, b := range Benchmarks {
				switch {
				case paper.figures == nil:
					cells = append(cells, "—")
				case slices.Contains(ran, b):
					cells = append(cells, fmt.Sprintf("%.2f", paper.figures[i]))
					shown = append(shown, paper.figures[i])
				default:
					cells = append(cells, fmt.Sprintf("(%.2f)", paper.figures[i]))
				}
			}
			switch {
			case paper.figures == nil:
				cells = append(cells, "—")
			case star == "":
				cells = append(cells, fmt.Sprintf("%.2f", paper.average))
			default:
				cells = append(cells, fmt.Sprintf("%.2f", meanOf(shown))+star)
			}
			row(cells...)
		}
	}

	sb.WriteString("\nTest ROC-AUC (%) of the model selected on valid (method.md §7), mean ± std")
	if len(runs) == 1 {
		for n := range runs {
			fmt.Fprintf(&sb, " over %d runs (seeds × folds)", n)
		}
	} else {
		sb.WriteString(" over each cell's runs (see suite.json)")
	}
	sb.WriteString(". No pre-training: the same architecture randomly initialised, fine-tuned from scratch or frozen.\n")
	sb.WriteString("Paper rows: the paper's Tables 1 and 2; it reports no Non-Pretrain feature extraction, and its stated feature-extraction average (69.73) is not the mean of its seven figures (69.89).\n")
	if star != "" {
		fmt.Fprintf(&sb, "\\* Average over the benchmarks run here (%s), the paper's rows included; paper figures in parentheses are for benchmarks not run.\n", strings.Join(ran, ", "))
	}
	return sb.String()
}

// averageCell is a measured row's Average: the mean of the benchmarks'
// means, ± the std over runs of the per-run averages when every benchmark
// has the same number of runs.
func averageCell(means []float64, perRun [][]Value) string {
	if len(means) == 0 {
		return "—"
	}
	m := meanOf(means)
	n := len(perRun[0])
	for _, runs := range perRun {
		if len(runs) != n {
			return fmt.Sprintf("%.2f", 100*m)
		}
	}
	averages := make([]float64, n)
	for r := range n {
		for _, runs := range perRun {
			averages[r] += float64(runs[r]) / float64(len(perRun))
		}
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*m, 100*float64(statOf(averages).Std))
}

// meanOf is the mean of xs.
func meanOf(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
