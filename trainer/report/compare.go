package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// evaluation is what CompareResults reads of a finetune or linear-eval
// result file.
type evaluation struct {
	Evaluation string                  `json:"evaluation"`
	Metric     string                  `json:"metric"` // evaluate.MetricROCAUC (or empty, before regression) or MetricRMSE
	Protocol   string                  `json:"protocol"`
	Dataset    evaluate.DatasetSummary `json:"dataset"`
	Pretrained bool                    `json:"pretrained"`
	Test       metrics.Stat            `json:"test"`
	Valid      metrics.Stat            `json:"valid"`
	Seconds    float64                 `json:"seconds"`

	ByFraction []evaluate.FractionStat `json:"by_fraction"` // linear evaluation on shares of the train labels
}

// CompareResults writes the finetune and linear-eval results in the files
// paths side by side to w as a Markdown table, a row each named by its
// file: test and valid ROC-AUC (%, mean ± std over runs), or RMSE for
// results on regression tasks (results of one metric only). Results of
// linear evaluation on shares of the train labels add a second table, one
// column per share.
func CompareResults(w io.Writer, paths []string) error {
	var rows []evaluation
	for _, path := range paths {
		var e evaluation
		if err := inputfile.ReadJSON(path, &e); err != nil {
			return fmt.Errorf("%w (want a finetune or linear-eval result)", err)
		}
		if e.Evaluation == "" {
			return fmt.Errorf("%s is not a finetune or linear-eval result", path)
		}
		if e.Metric == "" {
			e.Metric = evaluate.MetricROCAUC
		}
		if len(rows) > 0 && e.Metric != rows[0].Metric {
			return fmt.Errorf("%s reports %s, %s reports %s: compare results of one metric", path, e.Metric, paths[0], rows[0].Metric)
		}
		rows = append(rows, e)
	}
	printf := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	metric := metricName(rows[0].Metric)
	printf("| result | dataset | evaluation | protocol | encoder | runs | test %s | valid %s |", metric, metric)
	printf("|:--|:--|:--|:--|:--|--:|--:|--:|")
	for i, e := range rows {
		printf("| %s | %s | %s | %s | %s | %d | %s | %s |", filepath.Base(paths[i]), e.Dataset.Name,
			e.Evaluation, e.Protocol, encoderName(e.Pretrained), e.Test.N, figure(e.Metric, e.Test), figure(e.Metric, e.Valid))
	}
	printFractionTable(printf, paths, rows)
	return nil
}

// metricName is a column title for a result's metric.
func metricName(metric string) string {
	if metric == evaluate.MetricRMSE {
		return "RMSE"
	}
	return "ROC-AUC (%)"
}

// figure writes a summary: ROC-AUC in %, RMSE in the labels' units; "—"
// when undefined (no valid part under cross-validation).
func figure(metric string, s metrics.Stat) string {
	switch {
	case math.IsNaN(float64(s.Mean)):
		return "—"
	case metric == evaluate.MetricRMSE:
		return fmt.Sprintf("%.3f ± %.3f", s.Mean, s.Std)
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*s.Mean, 100*s.Std)
}

func encoderName(pretrained bool) string {
	if pretrained {
		return "pre-trained"
	}
	return "random (no pre-training)"
}

// printFractionTable prints, when some result has label fractions, their
// test ROC-AUC with one column per fraction any result has, smallest first.
// A column names its labelled molecules when every result agrees on them.
func printFractionTable(printf func(string, ...any), paths []string, rows []evaluation) {
	var fractions []float64
	for _, e := range rows {
		for _, f := range e.ByFraction {
			if !slices.Contains(fractions, f.Fraction) {
				fractions = append(fractions, f.Fraction)
			}
		}
	}
	if len(fractions) == 0 {
		return
	}
	slices.Sort(fractions)
	header, rule := "| result | dataset | encoder | runs |", "|:--|:--|:--|--:|"
	for i, f := range fractions {
		var sizes []int // labelled molecules per split
		agree := true
		for _, e := range rows {
			for _, s := range e.ByFraction {
				if s.Fraction == f {
					agree = agree && (sizes == nil || slices.Equal(sizes, s.Train))
					sizes = s.Train
				}
			}
		}
		name := fmt.Sprintf("%.4g %%", 100*f)
		if i == 0 {
			name += " of train labels"
		}
		if agree && len(sizes) == 1 {
			name += fmt.Sprintf(" (%d)", sizes[0])
		}
		header += " " + name + " |"
		rule += "--:|"
	}
	printf("")
	printf("Test %s by share of the train labels fitted on (in brackets: molecules); valid and test parts unchanged:", metricName(rows[0].Metric))
	printf("")
	printf("%s", header)
	printf("%s", rule)
	for i, e := range rows {
		if len(e.ByFraction) == 0 {
			continue
		}
		line := fmt.Sprintf("| %s | %s | %s | %d |", filepath.Base(paths[i]), e.Dataset.Name, encoderName(e.Pretrained), e.ByFraction[0].Test.N)
		for _, f := range fractions {
			cell := "–"
			for _, s := range e.ByFraction {
				if s.Fraction == f {
					cell = figure(e.Metric, s.Test)
				}
			}
			line += " " + cell + " |"
		}
		printf("%s", line)
	}
}
