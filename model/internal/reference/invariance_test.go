package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// invTol is the relative tolerance of the invariance tests: the compared
// runs differ only in float64 summation order.
const invTol = 1e-10

// requireNontrivial fails the test if a random case would not exercise the
// losses: it needs subgraphs, edges and non-zero terms.
func requireNontrivial(t *testing.T, r Result) {
	t.Helper()
	if len(r.Subgraphs) == 0 || r.Cut == 0 || r.Ortho == 0 || r.Contra == 0 || r.MotSub == 0 {
		t.Fatalf("degenerate random case: J = %d, losses %v", len(r.Subgraphs), lossesOf(r))
	}
}

// subgraphKey identifies a subgraph by its slot.
func subgraphKey(g, m int) string { return fmt.Sprintf("%d/%d", g, m) }

// docs/method.md §2–§6: relabelling the nodes of a batch (shuffling the nodes
// inside each graph, reordering the graphs, shuffling the edge list)
// permutes H, Q, E, the Sinkhorn columns, the assignment and the
// subgraphs accordingly, and leaves every loss unchanged.
func TestForwardPermutationInvariance(t *testing.T) {
	for _, selected := range []bool{false, true} {
		t.Run(fmt.Sprintf("OrthoSelected=%v", selected), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			c := testConfig()
			c.OrthoSelected = selected
			w := randomWeights(rng, c)
			sizes := []int{5, 7, 3, 6, 1}
			var mols []molecule
			for _, n := range sizes {
				mols = append(mols, randomMolecule(rng, n))
			}
			b := batchOf(rng, mols)
			base, err := Forward(w, b, c)
			if err != nil {
				t.Fatal(err)
			}
			requireNontrivial(t, base)

			// New graph order: graph g becomes newGraph[g]. Nodes are laid out
			// graph by graph in the new order, shuffled within each graph.
			nb := len(sizes)
			newGraph := rng.Perm(nb)
			oldGraph := make([]int, nb)
			for g, ng := range newGraph {
				oldGraph[ng] = g
			}
			groups := groupNodes(b.NodeGraph, nb)
			n := len(b.X)
			newNode := make([]int, n)
			var pb Batch
			pb.NumGraphs = nb
			for ng := 0; ng < nb; ng++ {
				nodes := slices.Clone(groups[oldGraph[ng]])
				rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
				for _, l := range nodes {
					newNode[l] = len(pb.X)
					pb.X = append(pb.X, b.X[l])
					pb.NodeGraph = append(pb.NodeGraph, ng)
				}
			}
			identityPerm := true
			for l, nl := range newNode {
				identityPerm = identityPerm && l == nl
			}
			if identityPerm {
				t.Fatal("the node permutation is the identity")
			}
			order := rng.Perm(len(b.Src))
			for _, k := range order {
				pb.Src = append(pb.Src, newNode[b.Src[k]])
				pb.Dst = append(pb.Dst, newNode[b.Dst[k]])
				pb.EdgeAttr = append(pb.EdgeAttr, b.EdgeAttr[k])
			}
			perm, err := Forward(w, pb, c)
			if err != nil {
				t.Fatal(err)
			}

			for l := 0; l < n; l++ {
				nl := newNode[l]
				for ch := range base.H[l] {
					if !near(perm.H[nl][ch], base.H[l][ch], invTol) {
						t.Fatalf("H[%d][%d] = %g, permuted %g", l, ch, base.H[l][ch], perm.H[nl][ch])
					}
				}
				for k := range base.Q[l] {
					if !near(perm.Q[nl][k], base.Q[l][k], invTol) {
						t.Fatalf("Q[%d][%d] = %g, permuted %g", l, k, base.Q[l][k], perm.Q[nl][k])
					}
					if !nearRel(float64(perm.SinkhornA[k][nl]), float64(base.SinkhornA[k][l]), float32Tol) {
						t.Fatalf("A[%d][%d] = %g, permuted %g", k, l, base.SinkhornA[k][l], perm.SinkhornA[k][nl])
					}
				}
				if perm.Motif[nl] != base.Motif[l] {
					t.Fatalf("motif of node %d = %d, permuted %d", l, base.Motif[l], perm.Motif[nl])
				}
			}
			for g := 0; g < nb; g++ {
				ng := newGraph[g]
				for ch := range base.E[g] {
					if !near(perm.E[ng][ch], base.E[g][ch], invTol) {
						t.Fatalf("E[%d][%d] = %g, permuted %g", g, ch, base.E[g][ch], perm.E[ng][ch])
					}
				}
				checkScalar(t, fmt.Sprintf("cut_%d", g), perm.CutG[ng], base.CutG[g], invTol)
				checkScalar(t, fmt.Sprintf("ortho_%d", g), perm.OrthoG[ng], base.OrthoG[g], invTol)
			}

			// Subgraphs: the same slots, relabelled.
			if len(perm.Subgraphs) != len(base.Subgraphs) {
				t.Fatalf("%d subgraphs, permuted %d", len(base.Subgraphs), len(perm.Subgraphs))
			}
			index := map[string]int{}
			for j, sg := range perm.Subgraphs {
				if !slices.IsSorted(sg.Nodes) {
					t.Errorf("permuted subgraph %d members not sorted: %v", j, sg.Nodes)
				}
				index[subgraphKey(sg.Graph, sg.Motif)] = j
			}
			jmap := make([]int, len(base.Subgraphs))
			for j, sg := range base.Subgraphs {
				pj, ok := index[subgraphKey(newGraph[sg.Graph], sg.Motif)]
				if !ok {
					t.Fatalf("subgraph %v has no permuted counterpart", sg)
				}
				jmap[j] = pj
				var mapped []int
				for _, l := range sg.Nodes {
					mapped = append(mapped, newNode[l])
				}
				slices.Sort(mapped)
				if !reflect.DeepEqual(mapped, perm.Subgraphs[pj].Nodes) {
					t.Fatalf("subgraph %v maps to %v, permuted has %v", sg, mapped, perm.Subgraphs[pj].Nodes)
				}
				for ch := range base.S[j] {
					checkScalar(t, "S", perm.S[pj][ch], base.S[j][ch], invTol)
				}
				for k := range base.P[j] {
					checkScalar(t, "P", perm.P[pj][k], base.P[j][k], invTol)
				}
				for g := 0; g < nb; g++ {
					checkScalar(t, "Y", perm.Y[newGraph[g]][pj], base.Y[g][j], invTol)
				}
			}

			for name, v := range lossesOf(base) {
				checkScalar(t, name, lossesOf(perm)[name], v, invTol)
			}
		})
	}
}

