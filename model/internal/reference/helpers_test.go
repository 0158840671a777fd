package reference

import (
	"math"
	"math/rand/v2"
	"testing"
)

// eps is the GENConv message constant, spelled out for the hand-computed
// expectations.
const eps = 1e-7

// near reports whether a and b agree to rel relative (or absolute, near 0).
func near(a, b, rel float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// nearRel reports whether a and b agree to rel relative, however small.
func nearRel(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

func checkScalar(t *testing.T, name string, got, want, rel float64) {
	t.Helper()
	if !near(got, want, rel) {
		t.Errorf("%s = %.17g, want %.17g (diff %.3g)", name, got, want, got-want)
	}
}

func checkMatrixClose(t *testing.T, name string, got, want [][]float64, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s row %d: %d entries, want %d", name, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if !near(got[i][j], want[i][j], rel) {
				t.Errorf("%s[%d][%d] = %.17g, want %.17g", name, i, j, got[i][j], want[i][j])
			}
		}
	}
}

func identity(d int) [][]float64 {
	m := zeros(d, d)
	for i := range m {
		m[i][i] = 1
	}
	return m
}

func filled(d int, v float64) []float64 {
	out := make([]float64, d)
	for i := range out {
		out[i] = v
	}
	return out
}

// zeroWeights returns weights of width d with every embedding table holding
// `rows` zero rows, identity convs (t = 1, bias 0), unit norms, identity
// projections and a K × d zero motif table, for hand-built cases to fill in.
func zeroWeights(d, k, layers, rows int) Weights {
	var w Weights
	for f := range w.AtomEmb {
		w.AtomEmb[f] = zeros(rows, d)
	}
	for f := range w.BondEmb {
		w.BondEmb[f] = zeros(rows, d)
	}
	for l := 0; l < layers; l++ {
		w.Convs = append(w.Convs, Conv{W: identity(d), B: make([]float64, d), T: 1})
		w.Norms = append(w.Norms, Norm{Gamma: filled(d, 1), Beta: make([]float64, d)})
	}
	w.Motifs = zeros(k, d)
	w.Wh, w.Ws, w.We = identity(d), identity(d), identity(d)
	return w
}

// testConfig is a small configuration for the randomised tests; τ is larger
// than the default so that Q is not one-hot to machine precision.
func testConfig() Config {
	return Config{
		Layers: 3, Hidden: 6, Motifs: 4,
		Tau: 0.5, SinkhornLambda: 20, SinkhornIters: 5, Eta: 2,
		Alpha: 0.7, LambdaNode: 1, LambdaSub: 1.5, LambdaReg: 5,
	}
}

func randMatrix(rng *rand.Rand, rows, cols int, scale float64) [][]float64 {
	m := zeros(rows, cols)
	for i := range m {
		for j := range m[i] {
			m[i][j] = scale * rng.NormFloat64()
		}
	}
	return m
}

// randomWeights draws weights of the real table sizes for config c.
func randomWeights(rng *rand.Rand, c Config) Weights {
	var w Weights
	for f, n := range AtomTableSizes {
		w.AtomEmb[f] = randMatrix(rng, n, c.Hidden, 0.5)
	}
	for f, n := range BondTableSizes {
		w.BondEmb[f] = randMatrix(rng, n, c.Hidden, 0.5)
	}
	s := 1 / math.Sqrt(float64(c.Hidden))
	for l := 0; l < c.Layers; l++ {
		g := make([]float64, c.Hidden)
		for i := range g {
			g[i] = 1 + 0.2*rng.NormFloat64()
		}
		w.Convs = append(w.Convs, Conv{
			W: randMatrix(rng, c.Hidden, c.Hidden, s),
			B: randMatrix(rng, 1, c.Hidden, 0.1)[0],
			T: 0.5 + 1.5*rng.Float64(),
		})
		w.Norms = append(w.Norms, Norm{Gamma: g, Beta: randMatrix(rng, 1, c.Hidden, 0.1)[0]})
	}
	w.Motifs = randMatrix(rng, c.Motifs, c.Hidden, 1)
	w.Wh = randMatrix(rng, c.Hidden, c.Hidden, s)
	w.Ws = randMatrix(rng, c.Hidden, c.Hidden, s)
	w.We = randMatrix(rng, c.Hidden, c.Hidden, s)
	return w
}

// molecule is one random graph: atom features and undirected bonds.
type molecule struct {
	x     [][9]int64
	bonds [][2]int
	attr  [][3]int64
}

// randomMolecule draws a connected graph of n atoms (a random tree plus one
// ring-closing bond when n ≥ 4).
func randomMolecule(rng *rand.Rand, n int) molecule {
	var m molecule
	for i := 0; i < n; i++ {
		var x [9]int64
		for f, size := range AtomTableSizes {
			x[f] = int64(rng.IntN(size))
		}
		m.x = append(m.x, x)
		if i > 0 {
			m.bonds = append(m.bonds, [2]int{rng.IntN(i), i})
		}
	}
	if n >= 4 {
		m.bonds = append(m.bonds, [2]int{0, n - 1})
	}
	for range m.bonds {
		var a [3]int64
		for f, size := range BondTableSizes {
			a[f] = int64(rng.IntN(size))
		}
		m.attr = append(m.attr, a)
	}
	return m
}

// batchOf joins molecules into one disjoint graph, every bond in both
// directions, and shuffles the edge list (edges need not be sorted).
func batchOf(rng *rand.Rand, mols []molecule) Batch {
	var b Batch
	b.NumGraphs = len(mols)
	off := 0
	for g, m := range mols {
		b.X = append(b.X, m.x...)
		for range m.x {
			b.NodeGraph = append(b.NodeGraph, g)
		}
		for k, bd := range m.bonds {
			b.Src = append(b.Src, off+bd[0], off+bd[1])
			b.Dst = append(b.Dst, off+bd[1], off+bd[0])
			b.EdgeAttr = append(b.EdgeAttr, m.attr[k], m.attr[k])
		}
		off += len(m.x)
	}
	if rng != nil {
		rng.Shuffle(len(b.Src), func(i, j int) {
			b.Src[i], b.Src[j] = b.Src[j], b.Src[i]
			b.Dst[i], b.Dst[j] = b.Dst[j], b.Dst[i]
			b.EdgeAttr[i], b.EdgeAttr[j] = b.EdgeAttr[j], b.EdgeAttr[i]
		})
	}
	return b
}

// lossesOf lists a result's losses by name.
func lossesOf(r Result) map[string]float64 {
	return map[string]float64{
		"NodeMot": r.NodeMot, "MotSub": r.MotSub, "Cut": r.Cut, "Ortho": r.Ortho,
		"Reg": r.Reg, "Contra": r.Contra, "Total": r.Total,
	}
}
