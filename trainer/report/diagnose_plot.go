package report

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/metrics"

	"github.com/micrograph/micrograph/trainer/diagnose"
)

// diagnosisPanel is one figure of a diagnosis drawn as bars, one per
// encoder.
type diagnosisPanel struct {
	name  string // the panel's title
	about string // what the figure is, under the title
	// value is the figure of one diagnosis; NaN where it lacks it.
	value func(*diagnose.Diagnosis) float64
}

// subgraphFigure reads a figure of one sampler's subgraphs.
func subgraphFigure(sampler string, get func(diagnose.SubgraphStats) metrics.Value) func(*diagnose.Diagnosis) float64 {
	return func(d *diagnose.Diagnosis) float64 {
		for _, s := range d.Subgraphs {
			if s.Sampler == sampler {
				return float64(get(s))
			}
		}
		return math.NaN()
	}
}

// probeFigure reads the test ROC-AUC (%) of the probe on features of the
// dataset whose path ends in suffix.
func probeFigure(suffix, features string) func(*diagnose.Diagnosis) float64 {
	return func(d *diagnose.Diagnosis) float64 {
		for _, p := range d.Probes {
			if p.Features == features && len(p.Data) >= len(suffix) && p.Data[len(p.Data)-len(suffix):] == suffix {
				return 100 * float64(p.Test.Mean)
			}
		}
		return math.NaN()
	}
}

// diagnosisPanels are the figures WriteDiagnosisPlot draws, in order.
var diagnosisPanels = []diagnosisPanel{
	{name: "effective rank of e", about: "exp entropy of normalised singular values",
		value: func(d *diagnose.Diagnosis) float64 { return float64(d.Graph.EffectiveRank) }},
	{name: "uniformity of e", about: "log mean exp(−2‖ê_i − ê_j‖²); lower is more uniform",
		value: func(d *diagnose.Diagnosis) float64 { return float64(d.Graph.Uniformity) }},
	{name: "node variance explained by molecule", about: "between-molecule / total",
		value: func(d *diagnose.Diagnosis) float64 { return float64(d.Nodes.BetweenGraphShare) }},
	{name: "motif subgraphs covering > 80 %", about: "share of subgraphs, η = 4, no perturbation",
		value: subgraphFigure(model.SamplerMotif, func(s diagnose.SubgraphStats) metrics.Value { return s.Over80 })},
	{name: "median positive mass in Y (motif)", about: "softmax mass on own subgraphs, per molecule",
		value: subgraphFigure(model.SamplerMotif, func(s diagnose.SubgraphStats) metrics.Value { return s.PositiveMass.Q50 })},
	{name: "cos(e eval, e with dropout)", about: "mean over molecules",
		value: func(d *diagnose.Diagnosis) float64 { return float64(d.Dropout.Dropout.Mean) }},
	{name: "probe clintox on e (ROC-AUC %)", about: "linear, scaffold split", value: probeFigure("clintox", "e")},
	{name: "probe bace on e (ROC-AUC %)", about: "linear, scaffold split", value: probeFigure("bace", "e")},
}

// WriteDiagnosisPlot draws chosen figures of several diagnoses (named by
// names, in order) as an SVG of small bar charts, one panel per figure.
func WriteDiagnosisPlot(w io.Writer, names []string, ds []*diagnose.Diagnosis, title string) error {
	if len(ds) == 0 || len(names) != len(ds) {
		return errors.New("want one name per diagnosis, and at least one")
	}
	const cols, pw, ph, header = 2, 420, 190, 50
	const left, right, top, bottom = 150, 60, 34, 12
	rows := (len(diagnosisPanels) + cols - 1) / cols
	width, height := cols*pw, header+rows*ph
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="14" y="28" font-size="16" font-weight="bold" fill="#1d232a">%s</text>`+"\n", html.EscapeString(title))
	colors := []string{"#7b8690", "#2e8540", "#1f5fa8", "#b8202f", "#c05a00", "#8a4baf"}
	for i, p := range diagnosisPanels {
		x0, y0 := float64(i%cols*pw), float64(header+i/cols*ph)
		values := make([]float64, len(ds))
		lo, hi := 0.0, 0.0
		for j, d := range ds {
			values[j] = p.value(d)
			if metrics.IsFinite(values[j]) {
				lo, hi = math.Min(lo, values[j]), math.Max(hi, values[j])
			}
		}
		if lo == hi {
			hi = lo + 1
		}
		fmt.Fprintf(bw, `<g class="panel"><text x="%s" y="%s" font-size="13" font-weight="bold" fill="#1d232a">%s</text>`,
			coord(x0+14), coord(y0+16), html.EscapeString(p.name))
		fmt.Fprintf(bw, `<text x="%s" y="%s" fill="#5b6670">%s</text>`+"\n", coord(x0+14), coord(y0+29), html.EscapeString(p.about))
		barH := (float64(ph) - top - bottom) / float64(len(ds))
		px := func(v float64) float64 { return x0 + left + (v-lo)/(hi-lo)*(float64(pw)-left-right) }
		zero := px(0)
		for j, name := range names {
			y := y0 + top + float64(j)*barH
			fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="end" fill="#3a444d">%s</text>`, coord(x0+left-6), coord(y+barH*0.7), html.EscapeString(name))
			v := values[j]
			if !metrics.IsFinite(v) {
				fmt.Fprintf(bw, `<text x="%s" y="%s" fill="#9aa5b0">n/a</text>`+"\n", coord(zero+4), coord(y+barH*0.7))
				continue
			}
			a, b := math.Min(zero, px(v)), math.Max(zero, px(v))
			fmt.Fprintf(bw, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, coord(a), coord(y+1), coord(math.Max(b-a, 0.5)), coord(barH-2), colors[j%len(colors)])
			fmt.Fprintf(bw, `<text x="%s" y="%s" fill="#1d232a">%s</text>`+"\n", coord(b+4), coord(y+barH*0.7), formatFigure(v))
		}
		fmt.Fprintf(bw, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#3a444d"/></g>`+"\n", coord(zero), coord(zero), coord(y0+top), coord(y0+float64(ph)-bottom))
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

// formatFigure writes a bar's value with three significant digits.
func formatFigure(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
