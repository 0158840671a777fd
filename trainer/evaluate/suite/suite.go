package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// Benchmarks are docs/method.md §7's seven downstream benchmarks, in the paper's
// column order.
var Benchmarks = []string{"bace", "bbbp", "clintox", "hiv", "sider", "tox21", "toxcast"}

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
	paper   [2]paperRow // pre-trained, then without pre-training
	of      func(Config) evaluate.Evaluation
}

// evaluationKinds are the evaluations of docs/method.md §7, in the order the
// suite's tables list them.
var evaluationKinds = []evaluationKind{
	{EvaluationFinetune, "Fine-tune", [2]paperRow{
		{[]float64{77.22, 84.38, 77.02, 75.07, 56.67, 77.04, 65.23}, 73.23},
		{[]float64{72.80, 82.13, 74.98, 73.38, 55.65, 76.10, 63.34}, 71.19},
	}, func(c Config) evaluate.Evaluation { return c.Finetune }},
	// The paper reports no Non-Pretrain row for feature extraction.
	{EvaluationLinear, "Feature extraction", [2]paperRow{{[]float64{70.83, 82.97, 73.49, 73.34, 57.32, 71.82, 59.46}, 69.73}, {}},
		func(c Config) evaluate.Evaluation { return c.Linear }},
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
// it: ROC-AUC (%) per benchmark in Benchmarks order, and the average the
// paper states. A row the paper does not report has no figures.
type paperRow struct {
	figures []float64
	average float64
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

// Config is the paper's downstream evaluation: every evaluation under
// every protocol on every benchmark, with each pre-trained encoder and
// without pre-training (the same architecture, randomly initialised).
//
// Several encoders (pre-training runs with different seeds) make the
// comparison carry pre-training's own variance (issue 12). Encoder i is
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
	// methods with those in common share it. Every one of those must match;
	// a run the earlier suite lacks is made.
	RandomFrom string `json:"random_from,omitempty"`
}

// Result is every evaluation of a suite, and the gains of pre-training.
type Result struct {
	Config Config `json:"config"`
	// DataKeys is each benchmark's data.ContentKey when the suite ran, for
	// a later --random-from to tell whether the data is still the same;
	// absent in suites from before 2026-11-26.
	DataKeys map[string]string `json:"data_keys,omitempty"`
	Entries  []Entry           `json:"entries"` // dataset, evaluation, protocol, replicate; pre-trained first
	Gains    []Gain            `json:"gains"`   // per benchmark, evaluation and protocol
	Average  []Gain            `json:"average"` // per evaluation and protocol, over the benchmarks (Benchmark "average")
	Seconds  float64           `json:"seconds"`
}

// Entry is one evaluation under one protocol on one benchmark with one
// encoder.
type Entry struct {
	Benchmark  string            `json:"benchmark"`
	Evaluation string            `json:"evaluation"`
	Protocol   evaluate.Protocol `json:"protocol"`
	Pretrained bool              `json:"pretrained"`
	// Replicate i is encoder i, or the random encoders drawn from its seeds.
	Replicate int `json:"replicate"`
	evaluate.Outcome
}

// Gain is Δ = pre-trained − random, in ROC-AUC, on one benchmark under one
// evaluation and protocol, with a two-sided paired t-test of Δ = 0 (or, for
// the average over benchmarks, the same over the per-pair averages). Pairs
// are the replicates (one per encoder, each the mean of its runs) when the
// suite had several encoders; with one encoder they are its runs, paired by
// seed (scaffold) or by seed and fold (cross-validation), which carry the
// evaluation's variance but not pre-training's.
type Gain struct {
	Benchmark   string              `json:"benchmark"`
	Evaluation  string              `json:"evaluation"`
	Protocol    evaluate.Protocol   `json:"protocol"`
	PairedBy    string              `json:"paired_by"` // "encoder", "seed" or "seed×fold"
	Delta       metrics.Value       `json:"delta"`     // mean Δ over pairs
	Deltas      []metrics.Value     `json:"deltas"`    // Δ of each pair
	Test        *metrics.PairedTest `json:"test"`      // nil with fewer than two pairs
	Significant bool                `json:"significant"`
}

// SignificanceLevel is the two-sided p-value under which a Δ is marked
// significant.
const SignificanceLevel = 0.05

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
	for _, name := range c.Evaluations {
		k, _ := kindOf(name)
		ev := k.of(c)
		first := ev.Settings()
		first.Data, first.EncoderPath, first.Protocol = c.Datasets[0], c.EncoderPaths[0], c.Protocols[0]
		if err := ev.Check(first); err != nil {
			return field.Within(name, err)
		}
	}
	return nil
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

// Run runs every evaluation under every protocol on every dataset, for
// each encoder i first with encoder i, then without pre-training: the
// encoders' architecture, randomly initialised (fine-tuned from scratch, or
// frozen for linear evaluation), with the same seeds (see Config).
// Render the outcome with Markdown. When an evaluation fails, Suite returns
// the entries finished before it, and their gains, together with the error.
// Every evaluation runs where env says; env.Progress also gets one line per
// evaluation.
func Run(cfg Config, env runenv.Env) (*Result, error) {
	return runenv.Run(env, cfg.Validate, func() (*Result, error) { return runSuite(cfg, env) })
}

// runSuite is Run after runenv's prologue.
func runSuite(cfg Config, env runenv.Env) (*Result, error) {
	start := time.Now()
	var arch model.EncoderConfig
	for i, path := range cfg.EncoderPaths {
		a, err := encoderArch(path)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			arch = a
		} else if a != arch {
			return nil, field.Errorf("encoder_paths", path, "has architecture %+v, but %s has %+v; the random baseline needs one",
				a, cfg.EncoderPaths[0], arch)
		}
	}
	// Refused now rather than after hours of the other evaluations.
	for _, name := range cfg.Evaluations {
		k, _ := kindOf(name)
		if err := k.of(cfg).Settings().Precision.Check(env.Device); err != nil {
			return nil, err
		}
	}
	keys := map[string]string{} // by benchmark
	for _, path := range cfg.Datasets {
		if _, err := os.Stat(path); err != nil {
			return nil, field.Errorf("datasets", path, "cannot be read: %v", errors.Unwrap(err))
		}
		key, err := data.ContentKey(path)
		if err != nil {
			return nil, err
		}
		benchmark, _ := BenchmarkOf(path) // checked by Validate
		keys[benchmark] = key
	}
	if slices.Contains(cfg.Protocols, evaluate.ProtocolScaffold) {
		for _, path := range cfg.Datasets {
			if data.LacksSplit(path) {
				return nil, field.Errorf("datasets", path, "has no split (split/ is missing), which the %s protocol needs: leave %s out of the protocols, or featurize it with --split scaffold",
					evaluate.ProtocolScaffold, evaluate.ProtocolScaffold)
			}
		}
	}
	reused, err := randomRuns(cfg, arch, keys)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, DataKeys: keys}
	// A later failure must not throw away hours of finished evaluations.
	finish := func(err error) (*Result, error) {
		res.Gains, res.Average = res.ComputeGains()
		res.Seconds = time.Since(start).Seconds()
		return res, err
	}
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path) // checked by Validate
		for _, evaluation := range cfg.Evaluations {
			for _, protocol := range cfg.Protocols {
				for replicate, encoderPath := range cfg.EncoderPaths {
					for _, pretrained := range []bool{true, false} {
						encoder := ""
						if pretrained {
							encoder = encoderPath
						}
						entry := Entry{Benchmark: benchmark, Evaluation: evaluation, Protocol: protocol, Pretrained: pretrained, Replicate: replicate}
						what := fmt.Sprintf("%s, %s %s, %s", benchmark, evaluation, protocol, encoderLabel(pretrained, replicate))
						if earlier, ok := reused[entryKey(entry)]; ok {
							if env.Progress != nil {
								fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s, taken from %s\n", what, percent(earlier.Test), cfg.RandomFrom)
							}
							res.Entries = append(res.Entries, earlier)
							continue
						}
						k, _ := kindOf(evaluation)
						ev := k.of(cfg)
						c := ev.Settings()
						c.Data, c.EncoderPath, c.Encoder, c.Protocol = path, encoder, arch, protocol
						c.Seed += uint64(replicate * c.Seeds)
						out, err := ev.Evaluate(c, env)
						if err != nil {
							return finish(fmt.Errorf("%s: %w", what, err))
						}
						entry.Outcome = out
						if env.Progress != nil {
							fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s\n", what, percent(entry.Test))
						}
						res.Entries = append(res.Entries, entry)
					}
				}
			}
		}
	}
	return finish(nil)
}

