package reference

import "math"

// normEps is the floor on a vector's norm when L2-normalising it for a
// cosine similarity (as torch.nn.functional.normalize does).
const normEps = 1e-12

// normalizeRows returns each row divided by max(‖row‖₂, 1e−12).
func normalizeRows(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		ss := 0.0
		for _, v := range row {
			ss += v * v
		}
		nrm := math.Max(math.Sqrt(ss), normEps)
		out[i] = make([]float64, len(row))
		for ch, v := range row {
			out[i][ch] = v / nrm
		}
	}
	return out
}

// cosineLogits returns the matrix cos(a_i, b_k)/τ (docs/method.md §3: rows
// L2-normalised, then a·bᵀ), len(a) × len(b).
func cosineLogits(a, b [][]float64, tau float64) [][]float64 {
	an, bn := normalizeRows(a), normalizeRows(b)
	out := make([][]float64, len(an))
	for i, x := range an {
		out[i] = make([]float64, len(bn))
		for k, y := range bn {
			s := 0.0
			for ch, v := range x {
				s += v * y[ch]
			}
			out[i][k] = s / tau
		}
	}
	return out
}

// motifProbs returns softmax_k(cos(W·x_i, M_k)/τ) for every row x_i and
// its logarithm (docs/method.md §3: Q from node embeddings with W_h, P from
// subgraph embeddings with W_s).
func motifProbs(w, x, motifs [][]float64, tau float64) (p, logp [][]float64) {
	return softmaxRows(cosineLogits(linearRows(w, x), motifs, tau))
}

// logSumExp returns log Σ exp(z) with the max subtracted first.
func logSumExp(z []float64) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, v := range z {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// softmaxRows returns the row-wise softmax of z and its logarithm, the
// latter as z − logsumexp(z) (not the log of the rounded probabilities).
func softmaxRows(z [][]float64) (p, logp [][]float64) {
	p = make([][]float64, len(z))
	logp = make([][]float64, len(z))
	for i, row := range z {
		lse := logSumExp(row)
		p[i] = make([]float64, len(row))
		logp[i] = make([]float64, len(row))
		for k, v := range row {
			logp[i][k] = v - lse
			p[i][k] = math.Exp(v - lse)
		}
	}
	return p, logp
}

// Sinkhorn is the SwAV-form balancing of docs/method.md §3, in float32: with Q
// (N × K, rows are nodes) cast to float32 first,
//
//	A = exp(λ·Qᵀ)          (K × N)
//	A /= sum(A)
//	repeat iters: A[k][·] *= (1/K)/rowsum_k;  A[·][l] *= (1/N)/colsum_l
//
// Every elementwise operation is rounded to float32. Each sum is
// accumulated in float64 and rounded once to float32, i.e. it is the
// correctly rounded float32 sum, which any float32 reduction approximates
// within its own rounding error, independent of summation order. exp is
// float64 exp rounded to float32. Nothing is clamped: λ·Q above about 88.7
// overflows float32 and yields Inf/NaN, as the spec's form does.
// Q must have at least one row, all rows of equal length.
func Sinkhorn(q [][]float64, lambda float64, iters int) [][]float32 {
	n := len(q)
	k := len(q[0])
	lam := float32(lambda)
	a := make([][]float32, k)
	for m := range a {
		a[m] = make([]float32, n)
		for l := 0; l < n; l++ {
			x := float32(lam * float32(q[l][m]))
			a[m][l] = float32(math.Exp(float64(x)))
		}
	}
	var total float64
	for m := range a {
		for _, v := range a[m] {
			total += float64(v)
		}
	}
	sum := float32(total)
	for m := range a {
		for l := range a[m] {
			a[m][l] = float32(a[m][l] / sum)
		}
	}
	invK := float32(float32(1) / float32(k))
	invN := float32(float32(1) / float32(n))
	for it := 0; it < iters; it++ {
		for m := range a {
			var rs float64
			for _, v := range a[m] {
				rs += float64(v)
			}
			f := float32(invK / float32(rs))
			for l := range a[m] {
				a[m][l] = float32(a[m][l] * f)
			}
		}
		for l := 0; l < n; l++ {
			var cs float64
			for m := range a {
				cs += float64(a[m][l])
			}
			f := float32(invN / float32(cs))
			for m := range a {
				a[m][l] = float32(a[m][l] * f)
			}
		}
	}
	return a
}

// ArgmaxColumns returns, for each column l of the K × N matrix a, the row
// index of its largest entry, the first one on ties (docs/method.md §3:
// motif_of_node = argmax over k of A[:, l]).
func ArgmaxColumns(a [][]float32) []int {
	if len(a) == 0 {
		return nil
	}
	out := make([]int, len(a[0]))
	for l := range out {
		best := 0
		for m := 1; m < len(a); m++ {
			if a[m][l] > a[best][l] {
				best = m
			}
		}
		out[l] = best
	}
	return out
}

// buildSubgraphs forms the motif-like subgraphs of docs/method.md §4 without
// perturbation: slot(l) = graph(l)·K + motif(l); a slot with at least η
// nodes is a subgraph. Subgraphs come in increasing slot order, members in
// increasing node order.
func buildSubgraphs(nodeGraph, motif []int, numGraphs, k, eta int) []Subgraph {
	slots := make([][]int, numGraphs*k)
	for l, g := range nodeGraph {
		s := g*k + motif[l]
		slots[s] = append(slots[s], l)
	}
	var out []Subgraph
	for s, nodes := range slots {
		if len(nodes) > 0 && len(nodes) >= eta {
			out = append(out, Subgraph{Graph: s / k, Motif: s % k, Nodes: nodes})
		}
	}
	return out
}