// docs/method.md §2–§6: a batch holding a graph twice gives each copy the
// quantities of the graph alone. Batch norm statistics are unchanged (same
// mean, same biased variance), so H, E, Q, P, S, the assignment and every
// per-graph and mean loss term agree; the Sinkhorn matrix is halved
// (A /= sum doubles the total, the row and column steps then keep every
// entry at half its single-graph value, see below). Only L_contra changes:
// every logit row is duplicated, so each log-softmax drops by log 2, and
// with one graph per copy L_contra grows by J·log 2, J the subgraphs of one
// copy.
//
// Halving: with A' = [A, A]/2, row sums of A' equal those of A, so the row
// step scales both alike; column sums of A' are half those of A, and the
// column factor (1/(2N))/(c/2) = (1/N)/c is unchanged.
func TestForwardDuplicateGraph(t *testing.T) {
	for _, selected := range []bool{false, true} {
		t.Run(fmt.Sprintf("OrthoSelected=%v", selected), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 5))
			c := testConfig()
			c.OrthoSelected = selected
			w := randomWeights(rng, c)
			m := randomMolecule(rng, 7)
			one, err := Forward(w, batchOf(rng, []molecule{m}), c)
			if err != nil {
				t.Fatal(err)
			}
			requireNontrivial(t, one)
			two, err := Forward(w, batchOf(rng, []molecule{m, m}), c)
			if err != nil {
				t.Fatal(err)
			}
			n := len(one.H)
			for copyIdx := 0; copyIdx < 2; copyIdx++ {
				off := copyIdx * n
				checkMatrixClose(t, "H copy", two.H[off:off+n], one.H, invTol)
				checkMatrixClose(t, "Q copy", two.Q[off:off+n], one.Q, invTol)
				checkMatrixClose(t, "E copy", two.E[copyIdx:copyIdx+1], one.E, invTol)
				if !reflect.DeepEqual(two.Motif[off:off+n], one.Motif) {
					t.Fatalf("motif copy %d = %v, want %v", copyIdx, two.Motif[off:off+n], one.Motif)
				}
				for k := range one.SinkhornA {
					for l := 0; l < n; l++ {
						if g, want := float64(two.SinkhornA[k][off+l]), float64(one.SinkhornA[k][l])/2; !nearRel(g, want, float32Tol) {
							t.Fatalf("A[%d][%d] of copy %d = %.9g, want %.9g", k, l, copyIdx, g, want)
						}
					}
				}
				checkScalar(t, "cut copy", two.CutG[copyIdx], one.CutG[0], invTol)
				checkScalar(t, "ortho copy", two.OrthoG[copyIdx], one.OrthoG[0], invTol)
			}
			j := len(one.Subgraphs)
			if len(two.Subgraphs) != 2*j {
				t.Fatalf("%d subgraphs, want 2×%d", len(two.Subgraphs), j)
			}
			for i, sg := range one.Subgraphs {
				for copyIdx := 0; copyIdx < 2; copyIdx++ {
					got := two.Subgraphs[copyIdx*j+i]
					var shifted []int
					for _, l := range sg.Nodes {
						shifted = append(shifted, l+copyIdx*n)
					}
					want := Subgraph{Graph: copyIdx, Motif: sg.Motif, Nodes: shifted}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("subgraph %d of copy %d = %v, want %v", i, copyIdx, got, want)
					}
				}
			}
			checkMatrixClose(t, "S copy 0", two.S[:j], one.S, invTol)
			checkMatrixClose(t, "S copy 1", two.S[j:], one.S, invTol)
			checkMatrixClose(t, "P copy 0", two.P[:j], one.P, invTol)
			checkMatrixClose(t, "P copy 1", two.P[j:], one.P, invTol)
			for _, name := range []string{"NodeMot", "MotSub", "Cut", "Ortho", "Reg"} {
				checkScalar(t, name, lossesOf(two)[name], lossesOf(one)[name], invTol)
			}
			checkScalar(t, "Contra", two.Contra, one.Contra+float64(j)*math.Ln2, invTol)
			reg := c.LambdaNode*one.NodeMot + c.LambdaSub*one.MotSub + c.LambdaReg*one.Reg
			checkScalar(t, "Total", two.Total, c.Alpha*reg+(1-c.Alpha)*(one.Contra+float64(j)*math.Ln2), invTol)
		})
	}
}

