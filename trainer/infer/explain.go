package infer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// ExplainOptions say which molecules Explain explains, how, and what it
// keeps besides the rows it writes.
type ExplainOptions struct {
	Options
	// PageMolecules is how many of the first rows ExplainReport.Page keeps
	// for a page (trainer/report.WriteExplanations); 0 keeps none.
	PageMolecules int
}

// Explanation is what a motif model makes of one molecule (docs/method.md
// §14). Atoms are in RDKit's order, as the input SMILES lists them.
type Explanation struct {
	Row    int    `json:"row"` // input row, from 0
	SMILES string `json:"smiles"`
	// Error is why the row has no explanation (RDKit rejected its SMILES,
	// or it exceeds a size limit); the fields below are then empty.
	Error string `json:"error,omitempty"`
	// Motifs is each atom's motif: argmax_k cos(A h_i, M_k).
	Motifs []int `json:"atom_motifs,omitempty"`
	// Confidence is each atom's softmax_k(cos(A h_i, M_k)/τ) at its motif.
	Confidence []float64 `json:"atom_confidence,omitempty"`
	// Pieces are the molecule's motif-like subgraphs: the connected pieces
	// of atoms sharing a motif, by first atom.
	Pieces []Piece `json:"pieces,omitempty"`
	// Profile is the mean over the atoms of softmax_k(cos(A h_i, M_k)/τ):
	// K shares summing to 1, a descriptor of the molecule by its motifs.
	Profile []float64 `json:"profile,omitempty"`
}

// Piece is a connected set of atoms of one molecule assigned to one motif.
type Piece struct {
	Motif int   `json:"motif"`
	Atoms []int `json:"atoms"` // increasing
	// Fragment is the piece's canonical SMILES (the atoms and the bonds
	// between them); "" when the input has no SMILES or RDKit is missing.
	Fragment string `json:"fragment,omitempty"`
}

// ExplainReport is what an explanation pass did and saw.
type ExplainReport struct {
	Report
	// Usage is each motif's share of the atoms explained and its commonest
	// fragments among them (counted in bounded memory: exact while fewer
	// than legendCapacity distinct fragments of a motif were seen).
	Usage []model.MotifUsage
	// Page is the first PageMolecules rows' explanations, invalid rows
	// included.
	Page []Explanation
	// Fragments says whether pieces were named by their SMILES.
	Fragments bool
}

// legendCapacity is the counters kept per motif for its commonest fragments.
const legendCapacity = 256

// Explain writes to out one explanation per input row, in input order:
// .jsonl (JSON Lines, one Explanation per line) or .csv (row, smiles,
// atom_motifs, pieces, fragments, p_0 … p_{K−1}, error). The model runs where
// env says; the input streams, so memory does not grow with it.
func Explain(m *model.MotifModel, opt ExplainOptions, env runenv.Env, out string) (*ExplainReport, error) {
	return runenv.Run(env, opt.checkPrecision(env), func() (*ExplainReport, error) { return explain(m, opt, env, out) })
}

// ExplanationFormat is the format Explain writes to path, by its extension:
// ".csv" or ".jsonl".
func ExplanationFormat(path string) (string, error) {
	for _, ext := range []string{".csv", ".jsonl"} {
		if strings.HasSuffix(strings.ToLower(path), ext) {
			return ext, nil
		}
	}
	return "", fmt.Errorf("%s: want a .csv or .jsonl file", path)
}

