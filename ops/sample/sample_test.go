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

// triangle is three atoms bonded pairwise.
func triangle() Molecule { return Molecule{Neighbors: [][]int{{1, 2}, {0, 2}, {0, 1}}} }

// directions gives atom i the unit vector e_{dir[i]} in d dimensions.
func directions(dir []int, d int) []float64 {
	x := make([]float64, len(dir)*d)
	for i, k := range dir {
		x[i*d+k] = 1
	}
	return x
}

// A piece of exactly η atoms is a subgraph and one of η − 1 is not, for each
// sampler. On the path 0–…–6, atoms 0–3 and 4–6 point two ways: the two
// spectral clusters are those runs, one piece each, of 4 and 3 atoms. A
// 2-atom molecule's walks always visit both atoms; a triangle's 1-hop balls
// always hold all three.
func TestPieceSizeBoundary(t *testing.T) {
	path := chain(7)
	x := directions([]int{0, 0, 0, 0, 1, 1, 1}, 2)
	tests := []struct {
		name string
		draw func(minSize int, rng *rand.Rand) [][]int
		eta  int
		want [][]int
	}{
		{"spectral η 3", func(s int, r *rand.Rand) [][]int { return SpectralSubgraphs(path, x, 2, 0.2, s, 10, r) }, 3, [][]int{{0, 1, 2, 3}, {4, 5, 6}}},
		{"spectral η 4", func(s int, r *rand.Rand) [][]int { return SpectralSubgraphs(path, x, 2, 0.2, s, 10, r) }, 4, [][]int{{0, 1, 2, 3}}},
		{"walks η 2", func(s int, r *rand.Rand) [][]int { return RandomWalks(chain(2), 1, 4, s, r) }, 2, [][]int{{0, 1}}},
		{"walks η 3", func(s int, r *rand.Rand) [][]int { return RandomWalks(chain(2), 1, 4, s, r) }, 3, nil},
		{"balls η 3", func(s int, r *rand.Rand) [][]int { return KHopBalls(triangle(), 1, 1, s, r) }, 3, [][]int{{0, 1, 2}}},
		{"balls η 4", func(s int, r *rand.Rand) [][]int { return KHopBalls(triangle(), 1, 1, s, r) }, 4, nil},
	}
	for _, tc := range tests {
		for seed := range uint64(20) {
			got := tc.draw(tc.eta, rand.New(rand.NewPCG(seed, 1)))
			slices.SortFunc(got, func(a, b []int) int { return a[0] - b[0] })
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]int]) {
				t.Errorf("%s, seed %d: %v, want %v", tc.name, seed, got, tc.want)
				break
			}
		}
	}
}

// When no piece reaches η, the one subgraph is the whole cluster that the
// k-means labelled c − 1, not the first, the largest or the one holding
// atom 0. On the path 0–…–7 the atoms 0, 2, 4, 6, 7 point one way and 1, 3,
// 5 the other: two clusters of 5 and 3 atoms, every piece under 4 atoms.
// The labels are recomputed from the same steps with the same seed; over
// the seeds each cluster is sometimes the one labelled 1.
func TestSpectralFallbackIsTheLastLabel(t *testing.T) {
	m := chain(8)
	n, d, c := 8, 2, Count(8)
	x := directions([]int{0, 1, 0, 1, 0, 1, 0, 0}, d)
	if c != 2 {
		t.Fatalf("Count(8) = %d", c)
	}
	seen := map[int]bool{} // sizes of the clusters returned
	for seed := range uint64(30) {
		got := SpectralSubgraphs(m, x, d, 0.2, 4, 10, rand.New(rand.NewPCG(seed, 2)))
		labels, _ := KMeans(SpectralEmbedding(Affinity(x, n, d, 0.2), n, c), n, c, c, 10, rand.New(rand.NewPCG(seed, 2)))
		var want []int
		for a, l := range labels {
			if l == c-1 {
				want = append(want, a)
			}
		}
		if len(got) != 1 || !slices.Equal(got[0], want) {
			t.Fatalf("seed %d: %v, want the cluster labelled %d: %v (labels %v)", seed, got, c-1, want, labels)
		}
		seen[len(want)] = true
	}
	if !seen[5] || !seen[3] {
		t.Errorf("fallback cluster sizes over the seeds: %v; want both clusters (5 and 3 atoms) to be labelled last in some seed", seen)
	}
}

// The spectral subgraphs come in the order of their clusters' labels.
func TestSpectralSubgraphsInLabelOrder(t *testing.T) {
	m := twoRings()
	n, d := 12, 2
	x := directions([]int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, d)
	orders := map[int]bool{}
	for seed := range uint64(20) {
		got := SpectralSubgraphs(m, x, d, 0.2, 4, 10, rand.New(rand.NewPCG(seed, 3)))
		labels, _ := KMeans(SpectralEmbedding(Affinity(x, n, d, 0.2), n, Count(n)), n, Count(n), Count(n), 10, rand.New(rand.NewPCG(seed, 3)))
		if len(got) != 2 || labels[got[0][0]] != 0 || labels[got[1][0]] != 1 {
			t.Fatalf("seed %d: %v with labels %v: not in label order", seed, got, labels)
		}
		orders[got[0][0]] = true
	}
	if len(orders) != 2 {
		t.Errorf("the ring labelled 0 starts at %v in every seed: the order is not shown to follow the labels", orders)
	}
}

