package reference

// Hand-computed cases. Every expected value below is derived on paper in
// the comment above it and written as a closed form; none is produced by
// running the code under test.

import (
	"math"
	"reflect"
	"strconv"
	"testing"
)

// docs/method.md §2: AtomEncoder and BondEncoder sum one row of every table.
func TestEncodersSumOneRowPerTable(t *testing.T) {
	// Atom table f, row r = [r, f·r]. For x = [3,1,0,0,0,0,0,1,1]:
	//   channel 0 = Σ_f x_f = 3+1+1+1 = 6
	//   channel 1 = Σ_f f·x_f = 0·3 + 1·1 + 7·1 + 8·1 = 16
	var atom [9][][]float64
	for f := range atom {
		for r := 0; r < 4; r++ {
			atom[f] = append(atom[f], []float64{float64(r), float64(f * r)})
		}
	}
	got := atomEncode(atom, [][9]int64{{3, 1, 0, 0, 0, 0, 0, 1, 1}, {}}, 2)
	checkMatrixClose(t, "atom", got, [][]float64{{6, 16}, {0, 0}}, 0)

	// Bond table f, row r = [r, (f+1)·r]. For a = [2,5,1]:
	//   channel 0 = 2+5+1 = 8, channel 1 = 1·2 + 2·5 + 3·1 = 15
	var bond [3][][]float64
	for f := range bond {
		for r := 0; r < 6; r++ {
			bond[f] = append(bond[f], []float64{float64(r), float64((f + 1) * r)})
		}
	}
	gotB := bondEncode(bond, [][3]int64{{2, 5, 1}}, 2)
	checkMatrixClose(t, "bond", gotB, [][]float64{{8, 15}}, 0)
}

// path3 is the 3-atom path 0 – 1 – 2 used by several hand cases, its four
// directed edges listed out of order.
var (
	path3Src = []int{1, 0, 2, 1}
	path3Dst = []int{2, 1, 1, 0}
)

// docs/method.md §2: GENConv on the 3-atom path, d = 2, t = 1.
//
//	h = [1,0], [0,2], [−1,1];  e = [0,−1] on every edge;  W = [[1,1],[0,2]], b = [0,−1]
//
// h_j + e: node 0 → [1,−1], node 1 → [0,1], node 2 → [−1,0], so the messages
// out of the nodes are m_0 = [1+ε, ε], m_1 = [ε, 1+ε], m_2 = [ε, ε] (ε = 1e−7).
//
//	node 0: only 1→0:  agg = m_1 = [ε, 1+ε];  h+agg = [1+ε, 1+ε]
//	node 2: only 1→2:  agg = m_1 = [ε, 1+ε];  h+agg = [−1+ε, 2+ε]
//	node 1: 0→1 and 2→1; channel 0 messages 1+ε, ε: weights e¹/(e¹+e⁰) = σ
//	        (σ = e/(1+e)) and 1−σ, agg = σ(1+ε) + (1−σ)ε = σ+ε;
//	        channel 1 messages ε, ε: weights ½, ½, agg = ε;  h+agg = [σ+ε, 2+ε]
//
// W·x + b with row 0 = x0+x1 and row 1 = 2·x1 − 1:
//
//	node 0: [2+2ε, 1+2ε];  node 1: [σ+2+2ε, 3+2ε];  node 2: [1+2ε, 3+2ε]
func TestGENConvPath3(t *testing.T) {
	h := [][]float64{{1, 0}, {0, 2}, {-1, 1}}
	e := [][]float64{{0, -1}, {0, -1}, {0, -1}, {0, -1}}
	c := Conv{W: [][]float64{{1, 1}, {0, 2}}, B: []float64{0, -1}, T: 1}
	sigma := math.E / (1 + math.E)
	want := [][]float64{{2 + 2*eps, 1 + 2*eps}, {sigma + 2 + 2*eps, 3 + 2*eps}, {1 + 2*eps, 3 + 2*eps}}
	got := genConv(h, e, path3Src, path3Dst, c)
	checkMatrixClose(t, "genConv", got, want, 1e-14)
}

