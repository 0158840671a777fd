// Package reference is an independent float64 reference implementation of
// one MICRO-Graph pre-training forward pass, as specified in
// docs/method.md §2–§6 (encoder, node-to-motif assignment,
// Sinkhorn, motif-like subgraphs, MinCut regulariser, graph-to-subgraph
// contrastive loss).
//
// It is written with plain slices and loops, shares no code with the
// libtorch implementation, and exists so that the tensor implementation can
// be checked against it (to about 1e-6 relative). Everything is float64
// except Sinkhorn, which docs/method.md §3 fixes to float32.
//
// The reference runs with dropout 0 and without subgraph perturbation
// (p_drop = p_add = 0, docs/method.md §4), so a forward pass is deterministic.
package reference

import (
	"errors"
	"fmt"
	"math"
)

// AtomTableSizes are the row counts of the nine OGB atom embedding tables
// (docs/method.md §2). Forward accepts tables of any row count; these are the
// sizes the real model uses.
var AtomTableSizes = [9]int{119, 5, 12, 12, 10, 6, 6, 2, 2}

// BondTableSizes are the row counts of the three OGB bond embedding tables
// (docs/method.md §2).
var BondTableSizes = [3]int{5, 6, 2}

// Config holds the hyper-parameters of one forward pass (docs/method.md §1).
type Config struct {
	Layers         int     // encoder depth L (≥ 1), docs/method.md §2
	Hidden         int     // width d of every embedding and projection
	Motifs         int     // number of motif slots K
	Tau            float64 // τ, temperature of every cosine softmax (> 0)
	SinkhornLambda float64 // λ, Sinkhorn entropy parameter, docs/method.md §3
	SinkhornIters  int     // Sinkhorn iterations (≥ 0)
	Eta            int     // η, smallest subgraph kept, in nodes (≥ 1), docs/method.md §4
	Alpha          float64 // α in L = α·L_motif + (1−α)·L_contra
	LambdaNode     float64 // λ_n, weight of L_node-mot in L_motif
	LambdaSub      float64 // λ_s, weight of L_mot-sub in L_motif
	LambdaReg      float64 // λ_r, weight of L_reg in L_motif
	// OrthoSelected selects the restricted orthogonality term of docs/method.md
	// §5: per graph, only the motif columns that form a subgraph in that
	// graph. False (the default) uses all K columns.
	OrthoSelected bool
}

// DefaultConfig returns the defaults of docs/method.md §1 (L = 5, d = 300,
// K = 20, τ = 0.05, λ = 20, 5 Sinkhorn iterations, η = 4, α = 0.5,
// λ_n = λ_s = 1, λ_r = 5, all K columns in the orthogonality term).
func DefaultConfig() Config {
	return Config{
		Layers: 5, Hidden: 300, Motifs: 20,
		Tau: 0.05, SinkhornLambda: 20, SinkhornIters: 5, Eta: 4,
		Alpha: 0.5, LambdaNode: 1, LambdaSub: 1, LambdaReg: 5,
	}
}

// Weights are the parameters of the encoder and of the motif heads. Every
// matrix follows the PyTorch convention y = W·x (+ b): W has one row per
// output channel.
type Weights struct {
	// AtomEmb[f] is atom embedding table f: one row of Hidden values per
	// category of atom feature f (docs/method.md §2).
	AtomEmb [9][][]float64
	// BondEmb[f] is bond embedding table f, shared by all layers.
	BondEmb [3][][]float64
	// Convs are the GENConv layers conv_0..conv_{L−1} (Layers entries).
	Convs []Conv
	// Norms are the batch norms BN_0..BN_{L−1} (Layers entries).
	Norms []Norm
	// Motifs is the motif embedding table M, K × Hidden.
	Motifs [][]float64
	// Wh, Ws, We are the Hidden × Hidden projections (no bias) applied to
	// node embeddings (Q), subgraph embeddings (P) and graph embeddings
	// (contrastive loss), docs/method.md §3 and §6.
	Wh, Ws, We [][]float64
}

// Conv holds one GENConv layer (docs/method.md §2): the single Linear(d, d) of
// its MLP, h' = W·(h + agg) + B, and its softmax temperature T.
type Conv struct {
	W [][]float64 // Hidden × Hidden
	B []float64   // Hidden
	T float64     // aggregation temperature t
}

// Norm holds one BatchNorm1d's affine parameters (training mode: batch
// statistics, biased variance, eps 1e-5).
type Norm struct {
	Gamma, Beta []float64 // Hidden each
}

