package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// chain is the path 0–1–…–(n−1).
func chain(n int) Molecule {
	nb := make([][]int, n)
	for i := 0; i+1 < n; i++ {
		nb[i] = append(nb[i], i+1)
		nb[i+1] = append(nb[i+1], i)
	}
	return Molecule{Neighbors: nb}
}

// twoRings is two hexagons, atoms 0–5 and 6–11, joined by the bond 5–6.
func twoRings() Molecule {
	nb := make([][]int, 12)
	bond := func(a, b int) { nb[a], nb[b] = append(nb[a], b), append(nb[b], a) }
	for r := 0; r < 12; r += 6 {
		for i := range 6 {
			bond(r+i, r+(i+1)%6)
		}
	}
	bond(5, 6)
	return Molecule{Neighbors: nb}
}

func TestCount(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {3, 1}, {4, 2}, {15, 2}, {16, 3}, {35, 3}, {36, 4}, {100, 6}} {
		if got := Count(c.n); got != c.want {
			t.Errorf("Count(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestMolecules(t *testing.T) {
	// Two molecules: a bond 0–1, and a path 2–3–4; incoming edges sorted by
	// destination, sources batch-wide.
	src := []int64{1, 0, 3, 2, 4, 3}
	rowPtr := []int64{0, 1, 2, 3, 5, 6}
	graphPtr := []int64{0, 2, 5}
	got := Molecules(src, rowPtr, graphPtr)
	want := [][][]int{{{1}, {0}}, {{1}, {0, 2}, {1}}}
	for g := range want {
		if !slices.EqualFunc(got[g].Neighbors, want[g], slices.Equal[[]int]) {
			t.Errorf("molecule %d: %v, want %v", g, got[g].Neighbors, want[g])
		}
	}
}

func TestComponents(t *testing.T) {
	m := chain(7)
	got := Components(m, []int{6, 0, 1, 3, 4})
	want := [][]int{{0, 1}, {3, 4}, {6}}
	if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Errorf("Components = %v, want %v", got, want)
	}
	if got := Components(twoRings(), []int{4, 5, 6, 7}); !slices.EqualFunc(got, [][]int{{4, 5, 6, 7}}, slices.Equal[[]int]) {
		t.Errorf("across the rings' bond: %v", got)
	}
}

// TestAffinity checks the affinity against values worked by hand: unit
// vectors at 0°, 90° and 180° have cosines 1, 0, −1.
func TestAffinity(t *testing.T) {
	x := []float64{2, 0, 0, 3, -1, 0} // three atoms in two dimensions
	tau := 0.5
	a := Affinity(x, 3, 2, tau)
	cos := [3][3]float64{{1, 0, -1}, {0, 1, 0}, {-1, 0, 1}}
	var p [3][3]float64
	for i := range 3 {
		z := 0.0
		for j := range 3 {
			z += math.Exp(cos[i][j] / tau)
		}
		for j := range 3 {
			p[i][j] = math.Exp(cos[i][j]/tau) / z
		}
	}
	for i := range 3 {
		for j := range 3 {
			want := (p[i][j] + p[j][i]) / 2
			if got := a[i*3+j]; math.Abs(got-want) > 1e-15 {
				t.Errorf("A[%d][%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	// P[0][1] = e⁰/(e² + e⁰ + e⁻²) by hand.
	if want := 1 / (math.Exp(2) + 1 + math.Exp(-2)); math.Abs(p[0][1]-want) > 1e-15 {
		t.Fatalf("hand value %v, want %v", p[0][1], want)
	}
}

// TestSpectralEmbedding checks the embedding's defining property: its
// columns times √d are eigenvectors of D^{−1/2}AD^{−1/2} with the largest
// eigenvalues, the first being √d itself normalised (eigenvalue 1).
func TestSpectralEmbedding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n, k := 7, 3
	a := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			v := rng.Float64()
			a[i*n+j], a[j*n+i] = v, v
		}
	}
	emb := SpectralEmbedding(a, n, k)
	deg := make([]float64, n)
	for i := range n {
		for j := range n {
			if i != j {
				deg[i] += a[i*n+j]
			}
		}
	}
	norm := func(i, j int) float64 {
		if i == j {
			return 0
		}
		return a[i*n+j] / math.Sqrt(deg[i]*deg[j])
	}
	var prev float64 = math.Inf(1)
	for c := range k {
		u := make([]float64, n)
		for i := range n {
			u[i] = emb[i*k+c] * math.Sqrt(deg[i])
		}
		// Rayleigh quotient and residual.
		mu := make([]float64, n)
		var num, den float64
		for i := range n {
			for j := range n {
				mu[i] += norm(i, j) * u[j]
			}
			num += u[i] * mu[i]
			den += u[i] * u[i]
		}
		lambda := num / den
		for i := range n {
			if r := mu[i] - lambda*u[i]; math.Abs(r) > 1e-12 {
				t.Fatalf("column %d is no eigenvector: residual %v at %d", c, r, i)
			}
		}
		if lambda > prev+1e-12 {
			t.Errorf("eigenvalues not descending: %v after %v", lambda, prev)
		}
		prev = lambda
		if c == 0 {
			if math.Abs(lambda-1) > 1e-12 {
				t.Errorf("largest eigenvalue %v, want 1", lambda)
			}
			// u ∝ √d, so the embedding's first column is constant.
			for i := 1; i < n; i++ {
				if math.Abs(emb[i*k]-emb[0]) > 1e-12 {
					t.Errorf("first column not constant: %v vs %v", emb[i*k], emb[0])
				}
			}
		}
		// Sign convention: the entry of largest magnitude is positive.
		big := 0.0
		for i := range n {
			if math.Abs(u[i]) > math.Abs(big) {
				big = u[i]
			}
		}
		if big < 0 {
			t.Errorf("column %d: largest entry %v is negative", c, big)
		}
	}
}

// TestKMeans clusters two obvious groups and checks the centres are their
// means.
func TestKMeans(t *testing.T) {
	x := []float64{0, 0, 0, 1, 1, 0, 10, 10, 10, 11, 11, 10, 11, 11}
	labels, centres := KMeans(x, 7, 2, 2, 3, rand.New(rand.NewPCG(3, 4)))
	if labels[0] != labels[1] || labels[1] != labels[2] || labels[3] == labels[0] ||
		labels[3] != labels[4] || labels[4] != labels[5] || labels[5] != labels[6] {
		t.Fatalf("labels %v", labels)
	}
	lo, hi := labels[0], labels[3]
	want := map[int][2]float64{lo: {1.0 / 3, 1.0 / 3}, hi: {10.5, 10.5}}
	for c, w := range want {
		if math.Abs(centres[c*2]-w[0]) > 1e-12 || math.Abs(centres[c*2+1]-w[1]) > 1e-12 {
			t.Errorf("centre %d = %v, want %v", c, centres[c*2:c*2+2], w)
		}
	}
}

// TestKMeansBestOfRestarts: with one point far out, the best start of
// many isolates it; the within-cluster sum of squares of the result is
// the smallest of any split, checked by brute force over all labelings.
func TestKMeansBestOfRestarts(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4, 5, 40}
	labels, _ := KMeans(x, 7, 1, 2, 10, rand.New(rand.NewPCG(5, 6)))
	sse := func(l []int) float64 {
		var s float64
		for c := range 2 {
			var sum, n float64
			for i, v := range l {
				if v == c {
					sum += x[i]
					n++
				}
			}
			for i, v := range l {
				if v == c {
					s += (x[i] - sum/n) * (x[i] - sum/n)
				}
			}
		}
		return s
	}
	best := math.Inf(1)
	for mask := 1; mask < 1<<7-1; mask++ {
		l := make([]int, 7)
		for i := range l {
			l[i] = mask >> i & 1
		}
		best = min(best, sse(l))
	}
	if got := sse(labels); math.Abs(got-best) > 1e-9 {
		t.Errorf("KMeans SSE %v, best split %v (labels %v)", got, best, labels)
	}
}

// TestSpectralSubgraphs: two rings whose atoms' embeddings point two ways
// split into the two rings (12 atoms: Count = 2 clusters).
func TestSpectralSubgraphs(t *testing.T) {
	m := twoRings()
	d := 3
	x := make([]float64, 12*d)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 12 {
		base := 0
		if i >= 6 {
			base = 1
		}
		for k := range d {
			x[i*d+k] = 0.05 * rng.NormFloat64()
		}
		x[i*d+base] += 1
	}
	got := SpectralSubgraphs(m, x, d, 0.2, 4, 10, rng)
	slices.SortFunc(got, func(a, b []int) int { return a[0] - b[0] })
	want := [][]int{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}
	if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Errorf("SpectralSubgraphs = %v, want %v", got, want)
	}
}