// docs/method.md §2: the per-node, per-channel max is subtracted before exp, so a
// large |t| gives an (almost) hard max or min instead of overflow; t = 0 is
// the mean; a node without incoming edges gets agg = 0.
//
// d = 1, W = [1], b = 0, h = [0], [1], [3], edges 1→0 and 2→0, e = 0:
// messages into node 0 are 1+ε and 3+ε.
//
//	t = 1000:  agg_0 = 3+ε (the other weight is e^−2000 = 0)
//	t = −1000: agg_0 = 1+ε
//	t = 0:     agg_0 = ((1+ε)+(3+ε))/2 = 2+ε
//	t = ln 3:  weights 3^1/(3^1+3^3) = 1/10 and 9/10: agg_0 = 0.1(1+ε) + 0.9(3+ε) = 2.8+ε
//
// Nodes 1 and 2 have no incoming edges: output = h.
func TestGENConvTemperatureAndNoIncoming(t *testing.T) {
	h := [][]float64{{0}, {1}, {3}}
	e := [][]float64{{0}, {0}}
	src, dst := []int{1, 2}, []int{0, 0}
	for _, tc := range []struct {
		t, agg float64
	}{{1000, 3 + eps}, {-1000, 1 + eps}, {0, 2 + eps}, {math.Log(3), 2.8 + eps}} {
		got := genConv(h, e, src, dst, Conv{W: [][]float64{{1}}, B: []float64{0}, T: tc.t})
		checkMatrixClose(t, "genConv(t="+formatFloat(tc.t)+")", got, [][]float64{{tc.agg}, {1}, {3}}, 1e-14)
	}
}

func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// docs/method.md §2: BatchNorm1d in training mode with biased variance.
//
//	column 0 = [1,2,3], γ = 2, β = 1: μ = 2, σ² = (1+0+1)/3 = 2/3
//	           (the unbiased estimate would be 1), y = 2(x−2)/√(2/3+1e−5) + 1
//	column 1 = [5,5,5], γ = 3, β = −1: σ² = 0, y = β = −1
func TestBatchNormBiasedVariance(t *testing.T) {
	x := [][]float64{{1, 5}, {2, 5}, {3, 5}}
	got := batchNorm(x, Norm{Gamma: []float64{2, 3}, Beta: []float64{1, -1}})
	s := math.Sqrt(2.0/3 + 1e-5)
	want := [][]float64{{-2/s + 1, -1}, {1, -1}, {2/s + 1, -1}}
	checkMatrixClose(t, "batchNorm", got, want, 1e-14)
}