// explain is Explain after runenv's prologue.
func explain(m *model.MotifModel, opt ExplainOptions, env runenv.Env, out string) (rep *ExplainReport, err error) {
	format, err := ExplanationFormat(out)
	if err != nil {
		return nil, err
	}
	err = atomicfile.Write(out, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		write := newExplanationWriter(bw, format, m.Config.Motifs)
		if err := write.header(); err != nil {
			return err
		}
		if rep, err = explainStream(m, opt, env, write.row); err != nil {
			return err
		}
		if err := write.flush(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// MotifUsage is each motif's atoms and commonest fragments in the molecules
// opt names, as ExplainReport.Usage, without writing the explanations: what
// a motif model file keeps of its pre-training data (docs/method.md §14).
func MotifUsage(m *model.MotifModel, opt Options, env runenv.Env) ([]model.MotifUsage, error) {
	return runenv.Run(env, opt.checkPrecision(env), func() ([]model.MotifUsage, error) {
		rep, err := explainStream(m, ExplainOptions{Options: opt}, env, func(Explanation) error { return nil })
		if err != nil {
			return nil, err
		}
		return rep.Usage, nil
	})
}

// explainStream explains every input row, in order, handing each
// explanation to sink, and counts what the motifs stand for.
func explainStream(m *model.MotifModel, opt ExplainOptions, env runenv.Env, sink func(Explanation) error) (*ExplainReport, error) {
	if err := opt.Precision.Apply(m.Store); err != nil {
		return nil, err
	}
	k := m.Config.Motifs
	rep := &ExplainReport{Fragments: rdkit.Load() == nil}
	counters := make([]*metrics.TopCounter, k)
	atoms := make([]int64, k)
	for i := range counters {
		counters[i] = metrics.NewTopCounter(legendCapacity)
	}
	scores := Model{Forward: m.Cosines, Level: PerAtom, Width: k}
	streamed, err := Stream(opt.Options, env, scores, func(mol *Molecule) error {
		e := Explanation{Row: mol.Row, SMILES: mol.SMILES}
		if mol.Rejected != nil {
			e.Error = mol.Rejected.Reason
		} else {
			x := explainMolecule(mol.Out, k, m.Config.Tau, mol.Data.MoleculeBonds(int(mol.Mol)))
			e.Motifs, e.Confidence, e.Pieces, e.Profile = x.Motifs, x.Confidence, x.Pieces, x.Profile
			if rep.Fragments && e.SMILES != "" {
				if err := nameFragments(&e); err != nil {
					return fmt.Errorf("%s row %d: %w", opt.Data, mol.Row, err)
				}
			}
			for _, p := range e.Pieces {
				atoms[p.Motif] += int64(len(p.Atoms))
				if p.Fragment != "" {
					counters[p.Motif].Add(p.Fragment)
				}
			}
		}
		if len(rep.Page) < opt.PageMolecules {
			rep.Page = append(rep.Page, e)
		}
		return sink(e)
	})
	if err != nil {
		return nil, err
	}
	rep.Report = *streamed
	rep.Written = rep.Rows
	for i := range k {
		u := model.MotifUsage{Motif: i, Atoms: atoms[i]}
		for _, f := range counters[i].Top(model.LegendFragments) {
			u.Fragments = append(u.Fragments, model.FragmentCount{SMILES: f.Item, Count: f.Count})
		}
		rep.Usage = append(rep.Usage, u)
	}
	return rep, nil
}

// explainMolecule turns the cosines of a molecule's atoms to the K motifs
// (n×K, row-major) and its bonds (pairs of atom indices) into its
// explanation (docs/method.md §14); the pieces are not yet named.
func explainMolecule(cos []float32, k int, tau float64, bonds []int32) Explanation {
	n := len(cos) / k
	e := Explanation{Motifs: make([]int, n), Confidence: make([]float64, n), Profile: make([]float64, k)}
	q := make([]float64, k)
	for i := range n {
		row := cos[i*k : (i+1)*k]
		best := 0
		for j := 1; j < k; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		// softmax_k(c/τ), shifted by the largest logit so that exp cannot
		// overflow.
		var sum float64
		for j := range k {
			q[j] = math.Exp((float64(row[j]) - float64(row[best])) / tau)
			sum += q[j]
		}
		for j := range k {
			e.Profile[j] += q[j] / sum / float64(n)
		}
		e.Motifs[i], e.Confidence[i] = best, q[best]/sum
	}
	e.Pieces = pieces(e.Motifs, bonds)
	return e
}

// pieces splits a molecule's atoms into connected pieces of one motif: the
// components of the graph whose edges are the bonds (pairs of atom indices)
// between atoms of the same motif, ordered by their first atom.
func pieces(motifs []int, bonds []int32) []Piece {
	n := len(motifs)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	root := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for b := 0; b+1 < len(bonds); b += 2 {
		u, v := int(bonds[b]), int(bonds[b+1])
		if motifs[u] == motifs[v] {
			ru, rv := root(u), root(v)
			parent[max(ru, rv)] = min(ru, rv)
		}
	}
	var out []Piece
	index := make(map[int]int, n) // root → piece
	for a := range n {
		r := root(a)
		p, ok := index[r]
		if !ok {
			p = len(out)
			index[r] = p
			out = append(out, Piece{Motif: motifs[a]})
		}
		out[p].Atoms = append(out[p].Atoms, a)
	}
	return out
}

// nameFragments sets each piece's Fragment from e's SMILES.
func nameFragments(e *Explanation) error {
	atoms := make([][]int, len(e.Pieces))
	for i, p := range e.Pieces {
		atoms[i] = p.Atoms
	}
	names, err := rdkit.Fragments(e.SMILES, atoms)
	if err != nil {
		return err
	}
	for i := range e.Pieces {
		e.Pieces[i].Fragment = names[i]
	}
	return nil
}

// explanationWriter writes explanations as JSON Lines or as CSV, the
// latter through encoding/csv, quoted by the rule of every CSV the program
// writes.
type explanationWriter struct {
	csv *csv.Writer   // .csv
	enc *json.Encoder // .jsonl
	k   int
}

func newExplanationWriter(w io.Writer, format string, k int) *explanationWriter {
	if format == ".csv" {
		return &explanationWriter{csv: csv.NewWriter(w), k: k}
	}
	return &explanationWriter{enc: json.NewEncoder(w), k: k}
}

// header writes the CSV header; JSON Lines have none.
func (x *explanationWriter) header() error {
	if x.csv == nil {
		return nil
	}
	cols := []string{"row", "smiles", "atom_motifs", "pieces", "fragments"}
	for j := range x.k {
		cols = append(cols, "p_"+strconv.Itoa(j))
	}
	return x.csv.Write(append(cols, "error"))
}

// row writes one explanation. In CSV, atom_motifs is the atoms' motifs
// separated by spaces, pieces each piece as motif:atom atom …, pieces
// separated by ";", fragments their SMILES in the same order.
func (x *explanationWriter) row(e Explanation) error {
	if x.enc != nil {
		return x.enc.Encode(e)
	}
	fields := []string{strconv.Itoa(e.Row), e.SMILES, joinInts(e.Motifs, " ")}
	var pieces, fragments []string
	for _, p := range e.Pieces {
		pieces = append(pieces, strconv.Itoa(p.Motif)+":"+joinInts(p.Atoms, " "))
		fragments = append(fragments, p.Fragment)
	}
	fields = append(fields, strings.Join(pieces, ";"), strings.Join(fragments, ";"))
	for j := range x.k {
		if e.Profile == nil {
			fields = append(fields, "")
			continue
		}
		fields = append(fields, strconv.FormatFloat(e.Profile[j], 'g', 6, 64))
	}
	return x.csv.Write(append(fields, e.Error))
}

// flush writes what the CSV writer holds.
func (x *explanationWriter) flush() error {
	if x.csv == nil {
		return nil
	}
	x.csv.Flush()
	return x.csv.Error()
}

// joinInts writes v's numbers separated by sep.
func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}
