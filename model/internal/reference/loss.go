package reference

import "math"

// cutPerGraph returns the MinCut term of docs/method.md §5 for every graph:
//
//	cut_g = − Σ_{(u→v)∈E_g} ⟨Q_u, Q_v⟩ / Σ_{u∈V_g} deg(u)·‖Q_u‖²
//
// with deg(u) the number of directed edges leaving u, so the denominator is
// Σ_{(u→v)∈E_g} ‖Q_u‖². Both directions of every bond are in the edge
// list, so each bond counts twice in both sums. A graph without edges gets
// cut_g = 0. An edge belongs to the graph of its source (validate ensures
// both ends are in the same graph).
func cutPerGraph(q [][]float64, src, dst []int, nodeGraph []int, numGraphs int) []float64 {
	num := make([]float64, numGraphs)
	den := make([]float64, numGraphs)
	hasEdge := make([]bool, numGraphs)
	for k := range src {
		u, v := src[k], dst[k]
		g := nodeGraph[u]
		hasEdge[g] = true
		for m := range q[u] {
			num[g] += q[u][m] * q[v][m]
			den[g] += q[u][m] * q[u][m]
		}
	}
	cut := make([]float64, numGraphs)
	for g := range cut {
		if hasEdge[g] {
			cut[g] = -num[g] / den[g]
		}
	}
	return cut
}

// orthoTerm is the orthogonality term of docs/method.md §5 for one graph, over
// the motif columns cols (all K by default, the graph's J_g subgraph motifs
// in the restricted form):
//
//	G       = Q̃ᵀQ̃           (|cols| × |cols|, Q̃ = rows nodes, columns cols of Q)
//	ortho_g = ‖ G/‖G‖_F − I/√|cols| ‖_F
//
// It is 0 when cols is empty. Nothing is clamped: ‖G‖_F = 0 gives NaN.
func orthoTerm(q [][]float64, nodes, cols []int) float64 {
	m := len(cols)
	if m == 0 {
		return 0
	}
	g := zeros(m, m)
	for _, u := range nodes {
		for a, ca := range cols {
			for b, cb := range cols {
				g[a][b] += q[u][ca] * q[u][cb]
			}
		}
	}
	fro := 0.0
	for a := range g {
		for b := range g[a] {
			fro += g[a][b] * g[a][b]
		}
	}
	fro = math.Sqrt(fro)
	diag := 1 / math.Sqrt(float64(m))
	s := 0.0
	for a := range g {
		for b := range g[a] {
			v := g[a][b] / fro
			if a == b {
				v -= diag
			}
			s += v * v
		}
	}
	return math.Sqrt(s)
}

// contrastive is the graph-to-subgraph loss of docs/method.md §6:
//
//	Y_ij     = cos(W_e·e_i, s_j)/τ   over all graphs i and subgraphs j
//	L_contra = −mean over graphs i with ≥ 1 subgraph of
//	           Σ_{j ∈ subgraphs(i)} log_softmax_j(Y_i·)_j
//
// where the log-softmax runs over all J subgraphs of the batch and
// subGraphOf[j] is subgraph j's graph. It returns 0 (and Y with no columns)
// when no graph has a subgraph, and Y (len(e) × J) in every case.
func contrastive(e, s, we [][]float64, subGraphOf []int, tau float64) (float64, [][]float64) {
	y := cosineLogits(linearRows(we, e), s, tau)
	if len(s) == 0 {
		return 0, y
	}
	sum := make([]float64, len(e))
	has := make([]bool, len(e))
	lse := make([]float64, len(e))
	for i := range e {
		lse[i] = logSumExp(y[i])
	}
	for j, i := range subGraphOf {
		has[i] = true
		sum[i] += y[i][j] - lse[i]
	}
	total, count := 0.0, 0
	for i := range e {
		if has[i] {
			total += sum[i]
			count++
		}
	}
	return -total / float64(count), y
}