// docs/method.md §2: one-layer encoder on the 3-atom path through the atom and
// bond tables: H = BN_0(conv_0(h0)).
//
// h0 and e are those of TestGENConvPath3, built from the tables (atom
// table 0 holds the three node rows, table 3 adds row 1 = [0,0] to check a
// zero contribution; bond tables 0 and 1 each give [0,−½]). conv_0's output
// is therefore [2,1], [2+σ,3], [1,3] plus 2ε everywhere (which BN removes).
//
//	column 0 = [2, 2+σ, 1]: μ = (5+σ)/3, deviations (1−σ)/3, (1+2σ)/3, −(2+σ)/3,
//	           σ² = ((1−σ)² + (1+2σ)² + (2+σ)²)/27 = (6+6σ+6σ²)/27 = 2(1+σ+σ²)/9
//	column 1 = [1, 3, 3]: μ = 7/3, deviations −4/3, 2/3, 2/3, σ² = 24/27 = 8/9
//
// With γ = [2,1], β = [0,½]: H[·][0] = 2·dev/√(σ²+1e−5), H[·][1] = dev/√(8/9+1e−5) + ½.
// The deviations sum to 0 per channel, so the graph embedding E = β = [0,½].
func TestEncoderPath3OneLayer(t *testing.T) {
	w := zeroWeights(2, 2, 1, 3)
	w.AtomEmb[0] = [][]float64{{1, 0}, {0, 2}, {-1, 1}}
	w.BondEmb[0][0] = []float64{0, -0.5}
	w.BondEmb[1][2] = []float64{0, -0.5}
	w.Convs[0] = Conv{W: [][]float64{{1, 1}, {0, 2}}, B: []float64{0, -1}, T: 1}
	w.Norms[0] = Norm{Gamma: []float64{2, 1}, Beta: []float64{0, 0.5}}
	b := Batch{
		X:         [][9]int64{{0, 0, 0, 1}, {1, 0, 0, 1}, {2, 0, 0, 1}},
		Src:       path3Src,
		Dst:       path3Dst,
		EdgeAttr:  [][3]int64{{0, 2, 0}, {0, 2, 0}, {0, 2, 0}, {0, 2, 0}},
		NodeGraph: []int{0, 0, 0},
		NumGraphs: 1,
	}
	c := Config{Layers: 1, Hidden: 2, Motifs: 2, Tau: 1, SinkhornLambda: 20, SinkhornIters: 5, Eta: 1}
	res, err := Forward(w, b, c)
	if err != nil {
		t.Fatal(err)
	}
	got := res.H
	// BN output has mean β per channel, so the mean readout is E = β.
	checkMatrixClose(t, "E", res.E, [][]float64{{0, 0.5}}, 1e-12)

	sg := math.E / (1 + math.E)
	s0 := math.Sqrt(2*(1+sg+sg*sg)/9 + 1e-5)
	s1 := math.Sqrt(8.0/9 + 1e-5)
	want := [][]float64{
		{2 * (1 - sg) / 3 / s0, -4.0/3/s1 + 0.5},
		{2 * (1 + 2*sg) / 3 / s0, 2.0/3/s1 + 0.5},
		{-2 * (2 + sg) / 3 / s0, 2.0/3/s1 + 0.5},
	}
	checkMatrixClose(t, "H", got, want, 1e-9)
}

// docs/method.md §2: res+ wiring with two layers on two isolated atoms (no
// edges, so conv(x) = W·x + b).
//
//	h0 = [1,0], [0,1];  conv_0 = identity  →  h = h0
//	BN_0 (γ=1, β=0), column [1,0] → [r,−r], column [0,1] → [−r,r], r = ½/√(¼+1e−5)
//	ReLU → [r,0], [0,r]
//	conv_1: W = [[1,1],[0,1]], b = [0.7,−0.3] → [r+0.7, −0.3], [r+0.7, r−0.3]
//	+ h   → [1.7+r, −0.3], [0.7+r, 0.7+r]
//	BN_1 (γ=1, β=0): column 0 differs by 1 → [r, −r];
//	       column 1 differs by 1+r → [−q, q], q = ((1+r)/2)/√(((1+r)/2)²+1e−5)
//
// No ReLU after BN_1, so H keeps its negative entries. (Without the middle
// ReLU column 1 would differ by 1+2r; without the residual column 0 would
// be constant and map to 0.)
func TestEncoderResPlusTwoLayers(t *testing.T) {
	w := zeroWeights(2, 2, 2, 2)
	w.AtomEmb[0] = [][]float64{{1, 0}, {0, 1}}
	w.Convs[1] = Conv{W: [][]float64{{1, 1}, {0, 1}}, B: []float64{0.7, -0.3}, T: 1}
	b := Batch{X: [][9]int64{{0}, {1}}, NodeGraph: []int{0, 0}, NumGraphs: 1}
	c := Config{Layers: 2, Hidden: 2, Motifs: 2}
	got := encode(w, b, c)
	r := 0.5 / math.Sqrt(0.25+1e-5)
	hd := (1 + r) / 2
	q := hd / math.Sqrt(hd*hd+1e-5)
	checkMatrixClose(t, "H", got, [][]float64{{r, -q}, {-r, q}}, 1e-12)
}

