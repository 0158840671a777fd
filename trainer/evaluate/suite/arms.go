package suite

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// Arm is one pre-training method's suite (the full method, or one of its
// ablations), named for the table.
type Arm struct {
	Name   string
	Result *Result
}

// ArmComparison sets several methods' suites side by side, as the paper's
// Table 3 sets MICRO-Graph beside its ablations: for every evaluation and
// protocol, each arm's pre-trained test ROC-AUC per benchmark, its gain over
// its own random encoders, and its difference from the first arm.
//
// The difference is paired by replicate: replicate i of every arm must be
// the pre-training run with the same seed, so list each suite's --encoder
// files in seed order. Replicate i's random encoders and probe seeds are
// then the same in every arm (Config), and so is the pairing of Δ.
type ArmComparison struct {
	Benchmarks []string   `json:"benchmarks"` // what every arm ran, in Benchmarks order
	Tables     []ArmTable `json:"tables"`     // one per evaluation and protocol
}

// ArmTable is one evaluation under one protocol.
type ArmTable struct {
	Evaluation string            `json:"evaluation"`
	Protocol   evaluate.Protocol `json:"protocol"`
	Random     ArmRow            `json:"random"` // the first arm's random encoders
	Arms       []ArmRow          `json:"arms"`
}

// ArmRow is one encoder kind's test ROC-AUC: per benchmark (every run of
// every replicate) and their mean. Gain is Δ against the random encoders of
// the same suite (the average over benchmarks, as Result.ComputeGains
// has it); FromFirst is the first arm minus this one, paired by replicate
// on the average over benchmarks, and FromFirstByBenchmark the same on each
// benchmark. They are nil where they do not apply.
type ArmRow struct {
	Name                 string         `json:"name"`
	Figures              []metrics.Stat `json:"figures"` // in ArmComparison.Benchmarks order
	Average              metrics.Value  `json:"average"`
	Gain                 *Gain          `json:"gain,omitempty"`
	FromFirst            *Gain          `json:"from_first,omitempty"`
	FromFirstByBenchmark []*Gain        `json:"from_first_by_benchmark,omitempty"` // in Benchmarks order
}

// CompareArms builds the comparison. The arms must have run the same
// benchmarks, evaluations and protocols, so that every average covers the
// same benchmarks; at least two arms, each with a result.
func CompareArms(arms []Arm) (*ArmComparison, error) {
	if len(arms) < 2 {
		return nil, fmt.Errorf("comparing methods needs at least two suites, got %d", len(arms))
	}
	first := arms[0].Result
	ran := benchmarksRun(first)
	for _, a := range arms[1:] {
		if got := benchmarksRun(a.Result); !slices.Equal(got, ran) {
			return nil, fmt.Errorf("%s ran %s, %s ran %s: compare suites of the same benchmarks",
				a.Name, strings.Join(got, ", "), arms[0].Name, strings.Join(ran, ", "))
		}
		if !slices.Equal(a.Result.Config.Evaluations, first.Config.Evaluations) || !slices.Equal(a.Result.Config.Protocols, first.Config.Protocols) {
			return nil, fmt.Errorf("%s ran %s under %s, %s ran %s under %s: compare suites of the same evaluations and protocols",
				a.Name, strings.Join(a.Result.Config.Evaluations, ", "), joinProtocols(a.Result.Config.Protocols),
				arms[0].Name, strings.Join(first.Config.Evaluations, ", "), joinProtocols(first.Config.Protocols))
		}
	}
	c := &ArmComparison{Benchmarks: ran}
	averages := make([][]Gain, len(arms)) // each arm's Δ averaged over the benchmarks
	for i, a := range arms {
		_, averages[i] = a.Result.ComputeGains()
	}
	for _, evaluation := range first.Config.Evaluations {
		for _, protocol := range first.Config.Protocols {
			t := ArmTable{Evaluation: evaluation, Protocol: protocol}
			t.Random = armRow("random encoder", first, evaluation, protocol, ran, false)
			reference := replicateAverages(first, evaluation, protocol, ran)
			for i, a := range arms {
				row := armRow(a.Name, a.Result, evaluation, protocol, ran, true)
				if k := slices.IndexFunc(averages[i], func(g Gain) bool { return g.Evaluation == evaluation && g.Protocol == protocol }); k >= 0 {
					row.Gain = &averages[i][k]
				}
				if i > 0 {
					row.FromFirst = pairedDifference(reference, replicateAverages(a.Result, evaluation, protocol, ran))
					for _, b := range ran {
						one := []string{b}
						g := pairedDifference(replicateAverages(first, evaluation, protocol, one), replicateAverages(a.Result, evaluation, protocol, one))
						if g != nil {
							g.Benchmark = b
						}
						row.FromFirstByBenchmark = append(row.FromFirstByBenchmark, g)
					}
				}
				t.Arms = append(t.Arms, row)
			}
			c.Tables = append(c.Tables, t)
		}
	}
	return c, nil
}

// benchmarksRun is every benchmark with an entry, in Benchmarks order.
func benchmarksRun(r *Result) []string {
	var ran []string
	for _, b := range Benchmarks {
		if slices.ContainsFunc(r.Entries, func(e Entry) bool { return e.Benchmark == b }) {
			ran = append(ran, b)
		}
	}
	return ran
}

// armRow summarises one side of a suite on the benchmarks given.
func armRow(name string, r *Result, evaluation string, protocol evaluate.Protocol, benchmarks []string, pretrained bool) ArmRow {
	row := ArmRow{Name: name}
	var means []float64
	for _, b := range benchmarks {
		pre, random := r.sides(b, evaluation, protocol)
		s := random
		if pretrained {
			s = pre
		}
		st := s.stat()
		row.Figures = append(row.Figures, st)
		means = append(means, float64(st.Mean))
	}
	row.Average = metrics.Value(metrics.Mean(means))
	return row
}

