package report

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
)

// Size of each molecule drawing in the motif report, in CSS pixels.
const depictWidth, depictHeight = 240, 180

// WriteHTML writes the report as one self-contained HTML page: inline CSS and
// SVG, no scripts and no external references, so that it can be mailed or
// archived as one file. Molecules are drawn by RDKit with the subgraph's atoms
// highlighted; without RDKit or SMILES the page says so and lists the atoms.
func (r *MotifReport) WriteHTML(w io.Writer) error {
	return motifTemplate.Execute(w, r.htmlPage())
}

// htmlPage is what the template shows, computed so that the template only
// lays it out.
type htmlPage struct {
	R          *MotifReport
	NoDrawings string // why no molecule is drawn; "" when they are
	Histogram  histogramSVG
	Sections   []htmlMotif // motifs with subgraphs, largest first
	Empty      []MotifSummary
	// FigureWidth is the narrowest a grid cell may be; drawings scale to
	// their cell's width.
	FigureWidth int
}

// htmlMotif is one motif's section.
type htmlMotif struct {
	MotifSummary
	// Group names the dominant planted group; "" without groups or when
	// all the motif's atoms are linkers.
	Group   string
	Figures []htmlFigure
}

// htmlFigure is one subgraph drawn in its molecule.
type htmlFigure struct {
	MotifSubgraph
	SVG     template.HTML // RDKit's drawing; "" when not drawn
	Problem string        // why it is not drawn
}

// htmlPage lays out the page and draws the closest subgraphs.
func (r *MotifReport) htmlPage() htmlPage {
	p := htmlPage{R: r, Histogram: newHistogram(r), FigureWidth: 190}
	if !r.SMILES {
		p.NoDrawings = "the dataset has no SMILES (mapping/mol.csv.gz), so no molecule is drawn; subgraphs are listed by their atoms"
	} else if err := rdkit.Load(); err != nil {
		p.NoDrawings = fmt.Sprintf("RDKit is unavailable, so no molecule is drawn (%v)", err)
	}
	order := slices.Clone(r.Motifs)
	slices.SortStableFunc(order, func(a, b MotifSummary) int { return cmp.Compare(b.Atoms, a.Atoms) })
	for _, s := range order {
		if s.Subgraphs == 0 {
			p.Empty = append(p.Empty, s)
			continue
		}
		sec := htmlMotif{MotifSummary: s}
		if r.Groups != nil && s.DominantGroup >= 0 {
			sec.Group = r.Groups[s.DominantGroup]
		}
		for _, sg := range s.Closest {
			f := htmlFigure{MotifSubgraph: sg}
			if p.NoDrawings == "" {
				svg, err := rdkit.DepictSVG(sg.SMILES, sg.Atoms, depictWidth, depictHeight)
				if err != nil {
					f.Problem = err.Error()
				} else {
					f.SVG = inlineSVG(svg)
				}
			}
			sec.Figures = append(sec.Figures, f)
		}
		p.Sections = append(p.Sections, sec)
	}
	return p
}

// inlineSVG makes RDKit's SVG document fit inside HTML: the XML declaration
// before the <svg> element has no place there.
func inlineSVG(doc string) template.HTML {
	if i := strings.Index(doc, "<svg"); i >= 0 {
		doc = doc[i:]
	}
	// RDKit's output is trusted markup: it holds element symbols and
	// coordinates, never text from the dataset.
	return template.HTML(doc)
}

// atomShare writes n as a percentage of total.
func atomShare(n, total int) string {
	if total == 0 {
		return "0%"
	}
	return formatShare(float64(n) / float64(total))
}