// docs/method.md §3: Q = softmax_k(cos(W_h·h, M_k)/τ), τ = ½, W_h swaps the two
// channels, M = [1,0], [0,3] (cosine ignores the norm of M_1).
//
//	h = [1,1] → W_h·h = [1,1]: cos = 1/√2, 1/√2 → Q = [½, ½]
//	h = [4,3] → W_h·h = [3,4]: cos = 0.6, 0.8 → logits 1.2, 1.6
//	           → Q = [1/(1+e^0.4), e^0.4/(1+e^0.4)]
//	h = [0,0] → normalised with max(‖v‖, 1e−12) to [0,0]: cos = 0, 0 → Q = [½, ½]
func TestQCosineSoftmax(t *testing.T) {
	h := [][]float64{{1, 1}, {4, 3}, {0, 0}}
	wh := [][]float64{{0, 1}, {1, 0}}
	m := [][]float64{{1, 0}, {0, 3}}
	q, logq := motifProbs(wh, h, m, 0.5)
	a := 1 / (1 + math.Exp(0.4))
	want := [][]float64{{0.5, 0.5}, {a, 1 - a}, {0.5, 0.5}}
	checkMatrixClose(t, "Q", q, want, 1e-14)
	wantLog := [][]float64{
		{-math.Ln2, -math.Ln2},
		{-math.Log1p(math.Exp(0.4)), 0.4 - math.Log1p(math.Exp(0.4))},
		{-math.Ln2, -math.Ln2},
	}
	checkMatrixClose(t, "log Q", logq, wantLog, 1e-14)
}

// float32Tol is the relative tolerance for float32 Sinkhorn values: a few
// float32 roundings (2^−24 ≈ 6e−8 each).
const float32Tol = 1e-6

func checkA(t *testing.T, got [][]float32, want [][]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("A has %d rows, want %d", len(got), len(want))
	}
	for k := range want {
		for l := range want[k] {
			g := float64(got[k][l])
			if math.Abs(g-want[k][l]) > float32Tol*math.Abs(want[k][l]) {
				t.Errorf("A[%d][%d] = %.9g, want %.9g", k, l, g, want[k][l])
			}
		}
	}
}

// docs/method.md §3: Sinkhorn with λ = ln 2, so exp(λ·q) = 2^q.
//
// Case 1: Q = [1,0], [0,1], [½,½] (N = 3, K = 2).
//
//	A = exp(λQᵀ) = [[2, 1, √2], [1, 2, √2]], sum = 6+2√2
//	iters = 0: A/(6+2√2)
//	rows: both sums are (3+√2)/(6+2√2) = ½, factor (1/2)/(1/2) = 1
//	columns: column 0 and 1 sum to 3/(6+2√2), factor (1/3)(6+2√2)/3;
//	         column 2 sums to 2√2/(6+2√2), factor (1/3)(6+2√2)/(2√2)
//	after 1 iteration: [[2/9, 1/9, 1/6], [1/9, 2/9, 1/6]]
//	motif = [0, 1, 0] (node 2 is an exact tie: the first maximum wins)
//
// Case 2: Q = [1,0], [1,0], [0,1].
//
//	A = [[2,2,1],[1,1,2]]/9
//	rows: row 0 sums to 5/9, factor (1/2)/(5/9) = 9/10 → [2,2,1]/10
//	      row 1 sums to 4/9, factor 9/8         → [1,1,2]/8
//	columns: 0 and 1 sum to 1/5+1/8 = 13/40, factor (1/3)(40/13) = 40/39
//	         → [8/39, 5/39]; column 2 sums to 1/10+1/4 = 7/20, factor 20/21
//	         → [2/21, 5/21]
//	after 1 iteration: [[8/39, 8/39, 2/21], [5/39, 5/39, 5/21]], motif = [0, 0, 1]
func TestSinkhornOneIteration(t *testing.T) {
	lam := math.Ln2
	q1 := [][]float64{{1, 0}, {0, 1}, {0.5, 0.5}}
	s := 6 + 2*math.Sqrt2
	checkA(t, Sinkhorn(q1, lam, 0), [][]float64{{2 / s, 1 / s, math.Sqrt2 / s}, {1 / s, 2 / s, math.Sqrt2 / s}})
	a1 := Sinkhorn(q1, lam, 1)
	checkA(t, a1, [][]float64{{2.0 / 9, 1.0 / 9, 1.0 / 6}, {1.0 / 9, 2.0 / 9, 1.0 / 6}})
	if got := ArgmaxColumns(a1); !reflect.DeepEqual(got, []int{0, 1, 0}) {
		t.Errorf("case 1 motif = %v, want [0 1 0]", got)
	}

	q2 := [][]float64{{1, 0}, {1, 0}, {0, 1}}
	a2 := Sinkhorn(q2, lam, 1)
	checkA(t, a2, [][]float64{{8.0 / 39, 8.0 / 39, 2.0 / 21}, {5.0 / 39, 5.0 / 39, 5.0 / 21}})
	if got := ArgmaxColumns(a2); !reflect.DeepEqual(got, []int{0, 0, 1}) {
		t.Errorf("case 2 motif = %v, want [0 0 1]", got)
	}
}