// entryKey identifies an evaluation run within a suite.
func entryKey(e Entry) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%v\x00%d", e.Benchmark, e.Evaluation, e.Protocol, e.Pretrained, e.Replicate)
}

// encoderArch is the architecture of the exported encoder at path, checked
// against its weights, with dropout 0 (each evaluation sets its own).
func encoderArch(path string) (model.EncoderConfig, error) {
	info, state, err := model.LoadEncoder(path)
	if err != nil {
		return model.EncoderConfig{}, err
	}
	torch.FreeNamed(state) // each evaluation loads the weights itself
	info.Encoder.Dropout = 0
	return info.Encoder, nil
}

// ResultFile is the suite.json of a suite's --out folder, or path itself
// when it names a file.
func ResultFile(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "suite.json")
	}
	return path
}

// ReadResult reads a suite's result, from its --out folder or its
// suite.json; its errors name the file. Results written before precision
// was a setting read as fp32 ones, which they were.
func ReadResult(path string) (*Result, error) {
	file := ResultFile(path)
	var r Result
	if err := inputfile.ReadJSON(file, &r); err != nil {
		return nil, err
	}
	if r.Entries == nil {
		return nil, fmt.Errorf("%s is not a suite result (no entries)", file)
	}
	for _, c := range []*evaluate.Common{&r.Config.Finetune.Common, &r.Config.Linear.Common} {
		if c.Precision == "" {
			c.Precision = model.FP32
		}
	}
	return &r, nil
}

