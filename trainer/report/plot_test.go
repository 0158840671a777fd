package report_test

import (
	"bytes"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"

	"github.com/micrograph/micrograph/trainer/report"
)

// svgNode is any element of an SVG document.
type svgNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []svgNode  `xml:",any"`
}

func (n svgNode) attr(key string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == key {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) num(t *testing.T, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(key), 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", n.XMLName.Local, key, n.attr(key), err)
	}
	return v
}

// all lists the elements under n (n included) named name with class class
// ("" for any).
func (n svgNode) all(name, class string) []svgNode {
	var out []svgNode
	if n.XMLName.Local == name && (class == "" || n.attr("class") == class) {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.all(name, class)...)
	}
	return out
}

// plotPanel is a panel of a loss plot and its plot area's edges.
type plotPanel struct {
	svgNode
	left, top, right, bottom float64
}

// parseLossPlot checks that doc is well-formed XML and returns its panels
// by name.
func parseLossPlot(t *testing.T, doc []byte) (svgNode, map[string]plotPanel) {
	t.Helper()
	var root svgNode
	if err := xml.Unmarshal(doc, &root); err != nil {
		t.Fatalf("the plot is not well-formed XML: %v", err)
	}
	panels := map[string]plotPanel{}
	for _, g := range root.all("g", "panel") {
		areas := g.all("rect", "plot-area")
		if len(areas) != 1 {
			t.Fatalf("panel %s has %d plot areas", g.attr("id"), len(areas))
		}
		a := areas[0]
		p := plotPanel{svgNode: g, left: a.num(t, "x"), top: a.num(t, "y")}
		p.right, p.bottom = p.left+a.num(t, "width"), p.top+a.num(t, "height")
		panels[strings.TrimPrefix(g.attr("id"), "panel-")] = p
	}
	return root, panels
}

// polylinePoints reads a polyline's points attribute.
func polylinePoints(t *testing.T, n svgNode) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, p := range strings.Fields(n.attr("points")) {
		x, y, _ := strings.Cut(p, ",")
		fx, err1 := strconv.ParseFloat(x, 64)
		fy, err2 := strconv.ParseFloat(y, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("point %q", p)
		}
		out = append(out, [2]float64{fx, fy})
	}
	return out
}

func nearPixel(a, b float64) bool { return math.Abs(a-b) <= 0.051 } // coordinates are written to 0.1 px

func plotRecord(step int64, epoch int, loss, nodeMot float64, subgraphs int64) runfolder.LogRecord {
	return runfolder.LogRecord{Step: step, Epoch: epoch, Loss: metrics.Value(loss),
		Parts: parts(nodeMot, 1, math.NaN(), loss*2), Subgraphs: subgraphs}
}