// docs/method.md §3: Sinkhorn casts Q to float32 before anything else.
// Q[0] = [½, ½+2.9e−8]: 2.9e−8 is below half a float32 ulp at ½ (2^−25 ≈
// 2.98e−8), so both entries round to the float32 ½ and, with no iterations,
// A[0][0] == A[1][0] exactly and the first maximum (motif 0) wins. Had λ·Q
// been formed in float64 (20·2.9e−8 = 5.8e−7, above half a float32 ulp at
// 10, 2^−21 ≈ 4.77e−7) or the whole computation run in float64, motif 1
// would be strictly larger.
func TestSinkhornCastsToFloat32First(t *testing.T) {
	q := [][]float64{{0.5, 0.5 + 2.9e-8}, {0.9, 0.1}}
	a := Sinkhorn(q, 20, 0)
	if a[0][0] != a[1][0] {
		t.Errorf("A[·][0] = %v, %v; want an exact float32 tie", a[0][0], a[1][0])
	}
	if m := ArgmaxColumns(a); m[0] != 0 || m[1] != 0 {
		t.Errorf("motif = %v, want [0 0]", m)
	}
}

// docs/method.md §4: slots graph·K + motif, η threshold, slot order, sorted
// members.
//
//	graphs [0,0,0,0,1,1,1], motifs [1,0,1,1,0,0,2], K = 3
//	slots: 1 (g0,m1) = {0,2,3}; 0 (g0,m0) = {1}; 3 (g1,m0) = {4,5}; 5 (g1,m2) = {6}
func TestSubgraphsFromSlots(t *testing.T) {
	ng := []int{0, 0, 0, 0, 1, 1, 1}
	mt := []int{1, 0, 1, 1, 0, 0, 2}
	for _, tc := range []struct {
		eta  int
		want []Subgraph
	}{
		{1, []Subgraph{{0, 0, []int{1}}, {0, 1, []int{0, 2, 3}}, {1, 0, []int{4, 5}}, {1, 2, []int{6}}}},
		{2, []Subgraph{{0, 1, []int{0, 2, 3}}, {1, 0, []int{4, 5}}}},
		{3, []Subgraph{{0, 1, []int{0, 2, 3}}}},
		{4, nil},
	} {
		got := buildSubgraphs(ng, mt, 2, 3, tc.eta)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("η = %d: subgraphs %v, want %v", tc.eta, got, tc.want)
		}
	}
}

// docs/method.md §5 on the 3-atom path (edges 0↔1, 1↔2), K = 2,
// Q = [1,0], [½,½], [0,1].
//
//	numerator: each of the 4 directed edges has ⟨Q_u,Q_v⟩ = ½ → 2
//	denominator: deg = 1,2,1; ‖Q_u‖² = 1, ½, 1 → 1 + 1 + 1 = 3
//	cut = −2/3
//	QᵀQ = [[1,0],[0,0]] + [[¼,¼],[¼,¼]] + [[0,0],[0,1]] = [[5/4,¼],[¼,5/4]]
//	‖QᵀQ‖_F = √(2·25/16 + 2/16) = √3.25
//	ortho = √(2(1.25/√3.25 − 1/√2)² + 2(0.25/√3.25)²)
//
// A second graph with a single node and no edges has cut 0.
func TestMinCutPath3(t *testing.T) {
	q := [][]float64{{1, 0}, {0.5, 0.5}, {0, 1}, {0.3, 0.7}}
	cut := cutPerGraph(q, path3Src, path3Dst, []int{0, 0, 0, 1}, 2)
	checkScalar(t, "cut_0", cut[0], -2.0/3, 1e-15)
	checkScalar(t, "cut_1", cut[1], 0, 0)
	f := math.Sqrt(3.25)
	d, o := 1.25/f-1/math.Sqrt2, 0.25/f
	checkScalar(t, "ortho_0", orthoTerm(q, []int{0, 1, 2}, []int{0, 1}), math.Sqrt(2*d*d+2*o*o), 1e-15)

	// deg(u) counts the edges leaving u. With the single directed edge 0→1,
	// Q_0 = [1,0], Q_1 = [½,½]: numerator ½, denominator deg(0)·‖Q_0‖² = 1,
	// cut = −½ (counting edges entering u would give ‖Q_1‖² = ½ and −1).
	// Forward always passes both directions, where the two readings agree.
	cut = cutPerGraph([][]float64{{1, 0}, {0.5, 0.5}}, []int{0}, []int{1}, []int{0, 0}, 1)
	checkScalar(t, "cut(0→1)", cut[0], -0.5, 1e-15)
}