// TestSpectralFallback: when every connected piece is under the threshold,
// the cluster labelled c − 1 is the one subgraph.
func TestSpectralFallback(t *testing.T) {
	m := twoRings()
	d := 2
	x := make([]float64, 12*d)
	for i := range 12 { // alternate directions: clusters of scattered atoms
		x[i*d+i%2] = 1
	}
	rng := rand.New(rand.NewPCG(9, 10))
	got := SpectralSubgraphs(m, x, d, 0.2, 4, 10, rng)
	if len(got) != 1 || len(got[0]) != 6 {
		t.Fatalf("got %v, want one cluster of 6 alternate atoms", got)
	}
	for _, a := range got[0] {
		if a%2 != got[0][0]%2 {
			t.Fatalf("fallback cluster %v mixes the two directions", got[0])
		}
	}
}

func TestKHopBalls(t *testing.T) {
	m := chain(20)
	rng := rand.New(rand.NewPCG(11, 12))
	for range 50 {
		for _, ball := range KHopBalls(m, 1, 3, 1, rng) {
			// On a path a ball is a run of consecutive atoms of 2k+1 or
			// fewer (at an end).
			if len(ball) > 7 || len(ball) < 2 {
				t.Fatalf("ball %v", ball)
			}
			for i := 1; i < len(ball); i++ {
				if ball[i] != ball[i-1]+1 {
					t.Fatalf("ball %v not contiguous", ball)
				}
			}
		}
	}
	// The threshold drops balls: no 1-hop ball of a path has 4 atoms.
	for range 20 {
		for _, ball := range KHopBalls(m, 1, 1, 4, rng) {
			t.Fatalf("1-hop ball %v survived a threshold of 4", ball)
		}
	}
	// Count(20) = 3 draws a molecule.
	if got := len(KHopBalls(m, 3, 3, 1, rng)); got != 3 {
		t.Errorf("%d balls, want 3", got)
	}
}