// Batch is B molecules as one disjoint graph (docs/method.md §2).
type Batch struct {
	// X holds the nine integer atom features of every node (N rows).
	X [][9]int64
	// Src and Dst are the directed edges Src[k] → Dst[k]; every bond is
	// expected in both directions. Edges need not be sorted.
	Src, Dst []int
	// EdgeAttr holds the three integer bond features of every directed edge.
	EdgeAttr [][3]int64
	// NodeGraph maps each node to its graph, 0..NumGraphs−1. The nodes of a
	// graph must be contiguous, and every graph must have at least one node.
	NodeGraph []int
	// NumGraphs is B.
	NumGraphs int
}

// Subgraph is one motif-like subgraph (docs/method.md §4): the live slot
// Graph·K + Motif and its members, in increasing node order.
type Subgraph struct {
	Graph, Motif int
	Nodes        []int
}

// Result holds every intermediate quantity and loss of one forward pass.
// N is the number of nodes, B of graphs, K of motifs, J of subgraphs.
type Result struct {
	H [][]float64 // N × d node embeddings after the final norm (§2)
	E [][]float64 // B × d graph embeddings, mean of H per graph (§2)
	Q [][]float64 // N × K node-to-motif probabilities (§3)
	// SinkhornA is the balanced K × N matrix A after the Sinkhorn
	// iterations, computed in float32 (§3).
	SinkhornA [][]float32
	// Motif[l] is argmax_k SinkhornA[k][l], the first maximum on ties
	// (or the assignment given to ForwardWithMotifs).
	Motif     []int
	Subgraphs []Subgraph  // J subgraphs, in slot order (§4)
	S         [][]float64 // J × d subgraph embeddings, mean of H over members
	P         [][]float64 // J × K subgraph-to-motif probabilities (§3)
	// Y is the B × J matrix of contrastive logits cos(W_e·e_i, s_j)/τ (§6).
	Y [][]float64
	// CutG and OrthoG are the per-graph MinCut terms cut_g and ortho_g (§5).
	CutG, OrthoG []float64

	NodeMot float64 // L_node-mot = −mean_l log Q[l][Motif[l]]
	MotSub  float64 // L_mot-sub = −mean_j log P[j][motif_j] (0 if J = 0)
	Cut     float64 // mean over graphs of cut_g
	Ortho   float64 // mean over graphs of ortho_g
	Reg     float64 // L_reg = Cut + Ortho = mean over graphs of (cut_g + ortho_g)
	Contra  float64 // L_contra (§6)
	// Total is α(λ_n·NodeMot + λ_s·MotSub + λ_r·Reg) + (1−α)·Contra.
	Total float64
}

// Forward runs one pre-training forward pass (docs/method.md §2–§6) with dropout
// 0 and no subgraph perturbation. It returns an error when the weights,
// batch or config are inconsistent (shapes, index ranges, edges between
// graphs, non-contiguous graphs, empty graphs) or when the float32
// Sinkhorn matrix is not finite (λ·Q beyond float32's exp range).
func Forward(w Weights, b Batch, c Config) (Result, error) {
	return forward(w, b, c, nil)
}

// ForwardWithMotifs is Forward with the node-to-motif assignment given
// instead of taken from the Sinkhorn argmax (SinkhornA is still computed
// and returned). It lets a check compare everything downstream of the
// assignment when the two implementations' float32 Sinkhorn matrices break
// a near tie differently. motif must hold N values in 0..K−1.
func ForwardWithMotifs(w Weights, b Batch, c Config, motif []int) (Result, error) {
	if motif == nil {
		return Result{}, errors.New("reference: nil motif assignment")
	}
	return forward(w, b, c, motif)
}