// randomRuns reads cfg.RandomFrom's runs without pre-training, by entryKey,
// after checking that they are the runs cfg would make: the same datasets
// (paths) holding the same molecules (keys, each benchmark's
// data.ContentKey now), the same settings of each evaluation, and random
// encoders of the same architecture (that of the earlier suite's first
// encoder).
func randomRuns(cfg Config, arch model.EncoderConfig, keys map[string]string) (map[string]Entry, error) {
	if cfg.RandomFrom == "" {
		return nil, nil
	}
	earlier, err := ReadResult(cfg.RandomFrom)
	if err != nil {
		return nil, err // the file's content, not the flag, is at fault
	}
	differs := func(what string) error {
		return field.Errorf("random_from", cfg.RandomFrom, "was run with other %s; its random encoders are not this suite's", what)
	}
	// The settings of the evaluations this suite runs, whose random runs
	// it takes.
	settings := func(c Config) string {
		var all []any
		for _, k := range evaluationKinds {
			if slices.Contains(cfg.Evaluations, k.name) {
				all = append(all, k.of(c))
			}
		}
		j, _ := json.Marshal(all)
		return string(j)
	}
	switch {
	case !slices.Equal(earlier.Config.Datasets, cfg.Datasets):
		return nil, differs("datasets")
	case settings(earlier.Config) != settings(cfg):
		return nil, differs("evaluation settings (seeds, epochs, L2 grid, …)")
	case len(earlier.Config.EncoderPaths) == 0:
		return nil, differs("encoders (none)")
	}
	theirs, err := encoderArch(earlier.Config.EncoderPaths[0])
	if err != nil {
		return nil, field.Errorf("random_from", cfg.RandomFrom, "names the encoder %s, whose architecture cannot be read: %v", earlier.Config.EncoderPaths[0], err)
	}
	if theirs != arch {
		return nil, differs("an encoder architecture")
	}
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path)
		switch earlier.DataKeys[benchmark] {
		case keys[benchmark]:
		case "":
			return nil, field.Errorf("random_from", cfg.RandomFrom, "does not record what %s held when it ran (it is older than that record), so its random runs cannot be checked against the data now: run them again (leave --random-from out)", path)
		default:
			return nil, field.Errorf("random_from", cfg.RandomFrom, "ran its random encoders on other molecules than %s holds now (content %.20s…, then %.20s…): run them again (leave --random-from out)",
				path, keys[benchmark], earlier.DataKeys[benchmark])
		}
	}
	out := map[string]Entry{}
	for _, e := range earlier.Entries {
		if !e.Pretrained {
			out[entryKey(e)] = e
		}
	}
	return out, nil
}

