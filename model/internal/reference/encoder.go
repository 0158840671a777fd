package reference

import "math"

// messageEps is the constant added to every GENConv message (docs/method.md §2).
const messageEps = 1e-7

// bnEps is BatchNorm1d's epsilon.
const bnEps = 1e-5

// encode is the DeeperGCN res+ encoder of docs/method.md §2 with dropout 0:
// h = conv_0(h0); for l = 1..L−1: h = conv_l(ReLU(BN_{l−1}(h))) + h;
// finally h = BN_{L−1}(h), with no ReLU after it. h0 is the AtomEncoder
// output; one BondEncoder output is shared by all layers.
func encode(w Weights, b Batch, c Config) [][]float64 {
	h0 := atomEncode(w.AtomEmb, b.X, c.Hidden)
	e := bondEncode(w.BondEmb, b.EdgeAttr, c.Hidden)
	h := genConv(h0, e, b.Src, b.Dst, w.Convs[0])
	for l := 1; l < c.Layers; l++ {
		z := relu(batchNorm(h, w.Norms[l-1]))
		u := genConv(z, e, b.Src, b.Dst, w.Convs[l])
		for i := range h {
			for ch := range h[i] {
				u[i][ch] += h[i][ch]
			}
		}
		h = u
	}
	return batchNorm(h, w.Norms[c.Layers-1])
}

// atomEncode is the AtomEncoder of docs/method.md §2: row l is the sum over the
// nine features f of row x[l][f] of table f.
func atomEncode(tables [9][][]float64, x [][9]int64, d int) [][]float64 {
	out := make([][]float64, len(x))
	for l, feats := range x {
		row := make([]float64, d)
		for f, v := range feats {
			for ch, t := range tables[f][v] {
				row[ch] += t
			}
		}
		out[l] = row
	}
	return out
}

// bondEncode is the BondEncoder of docs/method.md §2: the same as atomEncode
// with the three bond tables.
func bondEncode(tables [3][][]float64, attr [][3]int64, d int) [][]float64 {
	out := make([][]float64, len(attr))
	for k, feats := range attr {
		row := make([]float64, d)
		for f, v := range feats {
			for ch, t := range tables[f][v] {
				row[ch] += t
			}
		}
		out[k] = row
	}
	return out
}

// genConv is one GENConv layer (docs/method.md §2) on node states h and edge
// embeddings e (one row per directed edge src[k] → dst[k]):
//
//	m_ji  = ReLU(h_j + e_ji) + 1e-7                          per channel
//	a_ji  = exp(t·m_ji − max_k t·m_ki) / Σ_k exp(t·m_ki − max_k t·m_ki)
//	agg_i = Σ_j a_ji·m_ji      (0 for a node without incoming edges)
//	h'_i  = W·(h_i + agg_i) + b
//
// where k ranges over the incoming edges k → i. Edges may come in any order.
func genConv(h, e [][]float64, src, dst []int, c Conv) [][]float64 {
	n := len(h)
	d := len(c.B)
	msg := make([][]float64, len(src))
	for k := range src {
		m := make([]float64, d)
		for ch := 0; ch < d; ch++ {
			v := h[src[k]][ch] + e[k][ch]
			if v < 0 {
				v = 0
			}
			m[ch] = v + messageEps
		}
		msg[k] = m
	}
	// Per destination node and channel: the max of t·m over incoming edges.
	maxZ := make([][]float64, n)
	for i := range maxZ {
		maxZ[i] = make([]float64, d)
		for ch := range maxZ[i] {
			maxZ[i][ch] = math.Inf(-1)
		}
	}
	for k, i := range dst {
		for ch := 0; ch < d; ch++ {
			if z := c.T * msg[k][ch]; z > maxZ[i][ch] {
				maxZ[i][ch] = z
			}
		}
	}
	num := zeros(n, d) // Σ_j exp(·)·m_ji
	den := zeros(n, d) // Σ_j exp(·)
	hasIn := make([]bool, n)
	for k, i := range dst {
		hasIn[i] = true
		for ch := 0; ch < d; ch++ {
			wt := math.Exp(c.T*msg[k][ch] - maxZ[i][ch])
			den[i][ch] += wt
			num[i][ch] += wt * msg[k][ch]
		}
	}
	out := make([][]float64, n)
	x := make([]float64, d)
	for i := 0; i < n; i++ {
		for ch := 0; ch < d; ch++ {
			x[ch] = h[i][ch]
			if hasIn[i] {
				x[ch] += num[i][ch] / den[i][ch]
			}
		}
		y := matVec(c.W, x)
		for ch := range y {
			y[ch] += c.B[ch]
		}
		out[i] = y
	}
	return out
}

// batchNorm is BatchNorm1d in training mode: per channel, the mean μ and the
// biased variance σ² over all rows, y = (x−μ)/√(σ²+1e−5)·γ + β.
func batchNorm(x [][]float64, p Norm) [][]float64 {
	n := len(x)
	d := len(p.Gamma)
	out := zeros(n, d)
	for ch := 0; ch < d; ch++ {
		mean := 0.0
		for i := 0; i < n; i++ {
			mean += x[i][ch]
		}
		mean /= float64(n)
		variance := 0.0
		for i := 0; i < n; i++ {
			dv := x[i][ch] - mean
			variance += dv * dv
		}
		variance /= float64(n)
		inv := 1 / math.Sqrt(variance+bnEps)
		for i := 0; i < n; i++ {
			out[i][ch] = (x[i][ch]-mean)*inv*p.Gamma[ch] + p.Beta[ch]
		}
	}
	return out
}

// relu returns max(x, 0) elementwise, in a new matrix.
func relu(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		out[i] = make([]float64, len(row))
		for ch, v := range row {
			if v > 0 {
				out[i][ch] = v
			}
		}
	}
	return out
}

// matVec returns W·x.
func matVec(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for i, row := range w {
		s := 0.0
		for j, v := range row {
			s += v * x[j]
		}
		y[i] = s
	}
	return y
}

// linearRows applies W to every row: out[i] = W·rows[i].
func linearRows(w [][]float64, rows [][]float64) [][]float64 {
	out := make([][]float64, len(rows))
	for i, r := range rows {
		out[i] = matVec(w, r)
	}
	return out
}

// zeros returns an n × d matrix of zeros.
func zeros(n, d int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, d)
	}
	return out
}

// groupNodes lists the nodes of each graph, in increasing order.
func groupNodes(nodeGraph []int, numGraphs int) [][]int {
	groups := make([][]int, numGraphs)
	for l, g := range nodeGraph {
		groups[g] = append(groups[g], l)
	}
	return groups
}

// meanPool returns, for each group of row indices, the mean of those rows
// of h (docs/method.md §2 readout and §3 subgraph pooling). Groups are non-empty.
func meanPool(h [][]float64, groups [][]int) [][]float64 {
	d := 0
	if len(h) > 0 {
		d = len(h[0])
	}
	out := zeros(len(groups), d)
	for g, nodes := range groups {
		for _, l := range nodes {
			for ch, v := range h[l] {
				out[g][ch] += v
			}
		}
		for ch := range out[g] {
			out[g][ch] /= float64(len(nodes))
		}
	}
	return out
}