func TestRandomWalks(t *testing.T) {
	m := twoRings()
	rng := rand.New(rand.NewPCG(13, 14))
	sizes := map[int]bool{}
	for range 100 {
		walks := RandomWalks(m, 5, 40, 4, rng)
		if len(walks) > Count(12) {
			t.Fatalf("%d walks, at most %d", len(walks), Count(12))
		}
		for _, w := range walks {
			if len(w) < 4 || len(Components(m, w)) != 1 {
				t.Fatalf("walk %v: too small or not connected", w)
			}
			sizes[len(w)] = true
		}
	}
	if !sizes[12] || len(sizes) < 4 {
		t.Errorf("walk sizes %v: expected a spread up to the whole molecule", sizes)
	}
}

// TestSpectralSubgraphsOf: a batch's spectral subgraphs on any number of
// goroutines are those of SpectralSubgraphs on each molecule in turn, and
// leave the generator where it leaves it, bit for bit (the released
// objective's runs are rebuilt exactly whatever the machine's cores).
func TestSpectralSubgraphsOf(t *testing.T) {
	const d = 4
	src := rand.New(rand.NewPCG(3, 9))
	var mols []Molecule
	var xs [][]float64
	for i := range 23 {
		m := chain(4 + i%17)
		if i%3 == 0 {
			m = twoRings()
		}
		x := make([]float64, m.Size()*d)
		for k := range x {
			x[k] = src.NormFloat64()
		}
		mols, xs = append(mols, m), append(xs, x)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	var want [][][]int
	for i, m := range mols {
		want = append(want, SpectralSubgraphs(m, xs[i], d, 0.2, 4, 10, rng))
	}
	wantNext := rng.Uint64()
	for _, workers := range []int{1, 2, 5, 64} {
		rng := rand.New(rand.NewPCG(11, 12))
		got := SpectralSubgraphsOf(mols, xs, d, 0.2, 4, 10, rng, workers)
		same := func(a, b [][]int) bool { return slices.EqualFunc(a, b, slices.Equal[[]int]) }
		if !slices.EqualFunc(got, want, same) {
			t.Errorf("%d workers: subgraphs %v, one molecule at a time %v", workers, got, want)
		}
		if next := rng.Uint64(); next != wantNext {
			t.Errorf("%d workers: the generator's next draw is %d, %d one molecule at a time", workers, next, wantNext)
		}
	}
}