func encoderLabel(pretrained bool, replicate int) string {
	if pretrained {
		return fmt.Sprintf("pre-trained encoder %d", replicate+1)
	}
	return fmt.Sprintf("without pre-training (replicate %d)", replicate+1)
}

// percent writes a ROC-AUC summary as the paper does: "77.22 ± 2.02".
func percent(s metrics.Stat) string {
	if math.IsNaN(float64(s.Mean)) {
		return "—"
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*s.Mean, 100*s.Std)
}

// side is what the entries of one benchmark, evaluation, protocol and
// encoder kind hold: every run's test ROC-AUC, replicate by replicate.
type side struct {
	replicates map[int][]metrics.Value
}

// sides gathers the entries of one benchmark, evaluation and protocol.
func (r *Result) sides(benchmark, evaluation string, protocol evaluate.Protocol) (pre, random side) {
	pre, random = side{map[int][]metrics.Value{}}, side{map[int][]metrics.Value{}}
	for _, e := range r.Entries {
		if e.Benchmark != benchmark || e.Evaluation != evaluation || e.Protocol != protocol {
			continue
		}
		s := random
		if e.Pretrained {
			s = pre
		}
		s.replicates[e.Replicate] = e.RunTests
	}
	return pre, random
}

// runs is every run's test ROC-AUC, replicates in order.
func (s side) runs() []metrics.Value {
	keys := slices.Sorted(maps.Keys(s.replicates))
	var out []metrics.Value
	for _, k := range keys {
		out = append(out, s.replicates[k]...)
	}
	return out
}

// stat summarises every run of the side.
func (s side) stat() metrics.Stat {
	runs := s.runs()
	xs := make([]float64, len(runs))
	for i, v := range runs {
		xs[i] = float64(v)
	}
	return metrics.StatOf(xs)
}

// ComputeGains is the Δ of every benchmark, evaluation and protocol that has
// both sides, and for each evaluation and protocol the average over its
// benchmarks (see Gain). Pairs with a NaN on either side are left out.
func (r *Result) ComputeGains() (gains, averages []Gain) {
	for _, evaluation := range r.Config.Evaluations {
		for _, protocol := range r.Config.Protocols {
			var group []Gain
			for _, b := range Benchmarks {
				pre, random := r.sides(b, evaluation, protocol)
				g, ok := pairGain(pre, random, protocol)
				if !ok {
					continue
				}
				g.Benchmark, g.Evaluation, g.Protocol = b, evaluation, protocol
				group = append(group, g)
			}
			gains = append(gains, group...)
			if len(group) == 0 {
				continue
			}
			avg := Gain{Benchmark: "average", Evaluation: evaluation, Protocol: protocol, PairedBy: group[0].PairedBy}
			var sum float64
			pairs := len(group[0].Deltas)
			for _, g := range group {
				sum += float64(g.Delta)
				if len(g.Deltas) != pairs || g.PairedBy != avg.PairedBy {
					pairs = -1
				}
			}
			avg.Delta = metrics.Value(sum / float64(len(group)))
			if pairs > 0 {
				// Δ of pair k averaged over the benchmarks: the pairs keep
				// what the benchmarks share (the encoder, the seed).
				avg.Deltas = make([]metrics.Value, pairs)
				for k := range pairs {
					for _, g := range group {
						avg.Deltas[k] += g.Deltas[k] / metrics.Value(len(group))
					}
				}
				avg.Test, avg.Significant = tTest(avg.Deltas)
			}
			averages = append(averages, avg)
		}
	}
	return gains, averages
}

