package metrics

// Pure measures of embeddings used by the diagnosis (trainer/diagnose): spectra,
// alignment and uniformity (Wang & Isola 2020), and how node embeddings
// spread within and between molecules. Inputs are row-major n×d matrices.

import (
	"math"
	"slices"
)

// EffectiveRank is exp of the Shannon entropy of the normalised singular
// values p_i = σ_i / Σσ (Roy & Vetterli 2007): between 1 (one direction) and
// the number of non-zero singular values (all equal). It is 0 for a zero
// spectrum.
func EffectiveRank(singular []float64) float64 {
	var sum float64
	for _, s := range singular {
		sum += math.Max(s, 0)
	}
	if sum == 0 {
		return 0
	}
	var h float64
	for _, s := range singular {
		if p := math.Max(s, 0) / sum; p > 0 {
			h -= p * math.Log(p)
		}
	}
	return math.Exp(h)
}

// CentredSingularValues are the singular values of x (n×d) after each column
// has its mean subtracted, largest first: the square roots of the
// eigenvalues of the centred Gram matrix XᵀX (d×d).
func CentredSingularValues(x []float64, n, d int) []float64 {
	mean := make([]float64, d)
	for i := range n {
		for j := range d {
			mean[j] += x[i*d+j]
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	gram := make([]float64, d*d)
	row := make([]float64, d)
	for i := range n {
		for j := range d {
			row[j] = x[i*d+j] - mean[j]
		}
		for a := range d {
			if row[a] == 0 {
				continue
			}
			ra, g := row[a], gram[a*d:(a+1)*d]
			for b := a; b < d; b++ {
				g[b] += ra * row[b]
			}
		}
	}
	for a := range d {
		for b := a + 1; b < d; b++ {
			gram[b*d+a] = gram[a*d+b]
		}
	}
	ev := symmetricEigenvalues(gram, d)
	out := make([]float64, d)
	for i, v := range ev {
		out[i] = math.Sqrt(math.Max(v, 0))
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// symmetricEigenvalues are the eigenvalues of the symmetric d×d matrix a
// (overwritten), by cyclic Jacobi rotations until the off-diagonal part is
// negligible against the diagonal.
func symmetricEigenvalues(a []float64, d int) []float64 {
	for sweep := 0; sweep < 100; sweep++ {
		var off, diag float64
		for p := range d {
			diag += a[p*d+p] * a[p*d+p]
			for q := p + 1; q < d; q++ {
				off += a[p*d+q] * a[p*d+q]
			}
		}
		if off <= 1e-22*diag || off == 0 {
			break
		}
		for p := range d {
			for q := p + 1; q < d; q++ {
				apq := a[p*d+q]
				if apq == 0 {
					continue
				}
				theta := (a[q*d+q] - a[p*d+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range d {
					akp, akq := a[k*d+p], a[k*d+q]
					a[k*d+p], a[k*d+q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range d {
					apk, aqk := a[p*d+k], a[q*d+k]
					a[p*d+k], a[q*d+k] = c*apk-s*aqk, s*apk+c*aqk
				}
			}
		}
	}
	ev := make([]float64, d)
	for i := range d {
		ev[i] = a[i*d+i]
	}
	return ev
}

// normalisedRows is x (n×d) with every row scaled to unit L2 norm (a zero
// row stays zero).
func normalisedRows(x []float64, n, d int) []float64 {
	out := make([]float64, len(x))
	for i := range n {
		r := x[i*d : (i+1)*d]
		var sq float64
		for _, v := range r {
			sq += v * v
		}
		if sq == 0 {
			continue
		}
		inv := 1 / math.Sqrt(sq)
		for j, v := range r {
			out[i*d+j] = v * inv
		}
	}
	return out
}

// Alignment is Wang & Isola's alignment of positive pairs: the mean of
// ‖â_i − b̂_i‖² over the rows of a and b (n×d each) after L2 normalisation:
// 0 when every pair coincides, 4 when every pair is opposite.
func Alignment(a, b []float64, n, d int) float64 {
	if n == 0 {
		return math.NaN()
	}
	an, bn := normalisedRows(a, n, d), normalisedRows(b, n, d)
	var sum float64
	for i := range an {
		diff := an[i] - bn[i]
		sum += diff * diff
	}
	return sum / float64(n)
}

// Uniformity is Wang & Isola's uniformity, log of the mean of
// exp(−2‖ẑ_i − ẑ_j‖²) over pairs i ≠ j of the L2-normalised rows of z (n×d):
// 0 when all rows coincide, lower the more evenly they cover the sphere.
func Uniformity(z []float64, n, d int) float64 {
	if n < 2 {
		return math.NaN()
	}
	zn := normalisedRows(z, n, d)
	var sum float64
	for i := range n {
		zi := zn[i*d : (i+1)*d]
		for j := i + 1; j < n; j++ {
			var dot float64
			for k, v := range zn[j*d : (j+1)*d] {
				dot += zi[k] * v
			}
			sum += math.Exp(-2 * (2 - 2*dot))
		}
	}
	return math.Log(sum / float64(n*(n-1)/2))
}

// MeanPairwiseCosine is the mean cosine similarity over pairs i ≠ j of the
// rows of z (n×d), from the norm of the sum of the normalised rows.
func MeanPairwiseCosine(z []float64, n, d int) float64 {
	if n < 2 {
		return math.NaN()
	}
	zn := normalisedRows(z, n, d)
	sum := make([]float64, d)
	var self float64
	for i := range n {
		for j := range d {
			v := zn[i*d+j]
			sum[j] += v
			self += v * v
		}
	}
	var sq float64
	for _, v := range sum {
		sq += v * v
	}
	return (sq - self) / float64(n*(n-1))
}

// ColumnStds is the population standard deviation of each column of x (n×d).
func ColumnStds(x []float64, n, d int) []float64 {
	mean, sq := make([]float64, d), make([]float64, d)
	for i := range n {
		for j := range d {
			mean[j] += x[i*d+j]
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	for i := range n {
		for j := range d {
			diff := x[i*d+j] - mean[j]
			sq[j] += diff * diff
		}
	}
	for j := range sq {
		sq[j] = math.Sqrt(sq[j] / float64(n))
	}
	return sq
}

// NodeSpread accumulates, over batches, how node embeddings spread within
// and between their molecules.
type NodeSpread struct {
	d          int
	nodes      float64
	sum        []float64 // Σ h
	sumSq      float64   // Σ ‖h‖²
	between    float64   // Σ_g n_g ‖mean_g h‖²
	unitSum    []float64 // Σ ĥ
	sameGraph  float64   // Σ_g ‖Σ_{i∈g} ĥ_i‖²
	samePairs  float64   // Σ_g n_g (n_g − 1)
	sizeSqSum  float64   // Σ_g n_g²
	unitNodes  float64   // nodes with a non-zero embedding
	unitSelfSq float64   // Σ ‖ĥ‖² (1 per non-zero node)
}

// NewNodeSpread is an empty accumulator for width-d embeddings.
func NewNodeSpread(d int) *NodeSpread {
	return &NodeSpread{d: d, sum: make([]float64, d), unitSum: make([]float64, d)}
}

// Add takes the node embeddings h (N×d) of a batch whose molecule g holds
// nodes [graphPtr[g], graphPtr[g+1]).
func (s *NodeSpread) Add(h []float32, graphPtr []int64) {
	d := s.d
	mean, unit := make([]float64, d), make([]float64, d)
	for g := 0; g+1 < len(graphPtr); g++ {
		lo, hi := int(graphPtr[g]), int(graphPtr[g+1])
		clear(mean)
		clear(unit)
		for i := lo; i < hi; i++ {
			r := h[i*d : (i+1)*d]
			var sq float64
			for j, v := range r {
				x := float64(v)
				mean[j] += x
				sq += x * x
			}
			s.sumSq += sq
			if sq > 0 {
				inv := 1 / math.Sqrt(sq)
				for j, v := range r {
					unit[j] += float64(v) * inv
				}
				s.unitNodes++
				s.unitSelfSq++
			}
		}
		n := float64(hi - lo)
		var mq, uq float64
		for j := range d {
			s.sum[j] += mean[j]
			s.unitSum[j] += unit[j]
			uq += unit[j] * unit[j]
			if n > 0 {
				mq += mean[j] * mean[j] / n
			}
		}
		s.between += mq
		s.sameGraph += uq
		s.samePairs += n * (n - 1)
		s.sizeSqSum += n * n
		s.nodes += n
	}
}

// BetweenGraphShare is the share of the node embeddings' total variance
// (about their global mean) that the molecules' means explain: 1 when every
// molecule's nodes are identical, near 0 when molecules do not matter.
func (s *NodeSpread) BetweenGraphShare() float64 {
	var mq float64
	for _, v := range s.sum {
		mq += v * v
	}
	mq /= s.nodes
	total := s.sumSq - mq
	if !(total > 0) {
		return math.NaN()
	}
	return (s.between - mq) / total
}

// CosineSameGraph is the mean cosine over ordered pairs of distinct nodes of
// one molecule.
func (s *NodeSpread) CosineSameGraph() float64 {
	if s.samePairs == 0 {
		return math.NaN()
	}
	return (s.sameGraph - s.unitSelfSq) / s.samePairs
}

// CosineOtherGraphs is the mean cosine over ordered pairs of nodes of
// different molecules (all molecules added, not only those of one batch).
func (s *NodeSpread) CosineOtherGraphs() float64 {
	var all float64
	for _, v := range s.unitSum {
		all += v * v
	}
	pairs := s.nodes*s.nodes - s.sizeSqSum
	if pairs == 0 {
		return math.NaN()
	}
	return (all - s.sameGraph) / pairs
}

// Quantiles summarises a sample.
type Quantiles struct {
	N    int   `json:"n"`
	Mean Value `json:"mean"`
	Min  Value `json:"min"`
	Q10  Value `json:"q10"`
	Q50  Value `json:"q50"`
	Q90  Value `json:"q90"`
	Max  Value `json:"max"`
}

// QuantilesOf summarises xs (nearest-rank quantiles); NaN fields when empty.
func QuantilesOf(xs []float64) Quantiles {
	if len(xs) == 0 {
		nan := Value(math.NaN())
		return Quantiles{Mean: nan, Min: nan, Q10: nan, Q50: nan, Q90: nan, Max: nan}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	at := func(q float64) Value {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return Value(s[min(max(i, 0), len(s)-1)])
	}
	return Quantiles{N: len(s), Mean: Value(sum / float64(len(s))), Min: Value(s[0]),
		Q10: at(0.1), Q50: at(0.5), Q90: at(0.9), Max: Value(s[len(s)-1])}
}

// UsageOf summarises how often each of k categories is used.
func UsageOf(counts []int) Usage {
	var total int
	for _, c := range counts {
		total += c
	}
	u := Usage{Counts: counts}
	var h float64
	for _, c := range counts {
		if c > 0 {
			u.Used++
			p := float64(c) / float64(total)
			h -= p * math.Log(p)
		}
	}
	u.Entropy = Value(h)
	u.Perplexity = Value(math.Exp(h))
	return u
}

// Usage is how a set of items spreads over categories.
type Usage struct {
	Counts     []int `json:"counts"`
	Used       int   `json:"used"`       // categories with at least one item
	Entropy    Value `json:"entropy"`    // nats
	Perplexity Value `json:"perplexity"` // exp(entropy): the number of equally used categories with that entropy
}
