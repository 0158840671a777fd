package trainer_test

import (
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer"
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
	got := trainer.MaskedBCEWithLogits(torch.FromSlice(logits, shape...), torch.FromSlice(labels, shape...), torch.FromSlice(mask, shape...)).Item()
	if math.Abs(got-want) > 1e-5*want {
		t.Errorf("masked BCE %.8f, want %.8f", got, want)
	}

	// No labelled entry: loss 0, not NaN.
	none := make([]bool, len(mask))
	got = trainer.MaskedBCEWithLogits(torch.FromSlice(logits, shape...), torch.FromSlice(labels, shape...), torch.FromSlice(none, shape...)).Item()
	if got != 0 {
		t.Errorf("loss without labels %v, want 0", got)
	}
}

// K-fold splits: fold sizes differ by at most one (the first n mod K folds
// larger), each split partitions the molecules, the valid fold is the next
// split's test fold, every molecule is tested once, and the seed alone fixes
// the permutation.
func TestCrossValidationSplits(t *testing.T) {
	for _, tc := range []struct {
		n, k  int
		sizes []int
	}{
		{10, 3, []int{4, 3, 3}},
		{9, 3, []int{3, 3, 3}},
		{23, 5, []int{5, 5, 5, 4, 4}},
		{4, 4, []int{1, 1, 1, 1}},
	} {
		splits, err := trainer.CrossValidationSplits(tc.n, tc.k, 7)
		if err != nil {
			t.Fatalf("n=%d k=%d: %v", tc.n, tc.k, err)
		}
		if len(splits) != tc.k {
			t.Fatalf("n=%d k=%d: %d splits", tc.n, tc.k, len(splits))
		}
		tested := make([]int, tc.n)
		for i, s := range splits {
			if len(s.Test) != tc.sizes[i] || len(s.Valid) != tc.sizes[(i+1)%tc.k] || len(s.Train) != tc.n-len(s.Test)-len(s.Valid) {
				t.Errorf("n=%d k=%d split %d: sizes %d/%d/%d, want test %d valid %d", tc.n, tc.k, i,
					len(s.Train), len(s.Valid), len(s.Test), tc.sizes[i], tc.sizes[(i+1)%tc.k])
			}
			if !slices.Equal(s.Valid, splits[(i+1)%tc.k].Test) {
				t.Errorf("n=%d k=%d split %d: valid fold is not split %d's test fold", tc.n, tc.k, i, (i+1)%tc.k)
			}
			all := slices.Concat(s.Train, s.Valid, s.Test)
			slices.Sort(all)
			for j, g := range all {
				if int(g) != j {
					t.Fatalf("n=%d k=%d split %d: parts are not a partition of 0..%d: %v", tc.n, tc.k, i, tc.n-1, all)
				}
			}
			for _, part := range [][]int32{s.Train, s.Valid, s.Test} {
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

	a, _ := trainer.CrossValidationSplits(50, 5, 1)
	b, _ := trainer.CrossValidationSplits(50, 5, 1)
	c, _ := trainer.CrossValidationSplits(50, 5, 2)
	if !slices.Equal(a[0].Test, b[0].Test) {
		t.Error("the same seed gave different folds")
	}
	if slices.Equal(a[0].Test, c[0].Test) {
		t.Error("seeds 1 and 2 gave the same first fold")
	}
	for _, k := range []int{-1, 0, 1, 2, 51} {
		if _, err := trainer.CrossValidationSplits(50, k, 1); err == nil {
			t.Errorf("k=%d of 50: no error", k)
		}
	}
}
