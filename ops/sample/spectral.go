package sample

import (
	"math"
	"math/rand/v2"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// Affinity is the released formulation's similarity between a molecule's
// atoms (docs/method.md §12.1), from their embeddings x (n rows of width d,
// row-major):
//
//	C_ij = cos(x_i, x_j);  P = softmax_j(C/τ) row by row;  A = (P + Pᵀ)/2
//
// Norms are floored at 1e−12 as the cosines of package ops are. A is n×n,
// row-major.
func Affinity(x []float64, n, d int, tau float64) []float64 {
	unit := make([]float64, n*d)
	for i := range n {
		row := x[i*d : (i+1)*d]
		norm := 0.0
		for _, v := range row {
			norm += v * v
		}
		norm = max(math.Sqrt(norm), 1e-12)
		for k, v := range row {
			unit[i*d+k] = v / norm
		}
	}
	p := make([]float64, n*n)
	for i := range n {
		top := math.Inf(-1)
		for j := range n {
			c := 0.0
			for k := range d {
				c += unit[i*d+k] * unit[j*d+k]
			}
			p[i*n+j] = c / tau
			top = max(top, p[i*n+j])
		}
		sum := 0.0
		for j := range n {
			p[i*n+j] = math.Exp(p[i*n+j] - top)
			sum += p[i*n+j]
		}
		for j := range n {
			p[i*n+j] /= sum
		}
	}
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			a[i*n+j] = (p[i*n+j] + p[j*n+i]) / 2
		}
	}
	return a
}

// SpectralEmbedding is the normalised spectral embedding of an affinity a
// (n×n, symmetric, non-negative) in k dimensions, as scikit-learn's
// SpectralClustering computes it (docs/method.md §12.1): the diagonal is
// left out, d_i = Σ_{j≠i} a_ij, and row i is (u_1(i), …, u_k(i))/√d_i for
// the eigenvectors u of D^{−1/2} A D^{−1/2} with the k largest eigenvalues
// (the k smallest of the normalised Laplacian). Each eigenvector's sign is
// fixed so that its entry of largest magnitude is positive. The result is
// n×k, row-major.
func SpectralEmbedding(a []float64, n, k int) []float64 {
	deg := make([]float64, n)
	for i := range n {
		for j := range n {
			if j != i {
				deg[i] += a[i*n+j]
			}
		}
	}
	m := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			v := 0.0
			if i != j && deg[i] > 0 && deg[j] > 0 {
				v = a[i*n+j] / math.Sqrt(deg[i]*deg[j])
			}
			m.SetSym(i, j, v)
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(m, true) {
		panic("sample: symmetric eigendecomposition did not converge")
	}
	var vec mat.Dense
	eig.VectorsTo(&vec) // columns in ascending order of eigenvalue
	out := make([]float64, n*k)
	for c := range k {
		col := n - 1 - c // the c-th largest eigenvalue
		big, sign := 0.0, 1.0
		for i := range n {
			if v := vec.At(i, col); math.Abs(v) > big {
				big, sign = math.Abs(v), math.Copysign(1, v)
			}
		}
		for i := range n {
			scale := 1.0
			if deg[i] > 0 {
				scale = 1 / math.Sqrt(deg[i])
			}
			out[i*k+c] = sign * vec.At(i, col) * scale
		}
	}
	return out
}

// SpectralSubgraphs is the released formulation's subgraph sampler for one
// molecule (docs/method.md §12.1): its atoms' embeddings x (n×d, row-major)
// give an Affinity at temperature tau, the SpectralEmbedding in c = Count(n)
// dimensions is cut into c clusters by KMeans, and each cluster is split
// into its connected pieces; pieces of at least minSize atoms are the
// subgraphs. When none is that large, the cluster labelled c − 1 is the one
// subgraph, whatever its size and shape.
func SpectralSubgraphs(m Molecule, x []float64, d int, tau float64, minSize, restarts int, rng *rand.Rand) [][]int {
	n := m.Size()
	return spectralClusters(m, SpectralEmbedding(Affinity(x, n, d, tau), n, Count(n)), minSize, restarts, rng)
}

// SpectralSubgraphsOf is SpectralSubgraphs for every molecule of a batch in
// turn, xs[i] the embeddings of mols[i], with the work that draws nothing
// (each molecule's Affinity and SpectralEmbedding, most of the time) spread
// over up to workers goroutines. The k-means, which draw from rng, then run
// in molecule order on the calling goroutine: the subgraphs and rng's state
// afterwards are those of calling SpectralSubgraphs on each molecule in
// turn, bit for bit, whatever workers is.
func SpectralSubgraphsOf(mols []Molecule, xs [][]float64, d int, tau float64, minSize, restarts int, rng *rand.Rand, workers int) [][][]int {
	embeddings := make([][]float64, len(mols))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, len(mols))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				n := mols[i].Size()
				embeddings[i] = SpectralEmbedding(Affinity(xs[i], n, d, tau), n, Count(n))
			}
		}()
	}
	for i := range mols {
		next <- i
	}
	close(next)
	wg.Wait()
	out := make([][][]int, len(mols))
	for i, m := range mols {
		out[i] = spectralClusters(m, embeddings[i], minSize, restarts, rng)
	}
	return out
}