// The number of hops of a ball is drawn from minHops … maxHops, both
// included: on a long path a ball that reaches neither end holds 2k + 1
// atoms, and every k of {1, 2, 3} occurs.
func TestKHopBallsDrawEveryHopCount(t *testing.T) {
	m := chain(41)
	rng := rand.New(rand.NewPCG(15, 16))
	hops := map[int]int{}
	for range 200 {
		for _, ball := range KHopBalls(m, 1, 3, 1, rng) {
			if ball[0] == 0 || ball[len(ball)-1] == 40 {
				continue
			}
			hops[(len(ball)-1)/2]++
			if len(ball)%2 != 1 {
				t.Fatalf("interior ball %v has an even size", ball)
			}
		}
	}
	if len(hops) != 3 || hops[1] == 0 || hops[2] == 0 || hops[3] == 0 {
		t.Errorf("hop counts drawn: %v, want 1, 2 and 3", hops)
	}
}

// KMeans keeps the earliest of equally good starts. Here every start finds
// the same two groups, so all have the same within-cluster sum of squares,
// but the starts number the groups differently; KMeans must return the
// first start's labels, which one start alone from the same generator
// gives.
func TestKMeansKeepsTheEarliestOfTiedStarts(t *testing.T) {
	x := []float64{0, 0.1, 0.2, 10, 10.1}
	const restarts = 10
	differ := 0 // seeds whose last start numbers the groups unlike the first
	for seed := range uint64(10) {
		labels, _ := KMeans(x, 5, 1, 2, restarts, rand.New(rand.NewPCG(seed, 4)))
		one := rand.New(rand.NewPCG(seed, 4))
		var starts [][]int
		for range restarts {
			l, _ := KMeans(x, 5, 1, 2, 1, one)
			starts = append(starts, l)
		}
		if !slices.Equal(labels, starts[0]) {
			t.Errorf("seed %d: labels %v, want the first start's %v (starts: %v)", seed, labels, starts[0], starts)
		}
		if !slices.Equal(starts[0], starts[restarts-1]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("in every seed the first and last starts number the groups alike: the test cannot tell them apart")
	}
}

// k-means++ draws the first centre uniformly and each next one with
// probability proportional to the squared distance to the nearest centre
// drawn so far. On five points of a line with k = 3, the frequencies of the
// 60 ordered triples of centres over 30,000 seedings match the exact
// probabilities by that rule (Pearson's χ² under 120 on 59 degrees of
// freedom; p ≈ 1e-5), and are far (χ² over 1,000) from the probabilities of
// plausible wrong rules: the distance instead of its square, the distance
// to the latest centre instead of the nearest, or a uniform draw.
func TestKMeansPlusPlusWeighsBySquaredDistanceToTheNearestCentre(t *testing.T) {
	x := []float64{0, 1, 3, 7, 15}
	const n, k, draws = 5, 3, 30000
	type rule func(l, i, j int) float64 // the weight of l as the third centre after i, then j
	sqd := func(a, b int) float64 { return (x[a] - x[b]) * (x[a] - x[b]) }
	rules := []struct {
		name   string
		second func(j, i int) float64
		third  rule
	}{
		{"squared distance to the nearest centre", sqd, func(l, i, j int) float64 { return min(sqd(l, i), sqd(l, j)) }},
		{"distance to the nearest centre", func(j, i int) float64 { return math.Sqrt(sqd(j, i)) },
			func(l, i, j int) float64 { return math.Sqrt(min(sqd(l, i), sqd(l, j))) }},
		{"squared distance to the latest centre", sqd, func(l, i, j int) float64 { return sqd(l, j) }},
		{"uniform", func(j, i int) float64 { return float64(min(1, sqd(j, i))) },
			func(l, i, j int) float64 { return float64(min(1, sqd(l, i), sqd(l, j))) }},
	}
	prob := func(r int) map[[3]int]float64 {
		p := map[[3]int]float64{}
		for i := range n {
			var z2 float64
			for j := range n {
				z2 += rules[r].second(j, i)
			}
			for j := range n {
				if j == i {
					continue
				}
				var z3 float64
				for l := range n {
					z3 += rules[r].third(l, i, j)
				}
				for l := range n {
					if l != i && l != j {
						p[[3]int{i, j, l}] = 1.0 / n * rules[r].second(j, i) / z2 * rules[r].third(l, i, j) / z3
					}
				}
			}
		}
		return p
	}
	counts := map[[3]int]float64{}
	rng := rand.New(rand.NewPCG(17, 18))
	index := func(v float64) int {
		i := slices.Index(x, v)
		if i < 0 {
			t.Fatalf("centre %v is none of the points", v)
		}
		return i
	}
	for range draws {
		c := seedPlusPlus(x, n, 1, k, rng)
		counts[[3]int{index(c[0]), index(c[1]), index(c[2])}]++
	}
	for r := range rules {
		var chi2 float64
		for cell, p := range prob(r) {
			e := p * draws
			chi2 += (counts[cell] - e) * (counts[cell] - e) / e
			if p == 0 && counts[cell] > 0 {
				chi2 = math.Inf(1)
			}
		}
		for cell := range counts {
			if _, ok := prob(r)[cell]; !ok {
				t.Fatalf("the triple %v was drawn, with a centre twice", cell)
			}
		}
		switch {
		case r == 0 && !(chi2 < 120):
			t.Errorf("χ² %.1f against %s: the draws do not follow it", chi2, rules[r].name)
		case r > 0 && !(chi2 > 1000):
			t.Errorf("χ² %.1f against %s: the test cannot tell that rule from the right one", chi2, rules[r].name)
		default:
			t.Logf("χ² %.1f against %s", chi2, rules[r].name)
		}
	}
}