// formatShare writes a fraction as a whole percentage.
func formatShare(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

// formatP writes a probability so that values near 1, where a trained
// model's P usually lies, stay distinguishable: 1 − 3.2e-07 rather than 1.0000.
func formatP(logP float64) string {
	p := math.Exp(logP)
	switch rest := -math.Expm1(logP); {
	case p < 0.99:
		return fmt.Sprintf("%.3f", p)
	case rest <= 0:
		return "1"
	default:
		return fmt.Sprintf("1 − %.1e", rest)
	}
}

// histogramSVG is the atoms-per-motif bar chart, laid out in pixels.
type histogramSVG struct {
	Width, Height  float64
	Left, Top      float64 // the plot area's top left corner
	Right, Bottom  float64 // and its bottom right one
	TitleX, TitleY float64 // the x axis' title
	Bars           []histogramBar
	YTicks         []axisTick
	TickLabelX     float64 // right end of the y tick labels
	Label          bool    // room to write each bar's count above it
}

// histogramBar is one motif's bar.
type histogramBar struct {
	Motif               int
	Atoms               int
	X, Y, W, H          float64
	LabelX              float64
	ShowMotif, HasLink  bool
	CountY, MotifLabelY float64
}

// axisTick is a tick at pixel position Pos labelled Text, whose baseline
// is at LabelPos.
type axisTick struct {
	Pos, LabelPos float64
	Text          string
}

// newHistogram lays out one bar per motif, in motif order, heights to scale
// from 0 to the largest count.
func newHistogram(r *MotifReport) histogramSVG {
	k := len(r.Motifs)
	slot := math.Max(4, math.Min(60, 1100/float64(max(k, 1))))
	const plotH = 220
	h := histogramSVG{Left: 64, Top: 20, Label: slot >= 28}
	h.Right, h.Bottom = h.Left+slot*float64(k), h.Top+plotH
	h.Width, h.Height = h.Right+20, h.Bottom+48
	h.TitleX, h.TitleY, h.TickLabelX = (h.Left+h.Right)/2, h.Height-6, h.Left-6
	most := 1
	for _, s := range r.Motifs {
		most = max(most, s.Atoms)
	}
	scale := plotH / float64(most)
	every := int(math.Ceil(22 / slot)) // motif labels at least 22 px apart
	for i, s := range r.Motifs {
		bh := float64(s.Atoms) * scale
		x := h.Left + float64(i)*slot
		h.Bars = append(h.Bars, histogramBar{
			Motif: s.Motif, Atoms: s.Atoms,
			X: x + slot*0.12, Y: h.Bottom - bh, W: slot * 0.76, H: bh,
			LabelX: x + slot/2, ShowMotif: i%every == 0, HasLink: s.Subgraphs > 0,
			CountY: h.Bottom - bh - 4, MotifLabelY: h.Bottom + 16,
		})
	}
	ticks := niceTicks(0, float64(most), 5)
	for _, v := range ticks {
		if v != math.Trunc(v) {
			continue // counts of atoms are whole
		}
		y := h.Bottom - v*scale
		h.YTicks = append(h.YTicks, axisTick{Pos: y, LabelPos: y + 4, Text: formatTick(v, tickStep(ticks))})
	}
	return h
}

var motifTemplate = template.Must(template.New("motifs").Funcs(template.FuncMap{
	"px":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"fixed": func(digits int, v float64) string { return fmt.Sprintf("%.*f", digits, v) },
	"atoms": joinInts,
	"P":     formatP,
	"share": atomShare,
	"pct":   formatShare,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Motifs of {{.R.Run}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a; margin: 24px 32px; max-width: 1400px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 0 0 4px; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 0 0 16px; }
dl.facts dt { color: #5b6670; }
dl.facts dd { margin: 0; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
.note { background: #fff6dc; border: 1px solid #e8d08a; padding: 6px 10px; border-radius: 4px; }
table.summary { border-collapse: collapse; margin: 8px 0 24px; }
table.summary th, table.summary td { padding: 3px 10px; border-bottom: 1px solid #e3e6e9; text-align: right; }
table.summary th:last-child, table.summary td:last-child { text-align: left; }
table.summary th { background: #f3f5f7; }
section.empty-motifs p { color: #3a444d; max-width: 1100px; }
section.motif { border-top: 2px solid #d8dde2; padding: 14px 0 18px; }
section.motif p { margin: 0 0 10px; color: #3a444d; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax({{.FigureWidth}}px, 1fr)); gap: 10px; }
figure { margin: 0; border: 1px solid #e3e6e9; border-radius: 4px; padding: 4px; background: #fff; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 12px; color: #3a444d; padding: 2px 4px; overflow-wrap: anywhere; }
figcaption .problem { color: #a3261b; }
svg.histogram text { font-size: 11px; fill: #3a444d; }
svg.histogram .bar { fill: #3f7cbf; }
svg.histogram .bar.empty { fill: #b9c2cb; }
svg.histogram .grid-line { stroke: #e3e6e9; }
</style>
</head>
<body>
<h1>Motifs of <code>{{.R.Run}}</code></h1>
<dl class="facts">
<dt>checkpoint</dt><dd><code>{{.R.Checkpoint}}</code>, step {{.R.Step}}</dd>
<dt>dataset</dt><dd><code>{{.R.Data}}</code> ({{.R.Dataset}})</dd>
<dt>motifs</dt><dd>K = {{.R.Model.Motifs}}; subgraphs of at least η = {{.R.Model.Eta}} atoms; τ = {{.R.Model.Tau}}</dd>
<dt>molecules analysed</dt><dd>{{.R.Molecules}} of the {{.R.Usable}} pre-training can use, in batches of {{.R.BatchSize}} (Sinkhorn balances motifs within each batch)</dd>
<dt>atoms</dt><dd>{{.R.Atoms}}</dd>
<dt>subgraphs</dt><dd>{{len .R.Subgraphs}}</dd>
{{- if .R.Groups}}
<dt>metrics.NMI with planted groups</dt><dd>{{fixed 3 .R.NMI}}; before pre-training (the run's initial model) {{fixed 3 .R.UntrainedNMI}} (atoms of a planted group; linker atoms left out)</dd>
{{- end}}
<dt>closeness</dt><dd>P: the probability softmax<sub>k</sub>(cos(W<sub>s</sub> s, M<sub>k</sub>)/τ) gives the subgraph's own motif; cos: the cosine itself</dd>
</dl>
{{- if .NoDrawings}}
<p class="note">{{.NoDrawings}}.</p>
{{- end}}

<h2>Atoms per motif</h2>
{{with .Histogram -}}
<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{{px .Width}}" height="{{px .Height}}" viewBox="0 0 {{px .Width}} {{px .Height}}" role="img" aria-label="atoms per motif">
{{- range .YTicks}}
<line class="grid-line" x1="{{px $.Histogram.Left}}" x2="{{px $.Histogram.Right}}" y1="{{px .Pos}}" y2="{{px .Pos}}"/>
<text x="{{px $.Histogram.TickLabelX}}" y="{{px .LabelPos}}" text-anchor="end">{{.Text}}</text>
{{- end}}
{{- range .Bars}}
{{- if .HasLink}}
<a href="#motif-{{.Motif}}"><rect class="bar" x="{{px .X}}" y="{{px .Y}}" width="{{px .W}}" height="{{px .H}}"><title>motif {{.Motif}}: {{.Atoms}} atoms</title></rect></a>
{{- else}}
<rect class="bar empty" x="{{px .X}}" y="{{px .Y}}" width="{{px .W}}" height="{{px .H}}"><title>motif {{.Motif}}: {{.Atoms}} atoms, no subgraph</title></rect>
{{- end}}
{{- if $.Histogram.Label}}
<text x="{{px .LabelX}}" y="{{px .CountY}}" text-anchor="middle">{{.Atoms}}</text>
{{- end}}
{{- if .ShowMotif}}
<text x="{{px .LabelX}}" y="{{px .MotifLabelY}}" text-anchor="middle">{{.Motif}}</text>
{{- end}}
{{- end}}
<line x1="{{px .Left}}" x2="{{px .Right}}" y1="{{px .Bottom}}" y2="{{px .Bottom}}" stroke="#3a444d"/>
<text x="{{px .TitleX}}" y="{{px .TitleY}}" text-anchor="middle">motif (grey: forms no subgraph)</text>
</svg>
{{- end}}

<table class="summary">
<tr><th>motif</th><th>atoms</th><th>share</th><th>subgraphs</th><th>mean size</th>
{{- if .R.Groups}}<th>linker atoms</th><th>dominant planted group (share of its grouped atoms)</th>{{end}}</tr>
{{- range .Sections}}
<tr><td><a href="#motif-{{.Motif}}">{{.Motif}}</a></td><td>{{.Atoms}}</td><td>{{share .Atoms $.R.Atoms}}</td><td>{{.Subgraphs}}</td><td>{{fixed 1 .MeanSize}}</td>
{{- if $.R.Groups}}<td>{{pct .LinkerShare}}</td><td>{{if .Group}}{{.Group}} ({{pct .DominantShare}}){{else}}none: linkers only{{end}}</td>{{end}}</tr>
{{- end}}
</table>
{{- if .Empty}}
<section class="empty-motifs">
<h2>Motifs without subgraphs</h2>
<p>{{range $i, $s := .Empty}}{{if $i}}, {{end}}motif {{$s.Motif}} ({{$s.Atoms}} atoms){{end}}: none of them has η = {{.R.Model.Eta}} or more atoms in any one molecule.</p>
</section>
{{- end}}

{{range .Sections -}}
<section class="motif" id="motif-{{.Motif}}">
<h2>Motif {{.Motif}}</h2>
<p>{{.Atoms}} atoms ({{share .Atoms $.R.Atoms}} of those analysed) in {{.Subgraphs}} subgraphs of {{fixed 1 .MeanSize}} atoms on average.
{{- if .Group}} Of its atoms in a planted group, {{pct .DominantShare}} come from {{.Group}}; {{pct .LinkerShare}} of all its atoms are linkers.
{{- else if $.R.Groups}} All its atoms are linkers.{{end}}
{{- if .Figures}} The {{len .Figures}} subgraphs closest to it:{{end}}</p>
<div class="grid">
{{- range .Figures}}
<figure>
{{- if .SVG}}
{{.SVG}}
{{- end}}
<figcaption><b>molecule {{.Molecule}}</b><br>P = {{P .LogP}} · cos = {{fixed 3 .Cosine}}<br>atoms {{atoms .Atoms}}
{{- if .Problem}}<br><span class="problem">not drawn: {{.Problem}}</span>{{end}}</figcaption>
</figure>
{{- end}}
</div>
</section>
{{end -}}
</body>
</html>
`))

// joinInts lists atom indices for a caption: "0, 1, 5".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
