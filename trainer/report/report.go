package report

import (
	"cmp"
	"embed"
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

// templates are the pages' HTML, kept as files beside the code.
//
//go:embed templates
var templates embed.FS

// motifTemplate renders the motif report (templates/motifs.html).
var motifTemplate = template.Must(template.New("motifs.html").Funcs(template.FuncMap{
	"px":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"fixed": func(digits int, v float64) string { return fmt.Sprintf("%.*f", digits, v) },
	"atoms": joinInts,
	"P":     formatP,
	"share": atomShare,
	"pct":   formatShare,
}).ParseFS(templates, "templates/motifs.html"))

// joinInts lists atom indices for a caption: "0, 1, 5".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