// docs/method.md §5, restricted form. Q = [1,0,0], [0,1,0], [0,1,0]:
// QᵀQ = diag(1,2,0), ‖·‖_F = √5.
//
//	all K = 3 columns: ortho = √((1/√5−1/√3)² + (2/√5−1/√3)² + (0−1/√3)²)
//	columns {0,1}:     ortho = √((1/√5−1/√2)² + (2/√5−1/√2)²)
//	one column:        [g]/|g| − 1 = 0
//	no column:         0
func TestOrthoRestricted(t *testing.T) {
	q := [][]float64{{1, 0, 0}, {0, 1, 0}, {0, 1, 0}}
	nodes := []int{0, 1, 2}
	s5, s3, s2 := math.Sqrt(5), math.Sqrt(3), math.Sqrt2
	full := math.Sqrt(math.Pow(1/s5-1/s3, 2) + math.Pow(2/s5-1/s3, 2) + 1.0/3)
	sel := math.Sqrt(math.Pow(1/s5-1/s2, 2) + math.Pow(2/s5-1/s2, 2))
	checkScalar(t, "ortho(all)", orthoTerm(q, nodes, []int{0, 1, 2}), full, 1e-15)
	checkScalar(t, "ortho({0,1})", orthoTerm(q, nodes, []int{0, 1}), sel, 1e-15)
	checkScalar(t, "ortho({1})", orthoTerm(q, nodes, []int{1}), 0, 1e-15)
	checkScalar(t, "ortho({})", orthoTerm(q, nodes, nil), 0, 0)
}

// docs/method.md §5: ortho_g = 0 when Q_g's columns are orthogonal with equal
// norms (QᵀQ = c·I, so QᵀQ/‖QᵀQ‖_F = I/√K).
func TestOrthoZeroForOrthogonalEqualNormColumns(t *testing.T) {
	for name, q := range map[string][][]float64{
		"one-hot, 2 per motif": {{1, 0}, {0, 1}, {1, 0}, {0, 1}},
		"rotated":              {{0.6, 0.8}, {0.8, -0.6}},
		"K=3 blocks":           {{0.5, 0, 0}, {0.5, 0, 0}, {0, 0.5, 0}, {0, 0.5, 0}, {0, 0, 0.5}, {0, 0, 0.5}},
	} {
		nodes := make([]int, len(q))
		for i := range nodes {
			nodes[i] = i
		}
		cols := make([]int, len(q[0]))
		for i := range cols {
			cols[i] = i
		}
		checkScalar(t, "ortho "+name, orthoTerm(q, nodes, cols), 0, 1e-15)
	}
	// Unequal norms are not zero: diag(1,2)/√5 − I/√2 ≠ 0.
	if o := orthoTerm([][]float64{{1, 0}, {0, 1}, {0, 1}}, []int{0, 1, 2}, []int{0, 1}); o < 0.1 {
		t.Errorf("ortho with unequal column norms = %g, want clearly > 0", o)
	}
}

