package report

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// lossPanel is one part of the log drawn in its own panel.
type lossPanel struct {
	name, about, color string
	value              func(runfolder.LogRecord) float64
}

// partAbout describes each loss part a log may hold (docs/method.md §3,
// §12) and gives it a colour.
var partAbout = map[string][2]string{
	"node_mot": {"L_node-mot: nodes to their Sinkhorn motifs", "#2e8540"},
	"mot_sub":  {"L_mot-sub: subgraphs to their motifs", "#8a4baf"},
	"reg":      {"L_reg: MinCut regulariser", "#c05a00"},
	"contra":   {"L_contra: graph-to-subgraph contrast", "#b8202f"},
	"motif":    {"L_motif: subgraphs to their Sinkhorn motifs (released)", "#8a4baf"},
	"sampler":  {"L_sampler: coherence of motif-like subgraphs (released)", "#c05a00"},
}

// lossPanels are the panels of a log, in the order the plot shows them: the
// loss, each of its parts as the first record names them, and the number of
// subgraphs.
func lossPanels(records []runfolder.LogRecord) []lossPanel {
	panels := []lossPanel{{"loss", "the loss", "#1f5fa8", func(r runfolder.LogRecord) float64 { return float64(r.Loss) }}}
	for _, p := range records[0].Parts {
		name := p.Name
		about, ok := partAbout[name]
		if !ok {
			about = [2]string{name, "#4a5560"}
		}
		panels = append(panels, lossPanel{name, about[0], about[1], func(r runfolder.LogRecord) float64 { return float64(r.Part(name)) }})
	}
	return append(panels, lossPanel{"subgraphs", "subgraphs per batch", "#4a5560", func(r runfolder.LogRecord) float64 { return float64(r.Subgraphs) }})
}

// Layout of the loss plot, in pixels: panels of panelW×panelH in
// plotColumns columns under a header, each with its plot area inset by the
// margins (room for the title above and the tick labels left and below).
const (
	plotColumns                                      = 2
	panelW, panelH                                   = 560, 260
	plotHeader                                       = 64
	marginLeft, marginRight, marginTop, marginBottom = 64, 18, 34, 44
)