func forward(w Weights, b Batch, c Config, motifOverride []int) (Result, error) {
	if err := validate(w, b, c); err != nil {
		return Result{}, err
	}
	n := len(b.X)
	k := c.Motifs
	if motifOverride != nil {
		if len(motifOverride) != n {
			return Result{}, fmt.Errorf("reference: motif assignment has %d entries, want %d", len(motifOverride), n)
		}
		for l, m := range motifOverride {
			if m < 0 || m >= k {
				return Result{}, fmt.Errorf("reference: motif[%d] = %d out of range [0, %d)", l, m, k)
			}
		}
	}
	var r Result

	// §2: encoder and mean readout.
	r.H = encode(w, b, c)
	graphs := groupNodes(b.NodeGraph, b.NumGraphs)
	r.E = meanPool(r.H, graphs)

	// §3: Q = softmax_k(cos(W_h h, M)/τ).
	var logQ [][]float64
	r.Q, logQ = motifProbs(w.Wh, r.H, w.Motifs, c.Tau)

	// §3: Sinkhorn in float32, then the argmax over motifs per node.
	r.SinkhornA = Sinkhorn(r.Q, c.SinkhornLambda, c.SinkhornIters)
	for _, row := range r.SinkhornA {
		for l, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return Result{}, fmt.Errorf("reference: float32 Sinkhorn matrix is not finite at node %d (λ·Q too large for float32 exp)", l)
			}
		}
	}
	if motifOverride != nil {
		r.Motif = append([]int(nil), motifOverride...)
	} else {
		r.Motif = ArgmaxColumns(r.SinkhornA)
	}

	// §4: motif-like subgraphs and their embeddings.
	r.Subgraphs = buildSubgraphs(b.NodeGraph, r.Motif, b.NumGraphs, k, c.Eta)
	members := make([][]int, len(r.Subgraphs))
	for j, sg := range r.Subgraphs {
		members[j] = sg.Nodes
	}
	r.S = meanPool(r.H, members)

	// §3: P = softmax_k(cos(W_s s, M)/τ).
	var logP [][]float64
	r.P, logP = motifProbs(w.Ws, r.S, w.Motifs, c.Tau)

	// §3: L_node-mot and L_mot-sub, the cross-entropies against one-hot
	// targets Q* (the Sinkhorn argmax) and P̂ (each subgraph's motif).
	for l := 0; l < n; l++ {
		r.NodeMot -= logQ[l][r.Motif[l]]
	}
	r.NodeMot /= float64(n)
	if len(r.Subgraphs) > 0 {
		for j, sg := range r.Subgraphs {
			r.MotSub -= logP[j][sg.Motif]
		}
		r.MotSub /= float64(len(r.Subgraphs))
	}

	// §5: MinCut regulariser per graph.
	r.CutG = cutPerGraph(r.Q, b.Src, b.Dst, b.NodeGraph, b.NumGraphs)
	r.OrthoG = make([]float64, b.NumGraphs)
	allCols := make([]int, k)
	for i := range allCols {
		allCols[i] = i
	}
	selected := make([][]int, b.NumGraphs) // motifs with a subgraph, per graph, increasing
	for _, sg := range r.Subgraphs {
		selected[sg.Graph] = append(selected[sg.Graph], sg.Motif)
	}
	for g := 0; g < b.NumGraphs; g++ {
		cols := allCols
		if c.OrthoSelected {
			cols = selected[g]
		}
		r.OrthoG[g] = orthoTerm(r.Q, graphs[g], cols)
	}
	for g := 0; g < b.NumGraphs; g++ {
		r.Cut += r.CutG[g]
		r.Ortho += r.OrthoG[g]
		r.Reg += r.CutG[g] + r.OrthoG[g]
	}
	r.Cut /= float64(b.NumGraphs)
	r.Ortho /= float64(b.NumGraphs)
	r.Reg /= float64(b.NumGraphs)

	// §6: graph-to-subgraph contrastive loss.
	subGraphOf := make([]int, len(r.Subgraphs))
	for j, sg := range r.Subgraphs {
		subGraphOf[j] = sg.Graph
	}
	r.Contra, r.Y = contrastive(r.E, r.S, w.We, subGraphOf, c.Tau)

	r.Total = c.Alpha*(c.LambdaNode*r.NodeMot+c.LambdaSub*r.MotSub+c.LambdaReg*r.Reg) +
		(1-c.Alpha)*r.Contra
	return r, nil
}