// docs/method.md §5: cut_g = −1 when every node of g has the same row q:
// numerator Σ_edges ⟨q,q⟩ = |E|·‖q‖², denominator Σ_u deg(u)‖q‖² = |E|·‖q‖².
func TestCutMinusOneForIdenticalRows(t *testing.T) {
	// A 4-ring with a chord, both directions, in a scrambled order; plus a
	// second graph (nodes 4, 5) joined by one bond.
	src := []int{0, 1, 1, 2, 2, 3, 3, 0, 0, 2, 4, 5}
	dst := []int{1, 0, 2, 1, 3, 2, 0, 3, 2, 0, 5, 4}
	ng := []int{0, 0, 0, 0, 1, 1}
	for _, row := range [][]float64{{0, 1, 0}, {0.2, 0.3, 0.5}} {
		q := [][]float64{row, row, row, row, {1, 0, 0}, {0, 0, 1}}
		cut := cutPerGraph(q, src, dst, ng, 2)
		checkScalar(t, "cut_0", cut[0], -1, 1e-15)
		// Graph 1's rows are orthogonal: no association at all.
		checkScalar(t, "cut_1", cut[1], 0, 0)
	}
}

// docs/method.md §6 on a 3-graph batch with W_e swapping the two channels, τ = ½:
//
//	e = [1,0], [0,1], [1,1];  W_e·e = [0,1], [1,0], [1,1]
//	s = [2,0] (graph 0), [0,5] (graph 1), [1,1] (graph 0); graph 2 has none
//	Y_0 = [0, 1, 1/√2]/τ = [0, 2, √2];  Y_1 = [1, 0, 1/√2]/τ = [2, 0, √2]
//	both rows have logsumexp ℓ = log(1 + e² + e^√2)
//	graph 0: (0 − ℓ) + (√2 − ℓ);  graph 1: (0 − ℓ);  graph 2 does not count
//	L_contra = −((√2 − 2ℓ) + (−ℓ))/2 = (3ℓ − √2)/2
func TestContrastiveHand(t *testing.T) {
	e := [][]float64{{1, 0}, {0, 1}, {1, 1}}
	s := [][]float64{{2, 0}, {0, 5}, {1, 1}}
	we := [][]float64{{0, 1}, {1, 0}}
	loss, y := contrastive(e, s, we, []int{0, 1, 0}, 0.5)
	r2 := math.Sqrt2
	checkMatrixClose(t, "Y", y, [][]float64{{0, 2, r2}, {2, 0, r2}, {r2, r2, 2}}, 1e-15)
	l := math.Log(1 + math.Exp(2) + math.Exp(r2))
	checkScalar(t, "L_contra", loss, (3*l-r2)/2, 1e-15)

	// No subgraph anywhere: 0.
	loss, y = contrastive(e, nil, we, nil, 0.5)
	checkScalar(t, "L_contra (J=0)", loss, 0, 0)
	if len(y) != 3 || len(y[0]) != 0 {
		t.Errorf("Y shape for J = 0 is %d×%d, want 3×0", len(y), len(y[0]))
	}
}