// pairGain pairs the two sides of one benchmark, evaluation and protocol.
func pairGain(pre, random side, protocol evaluate.Protocol) (Gain, bool) {
	var both []int
	for k := range pre.replicates {
		if _, ok := random.replicates[k]; ok {
			both = append(both, k)
		}
	}
	slices.Sort(both)
	if len(both) == 0 {
		return Gain{}, false
	}
	var g Gain
	switch {
	case len(both) > 1:
		g.PairedBy = "encoder"
		for _, k := range both {
			g.Deltas = append(g.Deltas, metrics.Value(meanOfValues(pre.replicates[k])-meanOfValues(random.replicates[k])))
		}
	default:
		g.PairedBy = protocol.PairedBy()
		a, b := pre.replicates[both[0]], random.replicates[both[0]]
		if len(a) != len(b) {
			return Gain{}, false
		}
		for i := range a {
			g.Deltas = append(g.Deltas, a[i]-b[i])
		}
	}
	g.Deltas = slices.DeleteFunc(g.Deltas, func(v metrics.Value) bool { return math.IsNaN(float64(v)) })
	if len(g.Deltas) == 0 {
		return Gain{}, false
	}
	g.Delta = metrics.Value(meanOfValues(g.Deltas))
	g.Test, g.Significant = tTest(g.Deltas)
	return g, true
}

// tTest is the one-sample t-test of deltas, nil with fewer than two.
func tTest(deltas []metrics.Value) (*metrics.PairedTest, bool) {
	xs := make([]float64, len(deltas))
	for i, v := range deltas {
		xs[i] = float64(v)
	}
	t, err := metrics.OneSampleTTest(xs)
	if err != nil {
		return nil, false
	}
	return &t, t.P < SignificanceLevel
}