// A hand-written log of four steps over two epochs: the points land where
// the panel's edges put them (the least value on the bottom edge, the
// greatest on the top, first and last steps on the left and right), a NaN
// breaks the line, a point alone between gaps is a dot, a constant series
// sits mid-panel, a series without finite values says so, and the epoch
// boundary lies midway between steps 20 and 30.
func TestWriteLossPlot(t *testing.T) {
	nan := math.NaN()
	records := []runfolder.LogRecord{
		plotRecord(10, 1, 2, 1, 5),
		plotRecord(20, 1, 5, nan, 9),
		plotRecord(30, 2, 3.5, 4, 7),
		plotRecord(40, 2, 2, 2, 5),
	}
	var buf bytes.Buffer
	if err := report.WriteLossPlot(&buf, records, `run <&> "quoted"`); err != nil {
		t.Fatal(err)
	}
	root, panels := parseLossPlot(t, buf.Bytes())
	names := []string{"loss", "node_mot", "mot_sub", "reg", "contra", "subgraphs"}
	if len(panels) != len(names) {
		t.Fatalf("%d panels, want %d", len(panels), len(names))
	}
	for _, name := range names {
		p, ok := panels[name]
		if !ok || !(p.left < p.right && p.top < p.bottom) {
			t.Fatalf("panel %s missing or empty: %+v", name, p)
		}
	}
	if !strings.Contains(root.all("text", "")[0].Text, `run <&> "quoted"`) {
		t.Errorf("title %q", root.all("text", "")[0].Text)
	}

	// loss: 2, 5, 3.5, 2 at steps 10..40.
	loss := panels["loss"]
	w, h := loss.right-loss.left, loss.bottom-loss.top
	raw := loss.all("polyline", "raw")
	if len(raw) != 1 {
		t.Fatalf("loss: %d raw polylines, want 1", len(raw))
	}
	want := [][2]float64{{loss.left, loss.bottom}, {loss.left + w/3, loss.top}, {loss.left + 2*w/3, loss.bottom - h/2}, {loss.right, loss.bottom}}
	got := polylinePoints(t, raw[0])
	if len(got) != len(want) {
		t.Fatalf("loss points %v, want %v", got, want)
	}
	for i := range want {
		if !nearPixel(got[i][0], want[i][0]) || !nearPixel(got[i][1], want[i][1]) {
			t.Errorf("loss point %d at %v, want %v", i, got[i], want[i])
		}
	}
	// Four values are too few to smooth: the average is the values.
	if avg := loss.all("polyline", "average"); len(avg) != 1 || avg[0].attr("points") != raw[0].attr("points") {
		t.Errorf("loss average %v, want the raw points", avg)
	}
	var ticks []string
	for _, n := range loss.all("text", "y-tick") {
		ticks = append(ticks, n.Text)
	}
	if strings.Join(ticks, " ") != "2 3 4 5" {
		t.Errorf("loss y ticks %q, want 2 3 4 5", ticks)
	}

	// node_mot: 1, NaN, 4, 2: a dot at step 10, then a line from step 30.
	nm := panels["node_mot"]
	w, h = nm.right-nm.left, nm.bottom-nm.top
	dots, lines := nm.all("circle", "raw-point"), nm.all("polyline", "raw")
	if len(dots) != 1 || !nearPixel(dots[0].num(t, "cx"), nm.left) || !nearPixel(dots[0].num(t, "cy"), nm.bottom) {
		t.Errorf("node_mot: dots %v, want one at the bottom left corner", dots)
	}
	if len(lines) != 1 {
		t.Fatalf("node_mot: %d lines, want 1", len(lines))
	}
	got = polylinePoints(t, lines[0])
	want = [][2]float64{{nm.left + 2*w/3, nm.top}, {nm.right, nm.bottom - h/3}}
	if len(got) != 2 || !nearPixel(got[0][0], want[0][0]) || !nearPixel(got[0][1], want[0][1]) || !nearPixel(got[1][0], want[1][0]) || !nearPixel(got[1][1], want[1][1]) {
		t.Errorf("node_mot line %v, want %v (nothing at step 20)", got, want)
	}

	// mot_sub is 1 throughout: mid-height.
	ms := panels["mot_sub"]
	for _, pt := range polylinePoints(t, ms.all("polyline", "raw")[0]) {
		if !nearPixel(pt[1], (ms.top+ms.bottom)/2) {
			t.Errorf("constant mot_sub at y %g, want %g", pt[1], (ms.top+ms.bottom)/2)
		}
	}

	// reg is NaN throughout: no line, a note.
	reg := panels["reg"]
	if len(reg.all("polyline", "")) != 0 || len(reg.all("circle", "")) != 0 || !strings.Contains(buf.String(), "no finite value") {
		t.Errorf("reg without finite values drew %d lines", len(reg.all("polyline", "")))
	}

	// One epoch boundary, midway between steps 20 and 30, in every drawn panel.
	for _, name := range []string{"loss", "node_mot", "contra", "subgraphs"} {
		p := panels[name]
		epochs := p.all("line", "epoch")
		x := p.left + (25.0-10)/30*(p.right-p.left)
		if len(epochs) != 1 || !nearPixel(epochs[0].num(t, "x1"), x) || !nearPixel(epochs[0].num(t, "y1"), p.top) || !nearPixel(epochs[0].num(t, "y2"), p.bottom) {
			t.Errorf("%s: epoch lines %v, want one at x=%.1f", name, epochs, x)
		}
	}
}

