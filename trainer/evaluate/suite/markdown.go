package suite

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
)

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
	t := &table{r: r, ran: benchmarksRun(r), runs: map[int]bool{}, pairedBy: map[string]bool{}}
	if len(t.ran) < len(Benchmarks) {
		t.star = "*"
	}
	t.gains, t.averages = r.ComputeGains()
	t.row(slices.Concat([]string{"Evaluation", "Protocol", "Model"}, Benchmarks, []string{"Average"})...)
	t.row(slices.Concat([]string{":--", ":--", ":--"}, slices.Repeat([]string{"--:"}, len(Benchmarks)+1))...)
	for _, kind := range evaluationKinds {
		if !slices.Contains(r.Config.Evaluations, kind.name) {
			continue
		}
		for _, protocol := range r.Config.Protocols {
			t.measuredRow(kind, protocol, true)
			t.measuredRow(kind, protocol, false)
			t.gainRow(kind, protocol)
		}
		t.paperRow(kind, "paper MICRO-Graph", kind.paperPretrained)
		t.paperRow(kind, "paper Non-Pretrain", kind.paperRandom)
	}
	t.footnotes()
	return t.sb.String()
}

// table is the Markdown table being written, and what its footnotes say:
// the run counts of its cells and how its Δs are paired.
type table struct {
	r               *Result
	sb              strings.Builder
	ran             []string // the benchmarks run, in Benchmarks order
	star            string   // "*" on averages over fewer than all benchmarks
	gains, averages []Gain
	runs            map[int]bool    // runs per measured cell
	pairedBy        map[string]bool // Gain.PairedBy of the Δ cells
}

func (t *table) row(cells ...string) { t.sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }

// measuredRow is the pre-trained (or random) encoders' row of one
// evaluation and protocol.
func (t *table) measuredRow(kind evaluationKind, protocol evaluate.Protocol, pretrained bool) {
	label := "no pre-training"
	if pretrained {
		label = "micrograph pre-trained"
	}
	cells := []string{kind.heading, string(protocol), label}
	var means []float64
	var perRun [][]metrics.Value
	for _, b := range Benchmarks {
		pre, random := t.r.sides(b, kind.name, protocol)
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
		t.runs[st.N] = true
	}
	t.row(append(cells, averageCell(means, perRun)+t.star)...)
}

// gainRow is the Δ row of one evaluation and protocol.
func (t *table) gainRow(kind evaluationKind, protocol evaluate.Protocol) {
	cells := []string{kind.heading, string(protocol), "Δ (p)"}
	for _, b := range Benchmarks {
		i := slices.IndexFunc(t.gains, func(g Gain) bool {
			return g.Benchmark == b && g.Evaluation == kind.name && g.Protocol == protocol
		})
		if i < 0 {
			cells = append(cells, "—")
			continue
		}
		t.pairedBy[t.gains[i].PairedBy] = true
		cells = append(cells, gainCell(t.gains[i]))
	}
	i := slices.IndexFunc(t.averages, func(g Gain) bool { return g.Evaluation == kind.name && g.Protocol == protocol })
	if i < 0 {
		cells = append(cells, "—")
	} else {
		cells = append(cells, averageGainCell(t.averages[i])+t.star)
	}
	t.row(cells...)
}

// paperRow is a row of the paper's figures: in parentheses for benchmarks
// not run, its average over those run when not all were.
func (t *table) paperRow(kind evaluationKind, label string, paper paperRow) {
	cells := []string{kind.heading, "paper's", label}
	if paper.rocAUC == nil {
		t.row(append(cells, slices.Repeat([]string{"—"}, len(Benchmarks)+1)...)...)
		return
	}
	var shown []float64
	for _, b := range Benchmarks {
		v := paper.rocAUC[b]
		if slices.Contains(t.ran, b) {
			cells = append(cells, fmt.Sprintf("%.2f", v))
			shown = append(shown, v)
		} else {
			cells = append(cells, fmt.Sprintf("(%.2f)", v))
		}
	}
	if t.star == "" {
		cells = append(cells, fmt.Sprintf("%.2f", paper.average))
	} else {
		cells = append(cells, fmt.Sprintf("%.2f", metrics.Mean(shown))+t.star)
	}
	t.row(cells...)
}