// docs/method.md §3: after at least one iteration every column of A sums to
// 1/N (the column step comes last); with many iterations on a mildly
// peaked Q the rows also converge to 1/K; the argmax is per column.
func TestSinkhornBalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, k = 9, 4
	q, _ := softmaxRows(randMatrix(rng, n, k, 2))
	for _, tc := range []struct {
		lambda  float64
		iters   int
		rowsToo bool
	}{{20, 1, false}, {20, 5, false}, {3, 500, true}} {
		a := Sinkhorn(q, tc.lambda, tc.iters)
		if len(a) != k || len(a[0]) != n {
			t.Fatalf("A is %d×%d, want %d×%d", len(a), len(a[0]), k, n)
		}
		for l := 0; l < n; l++ {
			s := 0.0
			for m := 0; m < k; m++ {
				s += float64(a[m][l])
			}
			if math.Abs(s-1.0/n) > 1e-6/n {
				t.Errorf("λ=%g iters=%d: column %d sums to %.9g, want 1/%d", tc.lambda, tc.iters, l, s, n)
			}
		}
		if tc.rowsToo {
			for m := 0; m < k; m++ {
				s := 0.0
				for _, v := range a[m] {
					s += float64(v)
				}
				if math.Abs(s-1.0/k) > 1e-5/k {
					t.Errorf("λ=%g iters=%d: row %d sums to %.9g, want 1/%d", tc.lambda, tc.iters, m, s, k)
				}
			}
		}
	}
}

// ForwardWithMotifs with Forward's own assignment reproduces Forward
// exactly; with another assignment the subgraphs and L_node-mot follow it.
func TestForwardWithMotifs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	c := testConfig()
	w := randomWeights(rng, c)
	b := batchOf(rng, []molecule{randomMolecule(rng, 6), randomMolecule(rng, 5)})
	base, err := Forward(w, b, c)
	if err != nil {
		t.Fatal(err)
	}
	same, err := ForwardWithMotifs(w, b, c, base.Motif)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(same, base) {
		t.Error("ForwardWithMotifs(Forward's motifs) differs from Forward")
	}

	// Every node to motif 0: one subgraph per graph (each has ≥ 2 nodes),
	// L_node-mot = −mean_l log Q[l][0].
	zero := make([]int, len(b.X))
	alt, err := ForwardWithMotifs(w, b, c, zero)
	if err != nil {
		t.Fatal(err)
	}
	want := []Subgraph{{0, 0, []int{0, 1, 2, 3, 4, 5}}, {1, 0, []int{6, 7, 8, 9, 10}}}
	if !reflect.DeepEqual(alt.Subgraphs, want) {
		t.Errorf("subgraphs = %v, want %v", alt.Subgraphs, want)
	}
	nm := 0.0
	for _, row := range alt.Q {
		nm -= math.Log(row[0])
	}
	checkScalar(t, "NodeMot", alt.NodeMot, nm/float64(len(alt.Q)), 1e-12)
	checkMatrixClose(t, "SinkhornA", toF64(alt.SinkhornA), toF64(base.SinkhornA), 0)

	for _, bad := range [][]int{nil, zero[1:], append(slices.Clone(zero[1:]), c.Motifs), append(slices.Clone(zero[1:]), -1)} {
		if _, err := ForwardWithMotifs(w, b, c, bad); err == nil {
			t.Errorf("ForwardWithMotifs(%v) succeeded, want an error", bad)
		}
	}
}