// WriteLossPlot draws the log's loss parts over optimiser steps as one SVG
// of small multiples, one panel per part (lossPanels): every logged value
// faint, a centred moving average over it, gaps where a value is NaN (a
// non-finite loss), and dashed lines where an epoch begins. Each panel's y
// axis spans its values' range exactly. title heads the figure.
func WriteLossPlot(w io.Writer, records []runfolder.LogRecord, title string) error {
	if len(records) == 0 {
		return errors.New("no log records to plot")
	}
	panels := lossPanels(records)
	rows := (len(panels) + plotColumns - 1) / plotColumns
	width, height := plotColumns*panelW, plotHeader+rows*panelH
	window := movingWindow(len(records))

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="16" y="26" font-size="17" font-weight="bold" fill="#1d232a">%s</text>`+"\n", html.EscapeString(title))
	first, last := records[0], records[len(records)-1]
	smoothing := fmt.Sprintf("Faint: every logged value; solid: centred moving average over %d logged steps", window)
	if window == 1 {
		smoothing = "Too few logged steps to smooth"
	}
	stride := epochStride(records)
	epochLines := "epoch starts"
	if stride > 1 {
		epochLines = fmt.Sprintf("epoch starts, every %d epochs", stride)
	}
	fmt.Fprintf(bw, `<text x="16" y="48" fill="#5b6670">%d logged steps (steps %d–%d, epochs %d–%d). %s; gaps: NaN; dashed: %s.</text>`+"\n",
		len(records), first.Step, last.Step, first.Epoch, last.Epoch, smoothing, epochLines)

	steps := make([]float64, len(records))
	for i, r := range records {
		steps[i] = float64(r.Step)
	}
	for i, p := range panels {
		values := make([]float64, len(records))
		for j, r := range records {
			values[j] = p.value(r)
		}
		x0, y0 := float64(i%plotColumns*panelW), float64(plotHeader+i/plotColumns*panelH)
		writePanel(bw, p, x0, y0, records, stride, steps, values, window)
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

// movingWindow is the odd number of logged values the moving average spans:
// about a fortieth of the log, so that it follows trends but not noise.
func movingWindow(n int) int {
	return n/80*2 + 1
}

// writePanel draws one panel with its top left corner at (x0, y0).
func writePanel(w io.Writer, p lossPanel, x0, y0 float64, records []runfolder.LogRecord, stride int, steps, values []float64, window int) {
	left, top := x0+marginLeft, y0+marginTop
	right, bottom := x0+panelW-marginRight, y0+panelH-marginBottom
	fmt.Fprintf(w, `<g class="panel" id="panel-%s">`+"\n", p.name)
	fmt.Fprintf(w, `<text x="%s" y="%s" font-size="14" font-weight="bold" fill="#1d232a">%s</text>`,
		coord(left), coord(y0+20), html.EscapeString(p.name))
	fmt.Fprintf(w, `<text x="%s" y="%s" fill="#5b6670" text-anchor="end">%s</text>`+"\n",
		coord(right), coord(y0+20), html.EscapeString(p.about))
	fmt.Fprintf(w, `<rect class="plot-area" x="%s" y="%s" width="%s" height="%s" fill="#fbfcfd" stroke="#c9d0d6"/>`+"\n",
		coord(left), coord(top), coord(right-left), coord(bottom-top))

	xlo, xhi := span(steps)
	ylo, yhi := span(values)
	if math.IsNaN(ylo) {
		fmt.Fprintf(w, `<text x="%s" y="%s" text-anchor="middle" fill="#a3261b">no finite value</text>`+"\n</g>\n",
			coord((left+right)/2), coord((top+bottom)/2))
		return
	}
	// A constant series sits in the middle of a unit range around it.
	if xlo == xhi {
		xlo, xhi = xlo-0.5, xhi+0.5
	}
	if ylo == yhi {
		ylo, yhi = ylo-0.5, yhi+0.5
	}
	px := func(x float64) float64 { return left + (x-xlo)/(xhi-xlo)*(right-left) }
	py := func(y float64) float64 { return bottom - (y-ylo)/(yhi-ylo)*(bottom-top) }

	yticks := niceTicks(ylo, yhi, 5)
	for _, v := range yticks {
		y := py(v)
		fmt.Fprintf(w, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e6e9ec"/>`, coord(left), coord(right), coord(y), coord(y))
		fmt.Fprintf(w, `<text class="y-tick" x="%s" y="%s" text-anchor="end" fill="#3a444d">%s</text>`+"\n",
			coord(left-6), coord(y+4), formatTick(v, tickStep(yticks)))
	}
	xticks := niceTicks(xlo, xhi, 6)
	for _, v := range xticks {
		x := px(v)
		fmt.Fprintf(w, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#3a444d"/>`, coord(x), coord(x), coord(bottom), coord(bottom+4))
		fmt.Fprintf(w, `<text class="x-tick" x="%s" y="%s" text-anchor="middle" fill="#3a444d">%s</text>`+"\n",
			coord(x), coord(bottom+17), formatTick(v, tickStep(xticks)))
	}
	fmt.Fprintf(w, `<text x="%s" y="%s" text-anchor="middle" fill="#5b6670">step</text>`+"\n", coord((left+right)/2), coord(bottom+34))

	writeEpochStarts(w, records, stride, px, top, bottom)
	writeSeries(w, "raw", p.color, 0.3, 1, steps, values, px, py)
	writeSeries(w, "average", p.color, 1, 1.8, steps, movingAverage(values, window), px, py)
	fmt.Fprintln(w, `</g>`)
}

// writeEpochStarts draws a dashed line midway between the last step of an
// epoch and the first of the next, for every stride-th epoch (so that long
// runs keep a readable grid), labelled with the new epoch where there is room
// for the label.
func writeEpochStarts(w io.Writer, records []runfolder.LogRecord, stride int, px func(float64) float64, top, bottom float64) {
	lastLabel := math.Inf(-1)
	for i := 1; i < len(records); i++ {
		if records[i].Epoch == records[i-1].Epoch || records[i].Epoch%stride != 0 && stride > 1 {
			continue
		}
		x := px((float64(records[i-1].Step) + float64(records[i].Step)) / 2)
		fmt.Fprintf(w, `<line class="epoch" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#9aa5b0" stroke-dasharray="3,3"/>`,
			coord(x), coord(x), coord(top), coord(bottom))
		if x-lastLabel >= 34 {
			fmt.Fprintf(w, `<text x="%s" y="%s" font-size="9" fill="#7b8690">e%d</text>`, coord(x+2), coord(top+10), records[i].Epoch)
			lastLabel = x
		}
		fmt.Fprintln(w)
	}
}

// maxEpochLines bounds the dashed epoch lines of a panel.
const maxEpochLines = 12

// epochStride is the smallest of 1, 2, 5, 10, 20, 50, … that keeps the
// epoch lines of records within maxEpochLines.
func epochStride(records []runfolder.LogRecord) int {
	starts := 0
	for i := 1; i < len(records); i++ {
		if records[i].Epoch != records[i-1].Epoch {
			starts++
		}
	}
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			if stride := m * scale; starts/stride <= maxEpochLines {
				return stride
			}
		}
	}
}