// spectralClusters is SpectralSubgraphs from the molecule's spectral
// embedding (n×c, c = Count(n)).
func spectralClusters(m Molecule, embedding []float64, minSize, restarts int, rng *rand.Rand) [][]int {
	n := m.Size()
	c := Count(n)
	labels, _ := KMeans(embedding, n, c, c, restarts, rng)
	clusters := make([][]int, c)
	for a, l := range labels {
		clusters[l] = append(clusters[l], a)
	}
	var out [][]int
	for _, cl := range clusters {
		for _, piece := range Components(m, cl) {
			if len(piece) >= minSize {
				out = append(out, piece)
			}
		}
	}
	if len(out) == 0 && len(clusters[c-1]) > 0 {
		out = append(out, clusters[c-1])
	}
	return out
}

// kmeansIters caps Lloyd's iterations of one KMeans start (scikit-learn's
// max_iter).
const kmeansIters = 300

// KMeans clusters the n rows of x (n×d, row-major) into k groups by Lloyd's
// algorithm under the Euclidean distance, from `restarts` k-means++ starts
// (each next centre drawn with probability proportional to the squared
// distance to the nearest centre so far), and keeps the start with the
// smallest within-cluster sum of squares (the earliest on ties). Each start
// runs until no label changes, at most 300 iterations; a cluster left empty
// keeps its centre. It returns each row's label (0 … k−1) and the centres
// (k×d, row-major). k must be at most n.
func KMeans(x []float64, n, d, k, restarts int, rng *rand.Rand) (labels []int, centres []float64) {
	best := math.Inf(1)
	for range max(restarts, 1) {
		l, c, inertia := kmeansOnce(x, n, d, k, rng)
		if inertia < best {
			best, labels, centres = inertia, l, c
		}
	}
	return labels, centres
}

// sq is the squared Euclidean distance between a and b.
func sq(a, b []float64) float64 {
	s := 0.0
	for j := range a {
		s += (a[j] - b[j]) * (a[j] - b[j])
	}
	return s
}

// seedPlusPlus draws k-means++'s k starting centres (k×d, row-major) from
// the n rows of x: the first uniformly, each next one with probability
// proportional to its squared distance to the nearest centre drawn so far
// (uniformly when every row sits on a centre already).
func seedPlusPlus(x []float64, n, d, k int, rng *rand.Rand) []float64 {
	row := func(i int) []float64 { return x[i*d : (i+1)*d] }
	centres := make([]float64, 0, k*d)
	centres = append(centres, row(rng.IntN(n))...)
	near := make([]float64, n)
	for i := range n {
		near[i] = sq(row(i), centres[:d])
	}
	for len(centres) < k*d {
		total := 0.0
		for _, v := range near {
			total += v
		}
		pick := 0
		if total > 0 {
			r := rng.Float64() * total
			for pick = 0; pick < n-1; pick++ {
				if r -= near[pick]; r < 0 {
					break
				}
			}
		} else {
			pick = rng.IntN(n) // every row sits on a centre already
		}
		c := len(centres) / d
		centres = append(centres, row(pick)...)
		for i := range n {
			near[i] = min(near[i], sq(row(i), centres[c*d:(c+1)*d]))
		}
	}
	return centres
}

func kmeansOnce(x []float64, n, d, k int, rng *rand.Rand) (labels []int, centres []float64, inertia float64) {
	row := func(i int) []float64 { return x[i*d : (i+1)*d] }
	centres = seedPlusPlus(x, n, d, k, rng)
	// Lloyd's iterations.
	labels = make([]int, n)
	for i := range labels {
		labels[i] = -1
	}
	counts := make([]int, k)
	for range kmeansIters {
		changed := false
		for i := range n {
			bestC, bestD := 0, math.Inf(1)
			for c := range k {
				if dist := sq(row(i), centres[c*d:(c+1)*d]); dist < bestD {
					bestC, bestD = c, dist
				}
			}
			if labels[i] != bestC {
				labels[i], changed = bestC, true
			}
		}
		if !changed {
			break
		}
		sums := make([]float64, k*d)
		clear(counts)
		for i, l := range labels {
			counts[l]++
			for j, v := range row(i) {
				sums[l*d+j] += v
			}
		}
		for c := range k {
			if counts[c] == 0 {
				continue
			}
			for j := range d {
				centres[c*d+j] = sums[c*d+j] / float64(counts[c])
			}
		}
	}
	for i, l := range labels {
		inertia += sq(row(i), centres[l*d:(l+1)*d])
	}
	return labels, centres, inertia
}
