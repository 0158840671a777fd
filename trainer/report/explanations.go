package report

import (
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/infer"
)

// Size of each molecule drawing on the explanation page, in CSS pixels.
const explainWidth, explainHeight = 300, 220

// ExplanationPage is what the explanation page shows: a motif model's
// explanations of the first molecules of an input, and what each motif
// stands for.
type ExplanationPage struct {
	Model     string // the model's name or file
	Objective string // its pre-training objective
	Data      string // the input explained, as the page names it
	Rows      int    // input rows explained
	Invalid   int    // of those, rows without an explanation
	// Molecules are the explanations drawn, the input's first rows.
	Molecules []infer.Explanation
	// Usage is each motif's atoms and commonest fragments in the whole
	// input; Legend the same in the model's pre-training data (LegendData),
	// nil when the model does not carry it.
	Usage      []model.MotifUsage
	Legend     []model.MotifUsage
	LegendData string
}

// WriteExplanations writes the page as one self-contained HTML document
// (inline CSS and SVG, no scripts, no external references): a legend, one
// row per motif with its colour, its share of the input's atoms and its
// commonest fragments, then each molecule drawn by RDKit with its atoms
// coloured by their motif and its pieces listed. Without RDKit the page says
// so and lists the atoms' motifs.
func WriteExplanations(w io.Writer, p ExplanationPage) error {
	return explainTemplate.Execute(w, p.htmlPage())
}

// explainHTML is what the template shows.
type explainHTML struct {
	ExplanationPage
	NoDrawings string // why no molecule is drawn; "" when they are
	Motifs     []explainMotif
	Figures    []explainFigure
}

// explainMotif is one row of the legend.
type explainMotif struct {
	Motif    int
	Colour   template.CSS
	Share    string // of the input's atoms
	Here     []model.FragmentCount
	Training []model.FragmentCount
}

// explainFigure is one molecule.
type explainFigure struct {
	infer.Explanation
	SVG     template.HTML
	Problem string
	Pieces  []explainPiece
}

type explainPiece struct {
	infer.Piece
	Colour template.CSS
}

func (p ExplanationPage) htmlPage() explainHTML {
	h := explainHTML{ExplanationPage: p}
	h.LegendData = inputfile.Shorten(p.LegendData)
	var total int64
	for _, u := range p.Usage {
		total += u.Atoms
	}
	for i, u := range p.Usage {
		m := explainMotif{Motif: u.Motif, Colour: template.CSS(cssColour(MotifColour(u.Motif))), Here: u.Fragments}
		if total > 0 {
			m.Share = fmt.Sprintf("%.1f%%", 100*float64(u.Atoms)/float64(total))
		}
		if i < len(p.Legend) && p.Legend[i].Motif == u.Motif {
			m.Training = fromFile(p.Legend[i].Fragments)
		}
		h.Motifs = append(h.Motifs, m)
	}
	if err := rdkit.Load(); err != nil {
		h.NoDrawings = "RDKit is not available (" + err.Error() + "), so no molecule is drawn; each atom's motif is listed"
	}
	for _, e := range p.Molecules {
		f := explainFigure{Explanation: e}
		for _, piece := range e.Pieces {
			f.Pieces = append(f.Pieces, explainPiece{Piece: piece, Colour: template.CSS(cssColour(MotifColour(piece.Motif)))})
		}
		if e.Error == "" && h.NoDrawings == "" && e.SMILES != "" {
			colours := make(map[int]rdkit.Colour, len(e.Motifs))
			for a, k := range e.Motifs {
				colours[a] = MotifColour(k)
			}
			svg, err := rdkit.DepictSVGColoured(e.SMILES, colours, explainWidth, explainHeight)
			if err != nil {
				f.Problem = err.Error()
			} else {
				f.SVG = inlineSVG(svg)
			}
		}
		h.Figures = append(h.Figures, f)
	}
	return h
}

// fromFile is what the page draws of a legend's fragments read from a
// file (a motif model's description, which anyone may write): as many as
// the program's own legends list, each SMILES quoted as briefly as any
// file's content in a message.
func fromFile(fragments []model.FragmentCount) []model.FragmentCount {
	out := make([]model.FragmentCount, 0, min(len(fragments), model.LegendFragments))
	for _, f := range fragments[:min(len(fragments), model.LegendFragments)] {
		out = append(out, model.FragmentCount{SMILES: inputfile.Shorten(f.SMILES), Count: f.Count})
	}
	return out
}

// motifPalette is Kelly's sequence of colours of maximum contrast, without
// its white and black: the first 20 motifs take one each.
var motifPalette = []uint32{
	0xF3C300, 0x875692, 0xF38400, 0xA1CAF1, 0xBE0032, 0xC2B280, 0x848482, 0x008856, 0xE68FAC, 0x0067A5,
	0xF99379, 0x604E97, 0xF6A600, 0xB3446C, 0xDCD300, 0x882D17, 0x8DB600, 0x654522, 0xE25822, 0x2B3D26,
}

// MotifColour is motif k's colour on explanation pages: Kelly's colours for
// the first 20, then hues a golden angle apart.
func MotifColour(k int) rdkit.Colour {
	if k < len(motifPalette) {
		c := motifPalette[k]
		return rdkit.Colour{float32(c>>16&0xff) / 255, float32(c>>8&0xff) / 255, float32(c&0xff) / 255}
	}
	hue := math.Mod(float64(k-len(motifPalette))*137.508, 360)
	return hsl(hue, 0.6, 0.55)
}

// hsl converts a hue (degrees), saturation and lightness to RGB.
func hsl(h, s, l float64) rdkit.Colour {
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := l - c/2
	var r, g, b float64
	switch {
	case h < 60:
		r, g = c, x
	case h < 120:
		r, g = x, c
	case h < 180:
		g, b = c, x
	case h < 240:
		g, b = x, c
	case h < 300:
		r, b = x, c
	default:
		r, b = c, x
	}
	return rdkit.Colour{float32(r + m), float32(g + m), float32(b + m)}
}

// cssColour writes c as #rrggbb.
func cssColour(c rdkit.Colour) string {
	b := func(v float32) int { return int(math.Round(float64(v) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", b(c[0]), b(c[1]), b(c[2]))
}

// explainTemplate renders the explanation page (templates/explanations.html).
var explainTemplate = template.Must(template.New("explanations.html").Funcs(template.FuncMap{
	"atoms": joinInts,
}).ParseFS(templates, "templates/explanations.html"))