// validate checks every shape and index Forward relies on.
func validate(w Weights, b Batch, c Config) error {
	switch {
	case c.Layers < 1:
		return fmt.Errorf("reference: Layers = %d, want ≥ 1", c.Layers)
	case c.Hidden < 1:
		return fmt.Errorf("reference: Hidden = %d, want ≥ 1", c.Hidden)
	case c.Motifs < 1:
		return fmt.Errorf("reference: Motifs = %d, want ≥ 1", c.Motifs)
	case !(c.Tau > 0) || math.IsInf(c.Tau, 0):
		return fmt.Errorf("reference: Tau = %v, want finite > 0", c.Tau)
	case math.IsNaN(c.SinkhornLambda) || math.IsInf(c.SinkhornLambda, 0):
		return fmt.Errorf("reference: SinkhornLambda = %v, want finite", c.SinkhornLambda)
	case c.SinkhornIters < 0:
		return fmt.Errorf("reference: SinkhornIters = %d, want ≥ 0", c.SinkhornIters)
	case c.Eta < 1:
		return fmt.Errorf("reference: Eta = %d, want ≥ 1", c.Eta)
	}
	d := c.Hidden
	for f, t := range w.AtomEmb {
		if err := checkMatrix(fmt.Sprintf("AtomEmb[%d]", f), t, -1, d); err != nil {
			return err
		}
		if len(t) == 0 {
			return fmt.Errorf("reference: AtomEmb[%d] has no rows", f)
		}
	}
	for f, t := range w.BondEmb {
		if err := checkMatrix(fmt.Sprintf("BondEmb[%d]", f), t, -1, d); err != nil {
			return err
		}
		if len(t) == 0 && len(b.Src) > 0 {
			return fmt.Errorf("reference: BondEmb[%d] has no rows", f)
		}
	}
	if len(w.Convs) != c.Layers {
		return fmt.Errorf("reference: %d convs, want Layers = %d", len(w.Convs), c.Layers)
	}
	if len(w.Norms) != c.Layers {
		return fmt.Errorf("reference: %d norms, want Layers = %d", len(w.Norms), c.Layers)
	}
	for l, cv := range w.Convs {
		if err := checkMatrix(fmt.Sprintf("Convs[%d].W", l), cv.W, d, d); err != nil {
			return err
		}
		if len(cv.B) != d {
			return fmt.Errorf("reference: Convs[%d].B has %d entries, want %d", l, len(cv.B), d)
		}
		if math.IsNaN(cv.T) || math.IsInf(cv.T, 0) {
			return fmt.Errorf("reference: Convs[%d].T = %v, want finite", l, cv.T)
		}
	}
	for l, nm := range w.Norms {
		if len(nm.Gamma) != d || len(nm.Beta) != d {
			return fmt.Errorf("reference: Norms[%d] has %d/%d gamma/beta entries, want %d", l, len(nm.Gamma), len(nm.Beta), d)
		}
	}
	if err := checkMatrix("Motifs", w.Motifs, c.Motifs, d); err != nil {
		return err
	}
	for _, m := range []struct {
		name string
		w    [][]float64
	}{{"Wh", w.Wh}, {"Ws", w.Ws}, {"We", w.We}} {
		if err := checkMatrix(m.name, m.w, d, d); err != nil {
			return err
		}
	}

	n := len(b.X)
	if n == 0 {
		return errors.New("reference: batch has no nodes")
	}
	if b.NumGraphs < 1 {
		return fmt.Errorf("reference: NumGraphs = %d, want ≥ 1", b.NumGraphs)
	}
	for l, x := range b.X {
		for f, v := range x {
			if v < 0 || v >= int64(len(w.AtomEmb[f])) {
				return fmt.Errorf("reference: X[%d][%d] = %d out of range [0, %d)", l, f, v, len(w.AtomEmb[f]))
			}
		}
	}
	if len(b.NodeGraph) != n {
		return fmt.Errorf("reference: NodeGraph has %d entries, want %d", len(b.NodeGraph), n)
	}
	seen := make([]bool, b.NumGraphs)
	for l, g := range b.NodeGraph {
		if g < 0 || g >= b.NumGraphs {
			return fmt.Errorf("reference: NodeGraph[%d] = %d out of range [0, %d)", l, g, b.NumGraphs)
		}
		if l > 0 && g != b.NodeGraph[l-1] && seen[g] {
			return fmt.Errorf("reference: nodes of graph %d are not contiguous (node %d)", g, l)
		}
		seen[g] = true
	}
	for g, ok := range seen {
		if !ok {
			return fmt.Errorf("reference: graph %d has no nodes", g)
		}
	}
	if len(b.Dst) != len(b.Src) || len(b.EdgeAttr) != len(b.Src) {
		return fmt.Errorf("reference: %d src, %d dst, %d edge attrs; want equal counts", len(b.Src), len(b.Dst), len(b.EdgeAttr))
	}
	for k := range b.Src {
		u, v := b.Src[k], b.Dst[k]
		if u < 0 || u >= n || v < 0 || v >= n {
			return fmt.Errorf("reference: edge %d (%d→%d) has a node out of range [0, %d)", k, u, v, n)
		}
		if b.NodeGraph[u] != b.NodeGraph[v] {
			return fmt.Errorf("reference: edge %d (%d→%d) joins graphs %d and %d", k, u, v, b.NodeGraph[u], b.NodeGraph[v])
		}
		for f, a := range b.EdgeAttr[k] {
			if a < 0 || a >= int64(len(w.BondEmb[f])) {
				return fmt.Errorf("reference: EdgeAttr[%d][%d] = %d out of range [0, %d)", k, f, a, len(w.BondEmb[f]))
			}
		}
	}
	return nil
}

// checkMatrix checks that m has rows rows (any number if rows < 0) of cols
// entries each.
func checkMatrix(name string, m [][]float64, rows, cols int) error {
	if rows >= 0 && len(m) != rows {
		return fmt.Errorf("reference: %s has %d rows, want %d", name, len(m), rows)
	}
	for i, row := range m {
		if len(row) != cols {
			return fmt.Errorf("reference: %s row %d has %d entries, want %d", name, i, len(row), cols)
		}
	}
	return nil
}