// writeSeries draws values over steps as polylines broken at every NaN; a
// finite value between two gaps becomes a dot, which a polyline of one point
// would not show.
func writeSeries(w io.Writer, class, color string, opacity, strokeWidth float64, steps, values []float64, px, py func(float64) float64) {
	var run []string
	flush := func() {
		switch {
		case len(run) == 1:
			x, y, _ := strings.Cut(run[0], ",")
			fmt.Fprintf(w, `<circle class="%s-point" cx="%s" cy="%s" r="%s" fill="%s" fill-opacity="%g"/>`+"\n",
				class, x, y, coord(strokeWidth+0.8), color, opacity)
		case len(run) > 1:
			fmt.Fprintf(w, `<polyline class="%s" fill="none" stroke="%s" stroke-opacity="%g" stroke-width="%g" stroke-linejoin="round" points="%s"/>`+"\n",
				class, color, opacity, strokeWidth, strings.Join(run, " "))
		}
		run = run[:0]
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			flush()
			continue
		}
		run = append(run, coord(px(steps[i]))+","+coord(py(v)))
	}
	flush()
}

// movingAverage is the mean of the finite values among the window values
// centred on each one (fewer at the ends); NaN where the value itself is not
// finite, so that gaps stay gaps.
func movingAverage(values []float64, window int) []float64 {
	sum := make([]float64, len(values)+1)
	count := make([]int, len(values)+1)
	for i, v := range values {
		sum[i+1], count[i+1] = sum[i], count[i]
		if metrics.IsFinite(v) {
			sum[i+1] += v
			count[i+1]++
		}
	}
	half := window / 2
	out := make([]float64, len(values))
	for i, v := range values {
		if !metrics.IsFinite(v) {
			out[i] = math.NaN()
			continue
		}
		lo, hi := max(0, i-half), min(len(values), i+half+1)
		out[i] = (sum[hi] - sum[lo]) / float64(count[hi]-count[lo])
	}
	return out
}

// span is the least and greatest finite value of xs; NaN, NaN if it has none.
func span(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		if metrics.IsFinite(x) {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if lo > hi {
		return math.NaN(), math.NaN()
	}
	return lo, hi
}

// niceTicks are the multiples of a round step (1, 2 or 5 times a power of
// ten) within [lo, hi], about target of them.
func niceTicks(lo, hi float64, target int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(target)
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*step >= raw {
			step *= f
			break
		}
	}
	var ticks []float64
	// Ticks are integer multiples of step, so they carry no accumulated
	// rounding; the tolerance keeps an end that equals a tick. The count is
	// bounded: for values of a diverged run (1e20 apart by a few ulps) k is
	// beyond float64's integers and k+1 == k.
	k := math.Ceil(lo/step - 1e-9)
	for i := 0; i <= 2*target && (k+float64(i))*step <= hi+step*1e-9; i++ {
		ticks = append(ticks, (k+float64(i))*step)
	}
	return ticks
}

// tickStep is the spacing of ticks made by niceTicks; 1 for a single tick.
func tickStep(ticks []float64) float64 {
	if len(ticks) < 2 {
		return 1
	}
	return ticks[1] - ticks[0]
}

// formatTick writes a tick value with as many decimals as its step needs.
func formatTick(v, step float64) string {
	decimals := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// coord writes a pixel coordinate to a tenth of a pixel.
func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// EpochMeans condenses a log to one record per epoch: the mean of each loss
// part over the epoch's finite values (NaN when it has none) and of the
// subgraph counts, at the epoch's last step. A plot of it stays small however
// long the run.
func EpochMeans(records []runfolder.LogRecord) []runfolder.LogRecord {
	var out []runfolder.LogRecord
	for lo := 0; lo < len(records); {
		hi := lo
		for hi < len(records) && records[hi].Epoch == records[lo].Epoch {
			hi++
		}
		epoch := records[lo:hi]
		mean := func(get func(runfolder.LogRecord) metrics.Value) metrics.Value {
			var sum float64
			n := 0
			for _, r := range epoch {
				if v := float64(get(r)); metrics.IsFinite(v) {
					sum += v
					n++
				}
			}
			if n == 0 {
				return metrics.Value(math.NaN())
			}
			return metrics.Value(sum / float64(n))
		}
		var subgraphs int64
		for _, r := range epoch {
			subgraphs += r.Subgraphs
		}
		last := epoch[len(epoch)-1]
		parts := make([]runfolder.LossPart, len(last.Parts))
		for i, p := range last.Parts {
			parts[i] = runfolder.LossPart{Name: p.Name, Value: mean(func(r runfolder.LogRecord) metrics.Value { return r.Part(p.Name) })}
		}
		out = append(out, runfolder.LogRecord{Parts: parts,
			Step: last.Step, Epoch: last.Epoch, LR: last.LR,
			Loss:          mean(func(r runfolder.LogRecord) metrics.Value { return r.Loss }),
			MoleculesPerS: mean(func(r runfolder.LogRecord) metrics.Value { return r.MoleculesPerS }),
			Subgraphs:     int64(math.Round(float64(subgraphs) / float64(len(epoch)))),
		})
		lo = hi
	}
	return out
}