// meanOfValues is the mean of the defined values of vs (NaN if none).
func meanOfValues(vs []metrics.Value) float64 {
	var sum float64
	n := 0
	for _, v := range vs {
		if !math.IsNaN(float64(v)) {
			sum += float64(v)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// Markdown is the paper-style table of the suite (Tables 1 and 2 of the
// paper, docs/method.md §7): for each evaluation and protocol run, the
// pre-trained encoders, no pre-training, and Δ with its p-value; then the
// paper's MICRO-Graph and Non-Pretrain rows; columns the seven benchmarks and
// their average; test ROC-AUC in %, mean ± std over runs. The Average of a
// measured row is the mean of its benchmarks' means, ± the std over runs of
// the per-run averages (when every benchmark has the same runs); that of a Δ
// row is the mean Δ over the benchmarks with its 95 % interval. A Δ with
// p < 0.05 is marked †. When not all seven benchmarks ran, averages (the
// paper's included) cover only those that did and are starred.
func (r *Result) Markdown() string {
	ran := benchmarksRun(r)
	star := ""
	if len(ran) < len(Benchmarks) {
		star = "*"
	}
	gains, averages := r.ComputeGains()
	var sb strings.Builder
	row := func(cells ...string) { sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	row(slices.Concat([]string{"Evaluation", "Protocol", "Model"}, Benchmarks, []string{"Average"})...)
	row(slices.Concat([]string{":--", ":--", ":--"}, slices.Repeat([]string{"--:"}, len(Benchmarks)+1))...)

	runs := map[int]bool{}
	pairedBy := map[string]bool{}
	for _, kind := range evaluationKinds {
		evaluation, name := kind.name, kind.heading
		if !slices.Contains(r.Config.Evaluations, evaluation) {
			continue
		}
		for _, protocol := range r.Config.Protocols {
			for _, pretrained := range []bool{true, false} {
				label := map[bool]string{true: "micrograph pre-trained", false: "no pre-training"}[pretrained]
				cells := []string{name, string(protocol), label}
				var means []float64
				var perRun [][]metrics.Value
				for _, b := range Benchmarks {
					pre, random := r.sides(b, evaluation, protocol)
					s := random
					if pretrained {
						s = pre
					}
					if len(s.replicates) == 0 {
						cells = append(cells, "—")
						continue
					}
					st := s.stat()
					cells = append(cells, percent(st))
					means = append(means, float64(st.Mean))
					perRun = append(perRun, s.runs())
					runs[st.N] = true
				}
				cells = append(cells, averageCell(means, perRun)+star)
				row(cells...)
			}
			cells := []string{name, string(protocol), "Δ (p)"}
			for _, b := range Benchmarks {
				i := slices.IndexFunc(gains, func(g Gain) bool {
					return g.Benchmark == b && g.Evaluation == evaluation && g.Protocol == protocol
				})
				if i < 0 {
					cells = append(cells, "—")
					continue
				}
				pairedBy[gains[i].PairedBy] = true
				cells = append(cells, gainCell(gains[i]))
			}
			i := slices.IndexFunc(averages, func(g Gain) bool { return g.Evaluation == evaluation && g.Protocol == protocol })
			if i < 0 {
				cells = append(cells, "—")
			} else {
				cells = append(cells, averageGainCell(averages[i])+star)
			}
			row(cells...)
		}
		for variant, label := range []string{"paper MICRO-Graph", "paper Non-Pretrain"} {
			paper := kind.paper[variant]
			cells := []string{name, "paper's", label}
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
				cells = append(cells, fmt.Sprintf("%.2f", metrics.Mean(shown))+star)
			}
			row(cells...)
		}
	}

	sb.WriteString("\nTest ROC-AUC (%), mean ± std")
	if len(runs) == 1 {
		for n := range runs {
			fmt.Fprintf(&sb, " over %d runs (encoders × seeds × folds)", n)
		}
	} else {
		sb.WriteString(" over each cell's runs (see suite.json)")
	}
	sb.WriteString(". No pre-training: the same architecture randomly initialised, fine-tuned from scratch or frozen.\n")
	sb.WriteString("scaffold: OGB's scaffold split, epoch or λ chosen on valid. cvK: K-fold cross-validation (the paper's cv10), epoch or λ chosen on the test ROC-AUC averaged over the folds, which is optimistic.\n")
	sb.WriteString("Δ: pre-trained − no pre-training, in points; p: two-sided paired t-test, pairs by " +
		strings.Join(slices.Sorted(maps.Keys(pairedBy)), ", ") + "; † p < 0.05. Average Δ: mean over the benchmarks [95 % t interval over the pairs].\n")
	if !pairedBy["encoder"] && len(pairedBy) > 0 {
		sb.WriteString("One pre-trained encoder: its p-values count the evaluation's variance, not pre-training's; evaluate several, from pre-training runs with different seeds.\n")
	}
	sb.WriteString("Paper rows: the paper's Tables 1 and 2; it reports no Non-Pretrain feature extraction, and its stated feature-extraction average (69.73) is not the mean of its seven figures (69.89).\n")
	if star != "" {
		fmt.Fprintf(&sb, "\\* Average over the benchmarks run here (%s), the paper's rows included; paper figures in parentheses are for benchmarks not run.\n", strings.Join(ran, ", "))
	}
	return sb.String()
}

// gainCell is a benchmark's Δ in points with its p-value: "+3.60 (0.012)†".
func gainCell(g Gain) string {
	if g.Test == nil {
		return fmt.Sprintf("%+.2f (n=%d)", 100*g.Delta, len(g.Deltas))
	}
	return fmt.Sprintf("%+.2f (%s)%s", 100*g.Delta, pValue(g.Test.P), dagger(g.Significant))
}

// averageGainCell is the mean Δ over benchmarks with its 95 % interval:
// "+1.20 [−0.50, +2.90]†".
func averageGainCell(g Gain) string {
	if g.Test == nil {
		return fmt.Sprintf("%+.2f", 100*g.Delta)
	}
	return fmt.Sprintf("%+.2f [%+.2f, %+.2f]%s", 100*g.Delta, 100*g.Test.Low95, 100*g.Test.Hi95, dagger(g.Significant))
}

// pValue writes p with three decimals, or as an upper bound when smaller.
func pValue(p float64) string {
	if p < 0.001 {
		return "p<0.001"
	}
	return fmt.Sprintf("p=%.3f", p)
}

func dagger(significant bool) string {
	if significant {
		return "†"
	}
	return ""
}

// averageCell is a measured row's Average: the mean of the benchmarks'
// means, ± the std over runs of the per-run averages when every benchmark
// has the same number of runs.
func averageCell(means []float64, perRun [][]metrics.Value) string {
	if len(means) == 0 {
		return "—"
	}
	m := metrics.Mean(means)
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
	return fmt.Sprintf("%.2f ± %.2f", 100*m, 100*float64(metrics.StatOf(averages).Std))
}