// footnotes say what the cells hold, how the Δs are paired, and what the
// paper's rows are.
func (t *table) footnotes() {
	sb := &t.sb
	sb.WriteString("\nTest ROC-AUC (%), mean ± std")
	if len(t.runs) == 1 {
		for n := range t.runs {
			fmt.Fprintf(sb, " over %d runs (encoders × seeds × folds)", n)
		}
	} else {
		sb.WriteString(" over each cell's runs (see suite.json)")
	}
	sb.WriteString(". No pre-training: the same architecture randomly initialised, fine-tuned from scratch or frozen.\n")
	sb.WriteString("scaffold: OGB's scaffold split, epoch or λ chosen on valid. cvK: K-fold cross-validation (the paper's cv10), epoch or λ chosen on the test ROC-AUC averaged over the folds, which is optimistic.\n")
	sb.WriteString("Δ: pre-trained − no pre-training, in points; p: two-sided paired t-test, pairs by " +
		strings.Join(slices.Sorted(maps.Keys(t.pairedBy)), ", ") + "; † p < 0.05. Average Δ: mean over the benchmarks [95 % t interval over the pairs].\n")
	if !t.pairedBy["encoder"] && len(t.pairedBy) > 0 {
		sb.WriteString("One pre-trained encoder: its p-values count the evaluation's variance, not pre-training's; evaluate several, from pre-training runs with different seeds.\n")
	}
	sb.WriteString("Paper rows: the paper's Tables 1 and 2; it reports no Non-Pretrain feature extraction, and its stated feature-extraction average (69.73) is not the mean of its seven figures (69.89).\n")
	if line := t.finetuneTraining(); line != "" {
		sb.WriteString(line)
	}
	if r := t.r.RandomFinetune; r != nil {
		random, pre := settingsDifference(*r, t.r.Config.Finetune)
		fmt.Fprintf(sb, "Fine-tune, no pre-training: the runs of %s, fine-tuned with %s (the pre-trained encoders with %s).\n",
			t.r.Config.RandomFrom, strings.Join(random, ", "), strings.Join(pre, ", "))
	}
	if t.star != "" {
		fmt.Fprintf(sb, "\\* Average over the benchmarks run here (%s), the paper's rows included; paper figures in parentheses are for benchmarks not run.\n", strings.Join(t.ran, ", "))
	}
}

// finetuneTraining is the footnote that says how the fine-tuning runs
// trained: their epochs and recipe, and how many patience stopped early
// (the epochs each trained are in suite.json, stopped_at); "" without
// fine-tuning.
func (t *table) finetuneTraining() string {
	if !slices.Contains(t.r.Config.Evaluations, EvaluationFinetune) {
		return ""
	}
	c := t.r.Config.Finetune
	line := fmt.Sprintf("Fine-tune: %d epochs, batch %d, %s", c.Epochs, c.BatchSize, c.Recipe)
	runs, stopped, fewest := 0, 0, c.Epochs
	for _, e := range t.r.Entries {
		if e.Finetune == nil {
			continue
		}
		for _, run := range e.Finetune.Runs {
			runs++
			if run.StoppedAt > 0 {
				stopped, fewest = stopped+1, min(fewest, run.StoppedAt)
			}
		}
	}
	if stopped > 0 {
		line += fmt.Sprintf("; patience stopped %d of %d runs early (the earliest after %d epochs)", stopped, runs, fewest)
	}
	return line + ".\n"
}

// percent writes a ROC-AUC summary as the paper does: "77.22 ± 2.02".
func percent(s metrics.Stat) string {
	if math.IsNaN(float64(s.Mean)) {
		return "—"
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*s.Mean, 100*s.Std)
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

// settingsDifference lists the settings in which a and b differ, by their
// names in JSON, with a's values and with b's: "lr 0.0001" and "lr 0.001".
func settingsDifference(a, b evaluate.FinetuneConfig) (inA, inB []string) {
	fa, fb := flatJSON(a), flatJSON(b)
	keys := slices.Sorted(maps.Keys(fa))
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	value := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return k + " " + v
		}
		return k + " (not set)"
	}
	slices.Sort(keys)
	for _, k := range keys {
		if fa[k] != fb[k] {
			inA, inB = append(inA, value(fa, k)), append(inB, value(fb, k))
		}
	}
	return inA, inB
}

// flatJSON is v's JSON as leaves by path ("encoder.hidden"), each value
// written as JSON.
func flatJSON(v any) map[string]string {
	b, _ := json.Marshal(v)
	var tree any
	json.Unmarshal(b, &tree)
	out := map[string]string{}
	var walk func(prefix string, node any)
	walk = func(prefix string, node any) {
		if m, ok := node.(map[string]any); ok {
			for k, child := range m {
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, child)
			}
			return
		}
		leaf, _ := json.Marshal(node)
		out[prefix] = string(leaf)
	}
	walk("", tree)
	return out
}