// replicateAverages is, per replicate, the mean over the benchmarks of the
// pre-trained encoder's mean test ROC-AUC; a replicate missing from a
// benchmark is left out.
func replicateAverages(r *Result, evaluation string, protocol evaluate.Protocol, benchmarks []string) map[int]float64 {
	sums, counts := map[int]float64{}, map[int]int{}
	for _, b := range benchmarks {
		pre, _ := r.sides(b, evaluation, protocol)
		for k, runs := range pre.replicates {
			sums[k] += meanOfValues(runs)
			counts[k]++
		}
	}
	out := map[int]float64{}
	for k, n := range counts {
		if n == len(benchmarks) {
			out[k] = sums[k] / float64(n)
		}
	}
	return out
}

// pairedDifference is a − b over the replicates both have, with its t-test
// (nil with fewer than two pairs or a NaN).
func pairedDifference(a, b map[int]float64) *Gain {
	var keys []int
	for k := range a {
		if _, ok := b[k]; ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	g := &Gain{Benchmark: "average", PairedBy: "encoder"}
	for _, k := range keys {
		d := a[k] - b[k]
		if math.IsNaN(d) {
			return nil
		}
		g.Deltas = append(g.Deltas, metrics.Value(d))
	}
	if len(g.Deltas) == 0 {
		return nil
	}
	g.Delta = metrics.Value(meanOfValues(g.Deltas))
	g.Test, g.Significant = tTest(g.Deltas)
	return g
}

// Markdown is one table per evaluation and protocol: rows the random
// encoder and each arm, columns the benchmarks, their average, Δ against the
// random encoder with its 95 % interval, and the first arm minus this one
// with its p-value; test ROC-AUC in %, † p < 0.05.
func (c *ArmComparison) Markdown() string {
	var sb strings.Builder
	row := func(cells ...string) { sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	for i, t := range c.Tables {
		if i > 0 {
			sb.WriteString("\n")
		}
		name := headingOf(t.Evaluation)
		fmt.Fprintf(&sb, "%s, %s:\n\n", name, t.Protocol)
		first := t.Arms[0].Name
		row(slices.Concat([]string{"encoder"}, c.Benchmarks, []string{"average", "Δ vs random [95 %]", first + " − this"})...)
		row(slices.Concat([]string{":--"}, slices.Repeat([]string{"--:"}, len(c.Benchmarks)+3))...)
		for _, r := range append([]ArmRow{t.Random}, t.Arms...) {
			cells := []string{r.Name}
			for _, s := range r.Figures {
				cells = append(cells, percent(s))
			}
			cells = append(cells, fmt.Sprintf("%.2f", 100*r.Average), "—", "—")
			if r.Gain != nil {
				cells[len(cells)-2] = averageGainCell(*r.Gain)
			}
			if r.FromFirst != nil {
				cells[len(cells)-1] = gainCell(*r.FromFirst)
			}
			row(cells...)
		}
		fmt.Fprintf(&sb, "\n%s − this, per benchmark [95 %% t interval over the replicates]:\n\n", first)
		row(slices.Concat([]string{"encoder"}, c.Benchmarks, []string{"average"})...)
		row(slices.Concat([]string{":--"}, slices.Repeat([]string{"--:"}, len(c.Benchmarks)+1))...)
		for _, r := range t.Arms[1:] {
			cells := []string{r.Name}
			for _, g := range append(r.FromFirstByBenchmark, r.FromFirst) {
				cell := "—"
				if g != nil {
					cell = averageGainCell(*g)
				}
				cells = append(cells, cell)
			}
			row(cells...)
		}
	}
	sb.WriteString("\nTest ROC-AUC (%), mean ± std over each cell's runs; average: the mean over the benchmarks. " +
		"Δ vs random: the arm's pre-trained − random encoders of its own suite, mean over the benchmarks [95 % t interval over the pairs]. " +
		"The last column: the first arm − this one on the average, paired by replicate (pre-training seed), two-sided t-test; † p < 0.05. " +
		"Per benchmark: the same difference on each benchmark, with its 95 % t interval over the replicates.\n")
	return sb.String()
}

// joinProtocols lists protocols as a message does: "scaffold, cv10".
func joinProtocols(ps []evaluate.Protocol) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// ParseArm splits an argument naming an arm into the method's name and the
// suite result file: NAME=PATH, or PATH named after its folder; PATH is a
// suite's output folder or its suite.json.
func ParseArm(arg string) (name, file string) {
	name, path, named := strings.Cut(arg, "=")
	if !named {
		path = arg
	}
	file = ResultFile(path)
	if !named {
		name = filepath.Base(filepath.Dir(file))
	}
	return name, file
}

// IsArm tells whether an argument (as ParseArm reads it) names a suite
// result: its file holds suite entries.
func IsArm(arg string) bool {
	_, file := ParseArm(arg)
	var probe struct {
		Entries []json.RawMessage `json:"entries"`
	}
	return inputfile.ReadJSON(file, &probe) == nil && probe.Entries != nil
}

// ReadArms reads the arms args name (ParseArm), in order.
func ReadArms(args []string) ([]Arm, error) {
	var arms []Arm
	for _, arg := range args {
		name, file := ParseArm(arg)
		r, err := ReadResult(file)
		if err != nil {
			return nil, err
		}
		arms = append(arms, Arm{Name: name, Result: r})
	}
	return arms, nil
}
