package evaluate_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// The masked loss equals a float64 computation by hand of
// −[y·log σ(x) + (1−y)·log(1−σ(x))] averaged over the labelled entries, also
// for logits whose naive form overflows float32.
func TestMaskedBCEWithLogitsMatchesFloat64(t *testing.T) {
	logits := []float32{0.3, -1.2, 2.5, 100, -100, 0, -0.7, 4}
	labels := []float32{1, 0, 0, 0, 1, 1, 1, 0}
	mask := []bool{true, true, false, true, true, true, false, true}
	var sum float64
	n := 0
	for i, x := range logits {
		if !mask[i] {
			continue
		}
		p := 1 / (1 + math.Exp(-float64(x)))
		var l float64
		switch {
		case x == 100: // y = 0: −log(1 − σ(100)) = 100 + log(1 + e^−100)
			l = 100
		case x == -100: // y = 1: −log σ(−100) = 100 + log(1 + e^−100)
			l = 100
		case labels[i] == 1:
			l = -math.Log(p)
		default:
			l = -math.Log(1 - p)
		}
		sum += l
		n++
	}
	want := sum / float64(n)

	s := torch.NewScope()
	defer s.Close()
	shape := []int64{4, 2} // B×T
	got := evaluate.MaskedBCEWithLogits(torch.FromSlice(logits, shape...), torch.FromSlice(labels, shape...), torch.FromSlice(mask, shape...)).Item()
	if math.Abs(got-want) > 1e-5*want {
		t.Errorf("masked BCE %.8f, want %.8f", got, want)
	}

	// No labelled entry: loss 0, not NaN.
	none := make([]bool, len(mask))
	got = evaluate.MaskedBCEWithLogits(torch.FromSlice(logits, shape...), torch.FromSlice(labels, shape...), torch.FromSlice(none, shape...)).Item()
	if got != 0 {
		t.Errorf("loss without labels %v, want 0", got)
	}
}

// K-fold splits: fold sizes differ by at most one (the first n mod K folds
// larger), each split partitions the molecules into train and test with no
// valid part, every molecule is tested once, and the seed alone fixes the
// permutation.
func TestCrossValidationSplits(t *testing.T) {
	for _, tc := range []struct {
		n, k  int
		sizes []int
	}{
		{10, 3, []int{4, 3, 3}},
		{9, 3, []int{3, 3, 3}},
		{23, 5, []int{5, 5, 5, 4, 4}},
		{4, 4, []int{1, 1, 1, 1}},
		{5, 2, []int{3, 2}},
		{1513, 10, []int{152, 152, 152, 151, 151, 151, 151, 151, 151, 151}},
	} {
		splits, err := evaluate.CrossValidationSplits(tc.n, tc.k, 7)
		if err != nil {
			t.Fatalf("n=%d k=%d: %v", tc.n, tc.k, err)
		}
		if len(splits) != tc.k {
			t.Fatalf("n=%d k=%d: %d splits", tc.n, tc.k, len(splits))
		}
		tested := make([]int, tc.n)
		for i, s := range splits {
			if len(s.Test) != tc.sizes[i] || len(s.Valid) != 0 || len(s.Train) != tc.n-len(s.Test) {
				t.Errorf("n=%d k=%d split %d: sizes %d/%d/%d, want test %d and no valid", tc.n, tc.k, i,
					len(s.Train), len(s.Valid), len(s.Test), tc.sizes[i])
			}
			if want := fmt.Sprintf("cv%d-fold%d", tc.k, i); s.Name != want {
				t.Errorf("split %d named %q, want %q", i, s.Name, want)
			}
			all := slices.Concat(s.Train, s.Test)
			slices.Sort(all)
			for j, g := range all {
				if int(g) != j {
					t.Fatalf("n=%d k=%d split %d: parts are not a partition of 0..%d: %v", tc.n, tc.k, i, tc.n-1, all)
				}
			}
			for _, part := range [][]int32{s.Train, s.Test} {
				if !slices.IsSorted(part) {
					t.Errorf("n=%d k=%d split %d: part not sorted: %v", tc.n, tc.k, i, part)
				}
			}
			for _, g := range s.Test {
				tested[g]++
			}
		}
		for g, c := range tested {
			if c != 1 {
				t.Errorf("n=%d k=%d: molecule %d tested %d times", tc.n, tc.k, g, c)
			}
		}
	}

	a, _ := evaluate.CrossValidationSplits(50, 5, 1)
	b, _ := evaluate.CrossValidationSplits(50, 5, 1)
	c, _ := evaluate.CrossValidationSplits(50, 5, 2)
	for i := range a {
		if !slices.Equal(a[i].Test, b[i].Test) || !slices.Equal(a[i].Train, b[i].Train) {
			t.Errorf("the same seed gave different folds at %d", i)
		}
	}
	if slices.Equal(a[0].Test, c[0].Test) {
		t.Error("seeds 1 and 2 gave the same first fold")
	}
	for _, k := range []int{-1, 0, 1, 51} {
		if _, err := evaluate.CrossValidationSplits(50, k, 1); err == nil {
			t.Errorf("k=%d of 50: no error", k)
		}
	}
}

// The protocol names: scaffold, and cvK for K ≥ 2 written plainly.
func TestProtocols(t *testing.T) {
	for name, want := range map[evaluate.Protocol]int{"scaffold": 0, "cv10": 10, "cv2": 2, "cv5": 5} {
		if err := name.Validate(); err != nil || name.Folds() != want || name.CrossValidated() != (want > 0) {
			t.Errorf("%q: %d folds, %v; want %d", name, name.Folds(), err, want)
		}
	}
	for _, bad := range []evaluate.Protocol{"", "cv", "cv1", "cv0", "cv-3", "cv010", "cv 10", "CV10", "random", "scaffold "} {
		if err := bad.Validate(); err == nil || bad.Folds() != 0 || !strings.Contains(err.Error(), fmt.Sprintf("protocol %q must be scaffold or cv10", bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The paper protocol's selection on a fabricated result set: 3 folds × 4
// epochs. Each fold's own best epoch differs (fold 0: epoch 1, fold 1:
// epoch 4, fold 2: epoch 2), while the fold means are 0.70, 0.72, 0.74,
// 0.73: the third candidate (index 2) wins with mean 0.74, which no fold
// picks alone. Ties go to the earliest candidate, and a NaN mean never wins.
func TestSelectOnFoldMean(t *testing.T) {
	for _, tc := range []struct {
		name   string
		curves [][]float64
		best   int
		mean   float64
	}{
		{"per-fold argmax differs", [][]float64{
			{0.80, 0.70, 0.75, 0.66},
			{0.60, 0.66, 0.70, 0.78},
			{0.70, 0.80, 0.77, 0.75},
		}, 2, 0.74},
		{"tie", [][]float64{{0.25, 0.5, 0.5}, {0.75, 0.5, 0.5}}, 0, 0.5},
		{"NaN", [][]float64{{math.NaN(), 0.5, 0.6}, {0.9, 0.5, 0.4}}, 1, 0.5},
		{"one fold", [][]float64{{0.5, 0.9, 0.1}}, 1, 0.9},
	} {
		best, mean := evaluate.SelectOnFoldMean(tc.curves)
		if best != tc.best || math.Abs(mean-tc.mean) > 1e-12 {
			t.Errorf("%s: candidate %d (mean %g), want %d (%g)", tc.name, best, mean, tc.best, tc.mean)
		}
	}
}