func toF64(a [][]float32) [][]float64 {
	out := make([][]float64, len(a))
	for i, row := range a {
		out[i] = make([]float64, len(row))
		for j, v := range row {
			out[i][j] = float64(v)
		}
	}
	return out
}

// docs/method.md §2, res+ wiring with L = 3 on a random batch: encode equals
// the spec's recursion written out with the primitives that the hand cases
// check (atomEncode, bondEncode, genConv, batchNorm), with every layer's own
// conv, temperature and norm and the one shared bond embedding:
//
//	h = conv_0(h0); h = conv_1(ReLU(BN_0(h))) + h; h = conv_2(ReLU(BN_1(h))) + h; H = BN_2(h)
func TestEncoderWiringThreeLayers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	c := testConfig()
	if c.Layers != 3 {
		t.Fatalf("test config has %d layers, want 3", c.Layers)
	}
	w := randomWeights(rng, c)
	w.Convs[0].T, w.Convs[1].T, w.Convs[2].T = 0.3, 2.5, 7 // distinct temperatures
	b := batchOf(rng, []molecule{randomMolecule(rng, 6), randomMolecule(rng, 4)})
	h0 := atomEncode(w.AtomEmb, b.X, c.Hidden)
	e := bondEncode(w.BondEmb, b.EdgeAttr, c.Hidden)
	add := func(x, y [][]float64) [][]float64 {
		out := zeros(len(x), len(x[0]))
		for i := range x {
			for j := range x[i] {
				out[i][j] = x[i][j] + y[i][j]
			}
		}
		return out
	}
	h1 := genConv(h0, e, b.Src, b.Dst, w.Convs[0])
	h2 := add(genConv(relu(batchNorm(h1, w.Norms[0])), e, b.Src, b.Dst, w.Convs[1]), h1)
	h3 := add(genConv(relu(batchNorm(h2, w.Norms[1])), e, b.Src, b.Dst, w.Convs[2]), h2)
	want := batchNorm(h3, w.Norms[2])
	checkMatrixClose(t, "H", encode(w, b, c), want, 1e-13)
}

// docs/method.md §1 defaults (d = 300, K = 20, τ = 0.05, λ = 20, η = 4) on a
// batch of realistic molecules: everything is finite, Q's rows sum to 1,
// and the losses are positive where they must be (L_node-mot, L_mot-sub,
// ortho) and cut_g ∈ [−1, 0].
func TestDefaultConfigFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	c := DefaultConfig()
	w := randomWeights(rng, c)
	var mols []molecule
	for i := 0; i < 8; i++ {
		mols = append(mols, randomMolecule(rng, 10+rng.IntN(16)))
	}
	r, err := Forward(w, batchOf(rng, mols), c)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range lossesOf(r) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Errorf("%s = %v", name, v)
		}
	}
	for l, row := range r.Q {
		s := 0.0
		for _, v := range row {
			s += v
		}
		if math.Abs(s-1) > 1e-12 {
			t.Errorf("Q row %d sums to %v", l, s)
		}
	}
	if r.NodeMot <= 0 || r.Ortho <= 0 || (len(r.Subgraphs) > 0 && r.MotSub <= 0) {
		t.Errorf("non-positive loss: %v", lossesOf(r))
	}
	for g, cut := range r.CutG {
		if cut < -1-1e-12 || cut > 1e-12 {
			t.Errorf("cut_%d = %v, want in [−1, 0]", g, cut)
		}
	}
	t.Logf("N = %d, J = %d, losses %v", len(r.H), len(r.Subgraphs), lossesOf(r))
}