// End to end (docs/method.md §2–§6): two single-atom graphs, L = 1, d = 2, K = 2,
// τ = ½, λ = 20, 5 iterations, η = 1, α = 0.3, λ_n = 1, λ_s = 2, λ_r = 5.
//
//	h0 = [1,0], [0,1]; conv_0 = identity (no edges); BN_0:
//	H = E = [r,−r], [−r,r], r = ½/√(¼+1e−5)
//	W_h = I, M = [1,−1], [−1,1]: cos = ±1, logits ±2
//	Q_0 = [p, 1−p], Q_1 = [1−p, p], p = 1/(1+e^−4);  −log p = log(1+e^−4) =: ℓ
//	Sinkhorn is symmetric → motif = [0, 1]; η = 1 → subgraphs (g0,m0,{0}), (g1,m1,{1})
//	S = H.  L_node-mot = ℓ.
//	W_s swaps channels: W_s·s_0 = [−r,r] → P_0 = [1−p, p] (target 0), and
//	symmetrically for s_1 → L_mot-sub = −log(1−p) = 4 + ℓ
//	cut_g = 0 (no edges). Single-node graph, all K columns: G = qqᵀ,
//	G/‖G‖_F = qqᵀ/‖q‖² has norm 1 and trace 1, so
//	ortho² = 1 + 1 − 2·(1/√2) → ortho_g = √(2−√2); restricted (J_g = 1): 0
//	W_e = [[1,1],[0,1]]: W_e·e_0 = [0,−r], cos with s_0 = 1/√2, with s_1 = −1/√2;
//	W_e·e_1 = [0,r] likewise → Y_i = ±√2, L_contra = log(1+e^−2√2)
//	L = 0.3(ℓ + 2(4+ℓ) + 5·reg) + 0.7·L_contra
func TestForwardTwoSingleAtomGraphs(t *testing.T) {
	w := zeroWeights(2, 2, 1, 2)
	w.AtomEmb[0] = [][]float64{{1, 0}, {0, 1}}
	w.Motifs = [][]float64{{1, -1}, {-1, 1}}
	w.Ws = [][]float64{{0, 1}, {1, 0}}
	w.We = [][]float64{{1, 1}, {0, 1}}
	b := Batch{X: [][9]int64{{0}, {1}}, NodeGraph: []int{0, 1}, NumGraphs: 2}
	c := Config{Layers: 1, Hidden: 2, Motifs: 2, Tau: 0.5, SinkhornLambda: 20, SinkhornIters: 5,
		Eta: 1, Alpha: 0.3, LambdaNode: 1, LambdaSub: 2, LambdaReg: 5}

	r := 0.5 / math.Sqrt(0.25+1e-5)
	p := 1 / (1 + math.Exp(-4))
	ell := math.Log1p(math.Exp(-4))
	contra := math.Log1p(math.Exp(-2 * math.Sqrt2))
	ortho := math.Sqrt(2 - math.Sqrt2)

	for _, selected := range []bool{false, true} {
		c.OrthoSelected = selected
		res, err := Forward(w, b, c)
		if err != nil {
			t.Fatal(err)
		}
		h := [][]float64{{r, -r}, {-r, r}}
		checkMatrixClose(t, "H", res.H, h, 1e-12)
		checkMatrixClose(t, "E", res.E, h, 1e-12)
		checkMatrixClose(t, "Q", res.Q, [][]float64{{p, 1 - p}, {1 - p, p}}, 1e-14)
		if !reflect.DeepEqual(res.Motif, []int{0, 1}) {
			t.Fatalf("motif = %v, want [0 1]", res.Motif)
		}
		wantSub := []Subgraph{{0, 0, []int{0}}, {1, 1, []int{1}}}
		if !reflect.DeepEqual(res.Subgraphs, wantSub) {
			t.Fatalf("subgraphs = %v, want %v", res.Subgraphs, wantSub)
		}
		checkMatrixClose(t, "S", res.S, h, 1e-12)
		checkMatrixClose(t, "P", res.P, [][]float64{{1 - p, p}, {p, 1 - p}}, 1e-14)
		checkScalar(t, "NodeMot", res.NodeMot, ell, 1e-13)
		checkScalar(t, "MotSub", res.MotSub, 4+ell, 1e-13)
		checkScalar(t, "Cut", res.Cut, 0, 0)
		wantOrtho := ortho
		if selected {
			wantOrtho = 0
		}
		checkScalar(t, "Ortho", res.Ortho, wantOrtho, 1e-14)
		checkScalar(t, "Reg", res.Reg, wantOrtho, 1e-14)
		checkScalar(t, "Contra", res.Contra, contra, 1e-13)
		checkScalar(t, "Total", res.Total, 0.3*(ell+2*(4+ell)+5*wantOrtho)+0.7*contra, 1e-13)
	}
}

// docs/method.md §2 readout and §3 subgraph pooling: the mean, not the sum, of
// the member rows. Rows [1,2], [3,4], [5,9]: groups {0,1,2} → [3,5],
// {2} → [5,9], {1,0} → [2,3].
func TestMeanPool(t *testing.T) {
	h := [][]float64{{1, 2}, {3, 4}, {5, 9}}
	got := meanPool(h, [][]int{{0, 1, 2}, {2}, {1, 0}})
	checkMatrixClose(t, "meanPool", got, [][]float64{{3, 5}, {5, 9}, {2, 3}}, 1e-15)
}