// A long run marks only every stride-th epoch: 150 epochs of one logged step
// each (step 10e in epoch e) have 149 epoch starts; strides 1, 2, 5 and 10
// would leave more than 12 lines, 20 leaves 7 (epochs 20, 40, …, 140), each
// midway between the last step of the epoch before and the first of its own.
func TestWriteLossPlotEpochStride(t *testing.T) {
	var records []runfolder.LogRecord
	for e := 1; e <= 150; e++ {
		records = append(records, plotRecord(int64(10*e), e, float64(e), 1, 1))
	}
	var buf bytes.Buffer
	if err := report.WriteLossPlot(&buf, records, "long"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "dashed: epoch starts, every 20 epochs.") {
		t.Error("the subtitle does not give the stride of the epoch lines")
	}
	_, panels := parseLossPlot(t, buf.Bytes())
	p := panels["loss"]
	lines := p.all("line", "epoch")
	if len(lines) != 7 {
		t.Fatalf("%d epoch lines, want 7", len(lines))
	}
	for i, l := range lines {
		e := 20 * (i + 1)
		step := float64(10*e) - 5 // midway between steps 10(e−1) and 10e
		x := p.left + (step-10)/(1500-10)*(p.right-p.left)
		if !nearPixel(l.num(t, "x1"), x) {
			t.Errorf("epoch line %d at x=%g, want %.1f (epoch %d)", i, l.num(t, "x1"), x, e)
		}
	}
}

// The moving average over a longer log: values alternating 0 and 3, every
// point averaged with its two neighbours (one at the ends).
func TestWriteLossPlotMovingAverage(t *testing.T) {
	var records []runfolder.LogRecord
	for i := range 100 {
		records = append(records, plotRecord(int64(i+1), 1, float64(i%2*3), 1, 1))
	}
	var buf bytes.Buffer
	if err := report.WriteLossPlot(&buf, records, "average"); err != nil {
		t.Fatal(err)
	}
	_, panels := parseLossPlot(t, buf.Bytes())
	loss := panels["loss"]
	avg := loss.all("polyline", "average")
	if len(avg) != 1 {
		t.Fatalf("%d average lines", len(avg))
	}
	got := polylinePoints(t, avg[0])
	y := func(v float64) float64 { return loss.bottom - v/3*(loss.bottom-loss.top) }
	for i, pt := range got {
		want := 1.0 // 0 between two 3s: 2; 3 between two 0s: 1
		if i%2 == 0 {
			want = 2
		}
		if i == 0 || i == len(got)-1 {
			want = 1.5
		}
		if !nearPixel(pt[1], y(want)) {
			t.Errorf("average point %d at y %g, want %g (value %g)", i, pt[1], y(want), want)
		}
	}
	if len(got) != 100 {
		t.Errorf("%d average points, want 100", len(got))
	}
}

func TestWriteLossPlotEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := report.WriteLossPlot(&buf, nil, "empty"); err == nil || buf.Len() != 0 {
		t.Errorf("empty log: error %v, %d bytes written", err, buf.Len())
	}
}

func TestEpochMeans(t *testing.T) {
	nan := math.NaN()
	records := []runfolder.LogRecord{
		{Step: 1, Epoch: 1, Loss: 4, Parts: parts(1, 2, 3, nan), Subgraphs: 10},
		{Step: 2, Epoch: 1, Loss: 2, Parts: parts(3, nan, 5, nan), Subgraphs: 13},
		{Step: 3, Epoch: 2, Loss: 1, Parts: parts(0, 1, 1, 6), Subgraphs: 7},
	}
	got := report.EpochMeans(records)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	first, second := got[0], got[1]
	if first.Step != 2 || first.Epoch != 1 || first.Loss != 3 || first.Part("node_mot") != 2 || first.Part("mot_sub") != 2 || first.Part("reg") != 4 ||
		!math.IsNaN(float64(first.Part("contra"))) || first.Subgraphs != 12 {
		t.Errorf("epoch 1: %+v; want step 2, loss 3, node_mot 2, mot_sub 2 (NaN left out), reg 4, contra NaN, 12 subgraphs (11.5 rounded)", first)
	}
	if second.Step != 3 || second.Epoch != 2 || second.Loss != 1 || second.Part("contra") != 6 || second.Subgraphs != 7 {
		t.Errorf("epoch 2: %+v", second)
	}
}

// parts are a log record's parts under the paper objective.
func parts(nodeMot, motSub, reg, contra float64) []runfolder.LossPart {
	return []runfolder.LossPart{{Name: "node_mot", Value: metrics.Value(nodeMot)}, {Name: "mot_sub", Value: metrics.Value(motSub)},
		{Name: "reg", Value: metrics.Value(reg)}, {Name: "contra", Value: metrics.Value(contra)}}
}
