package metrics

import (
	"math"
	"testing"
)

func within(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestEffectiveRank(t *testing.T) {
	// p = (1/3, 2/3): H = −(1/3·ln 1/3 + 2/3·ln 2/3).
	h := -(math.Log(1.0/3)/3 + 2*math.Log(2.0/3)/3)
	for _, c := range []struct {
		name     string
		singular []float64
		want     float64
	}{
		{"one direction", []float64{5, 0, 0}, 1},
		{"four equal", []float64{2, 2, 2, 2}, 4},
		{"one to two", []float64{1, 2}, math.Exp(h)},
		{"zero spectrum", []float64{0, 0}, 0},
	} {
		if got := EffectiveRank(c.singular); !within(got, c.want, 1e-12) {
			t.Errorf("%s: EffectiveRank(%v) = %v, want %v", c.name, c.singular, got, c.want)
		}
	}
}

func TestCentredSingularValues(t *testing.T) {
	// Rows (1,0), (−1,0), (0,2), (0,−2) have mean 0 and XᵀX = diag(2, 8):
	// singular values √8 and √2, effective rank exp(H(1/3, 2/3)).
	x := []float64{1, 0, -1, 0, 0, 2, 0, -2}
	sv := CentredSingularValues(x, 4, 2)
	if !within(sv[0], math.Sqrt(8), 1e-12) || !within(sv[1], math.Sqrt(2), 1e-12) {
		t.Fatalf("singular values %v, want [√8 √2]", sv)
	}
	// The same rows shifted by (10, −3): centring removes the shift. A
	// rotated copy (45°) has the same spectrum, found through off-diagonal
	// Gram entries.
	shifted := make([]float64, len(x))
	rotated := make([]float64, len(x))
	c := math.Sqrt(0.5)
	for i := 0; i < 4; i++ {
		a, b := x[2*i], x[2*i+1]
		shifted[2*i], shifted[2*i+1] = a+10, b-3
		rotated[2*i], rotated[2*i+1] = c*a-c*b, c*a+c*b
	}
	for name, m := range map[string][]float64{"shifted": shifted, "rotated": rotated} {
		got := CentredSingularValues(m, 4, 2)
		if !within(got[0], sv[0], 1e-9) || !within(got[1], sv[1], 1e-9) {
			t.Errorf("%s: singular values %v, want %v", name, got, sv)
		}
	}
	// Rank 1: every row a multiple of (1, 1, 1).
	line := []float64{1, 1, 1, 2, 2, 2, 4, 4, 4}
	got := CentredSingularValues(line, 3, 3)
	if !within(EffectiveRank(got), 1, 1e-9) {
		t.Errorf("rank-one rows: singular values %v, effective rank %v, want 1", got, EffectiveRank(got))
	}
}

func TestAlignmentAndUniformity(t *testing.T) {
	// Pairs (1,0)–(0,3): ‖â − b̂‖² = 2; (2,0)–(5,0): 0. Mean 1.
	a := []float64{1, 0, 2, 0}
	b := []float64{0, 3, 5, 0}
	if got := Alignment(a, b, 2, 2); !within(got, 1, 1e-12) {
		t.Errorf("Alignment = %v, want 1", got)
	}
	// Opposite pairs: 4.
	if got := Alignment([]float64{1, 0}, []float64{-2, 0}, 1, 2); !within(got, 4, 1e-12) {
		t.Errorf("Alignment of opposite vectors = %v, want 4", got)
	}
	for _, c := range []struct {
		name string
		z    []float64
		n    int
		want float64
	}{
		// Orthogonal pair: ‖ẑ1 − ẑ2‖² = 2, log e^−4 = −4.
		{"orthogonal pair", []float64{3, 0, 0, 1}, 2, -4},
		// (1,0), (−1,0), (0,1): squared distances 4, 2, 2.
		{"three", []float64{1, 0, -1, 0, 0, 2}, 3, math.Log((math.Exp(-8) + 2*math.Exp(-4)) / 3)},
		// Identical directions: 0.
		{"collapsed", []float64{1, 1, 2, 2, 5, 5}, 3, 0},
	} {
		if got := Uniformity(c.z, c.n, 2); !within(got, c.want, 1e-12) {
			t.Errorf("%s: Uniformity = %v, want %v", c.name, got, c.want)
		}
	}
	// Rows (1,0), (0,1), (1,1): cosines 0, √½, √½, mean √2/3.
	if got := MeanPairwiseCosine([]float64{1, 0, 0, 1, 1, 1}, 3, 2); !within(got, math.Sqrt(2)/3, 1e-12) {
		t.Errorf("MeanPairwiseCosine = %v, want √2/3", got)
	}
}

func TestNodeSpread(t *testing.T) {
	// Two molecules: A holds (1,0)
	// and (3,0), molecule B (−1,0) and (−3,0). Global mean 0, total sum of
	// squares 20, between 2·2² + 2·2² = 16: share 0.8. Cosines: same
	// molecule 1 (both pairs), other molecules −1.
	s := NewNodeSpread(2)
	s.Add([]float32{1, 0, 3, 0, -1, 0, -3, 0}, []int64{0, 2, 4})
	if got := s.BetweenGraphShare(); !within(got, 0.8, 1e-12) {
		t.Errorf("BetweenGraphShare = %v, want 0.8", got)
	}
	if got := s.CosineSameGraph(); !within(got, 1, 1e-12) {
		t.Errorf("CosineSameGraph = %v, want 1", got)
	}
	if got := s.CosineOtherGraphs(); !within(got, -1, 1e-12) {
		t.Errorf("CosineOtherGraphs = %v, want -1", got)
	}

	// The same nodes added as two batches (one molecule each) give the same
	// figures: the global mean spans batches. A third molecule (0,1),(0,1),
	// (0,−1) in another batch: mean (0, 1/3).
	split := NewNodeSpread(2)
	split.Add([]float32{1, 0, 3, 0}, []int64{0, 2})
	split.Add([]float32{-1, 0, -3, 0}, []int64{0, 2})
	if !within(split.BetweenGraphShare(), 0.8, 1e-12) || !within(split.CosineOtherGraphs(), -1, 1e-12) {
		t.Errorf("split batches: share %v, other-molecule cosine %v; want 0.8 and -1", split.BetweenGraphShare(), split.CosineOtherGraphs())
	}
	split.Add([]float32{0, 1, 0, 1, 0, -1}, []int64{0, 3})
	// Global mean (0, 1/7). Total SS = 20 + 3 − 7·(1/7)² = 23 − 1/7.
	// Between = 16 + 3·(1/3)² − 1/7 = 16 + 1/3 − 1/7.
	want := (16 + 1.0/3 - 1.0/7) / (23 - 1.0/7)
	if got := split.BetweenGraphShare(); !within(got, want, 1e-12) {
		t.Errorf("three molecules: share %v, want %v", got, want)
	}
	// Same-molecule pairs: A 2 pairs of cosine 1, B 2 of 1, C 6 ordered
	// pairs: (1,1)→1 ×2, (1,−1)→−1 ×4: sum 4 + (2 − 4) = 2 over 10 pairs.
	if got := split.CosineSameGraph(); !within(got, 0.2, 1e-12) {
		t.Errorf("three molecules: same-molecule cosine %v, want 0.2", got)
	}
}

func TestQuantilesAndUsage(t *testing.T) {
	q := QuantilesOf([]float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10})
	if q.N != 10 || q.Mean != 5.5 || q.Min != 1 || q.Q10 != 1 || q.Q50 != 5 || q.Q90 != 9 || q.Max != 10 {
		t.Errorf("QuantilesOf(1..10) = %+v", q)
	}
	u := UsageOf([]int{2, 0, 2})
	if u.Used != 2 || !within(float64(u.Entropy), math.Log(2), 1e-12) || !within(float64(u.Perplexity), 2, 1e-12) {
		t.Errorf("UsageOf([2 0 2]) = %+v, want 2 used, entropy ln 2, perplexity 2", u)
	}
}
