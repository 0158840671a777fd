package evaluate_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/trainer/evaluate"
)

// LabelSubsetSize rounds f·n to the nearest molecule, keeps at least one and
// at most n.
func TestLabelSubsetSize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{
		{1600, 0.01, 16},
		{1600, 0.05, 80},
		{1600, 0.2, 320}, // 0.2·1600 is 320.00000000000006 in floating point
		{1600, 1, 1600},
		{7, 0.5, 4}, // 3.5 rounds up
		{10, 0.01, 1},
		{10, 0.04, 1},
		{10, 0.16, 2},
		{1, 0.01, 1},
		{0, 0.5, 0},
	} {
		if got := evaluate.LabelSubsetSize(tc.n, tc.f); got != tc.want {
			t.Errorf("LabelSubsetSize(%d, %g) = %d, want %d", tc.n, tc.f, got, tc.want)
		}
	}
}

// labelTable is a train part of n molecules (ids 1000, 1002, …, so that ids
// and positions differ) with two tasks: task 0's only positive is the
// molecule at position rare, task 1 is missing on every third molecule and
// positive on every fifth labelled one.
func labelTable(n, rare int) (train []int32, labels []float32) {
	nan := float32(math.NaN())
	for i := range n {
		train = append(train, int32(1000+2*i))
		y0, y1 := float32(0), float32(0)
		if i == rare {
			y0 = 1
		}
		switch {
		case i%3 == 0:
			y1 = nan
		case i%5 == 0:
			y1 = 1
		}
		labels = append(labels, y0, y1)
	}
	return train, labels
}

// The subsets are reproducible from the seed, nested, in train's order,
// of the promised sizes, and hold both classes of every task as soon as
// they can (here from 4 molecules: two tasks, two classes); fraction 1 is
// train itself.
func TestLabelSubsets(t *testing.T) {
	const n, tasks = 200, 2
	train, labels := labelTable(n, 137)
	fractions := []float64{0.2, 0.01, 1, 0.05, 0.02} // any order
	position := map[int32]int{}
	for i, g := range train {
		position[g] = i
	}
	var differ bool
	for seed := range uint64(30) {
		subsets, err := evaluate.LabelSubsets(train, labels, tasks, fractions, seed)
		if err != nil {
			t.Fatal(err)
		}
		again, err := evaluate.LabelSubsets(train, labels, tasks, fractions, seed)
		if err != nil {
			t.Fatal(err)
		}
		other, err := evaluate.LabelSubsets(train, labels, tasks, fractions, seed+1)
		if err != nil {
			t.Fatal(err)
		}
		for k, f := range fractions {
			s := subsets[k]
			if !slices.Equal(s, again[k]) {
				t.Fatalf("seed %d, fraction %g: two draws differ: %v and %v", seed, f, s, again[k])
			}
			differ = differ || f < 1 && !slices.Equal(s, other[k])
			if want := evaluate.LabelSubsetSize(n, f); len(s) != want {
				t.Errorf("seed %d, fraction %g: %d molecules, want %d", seed, f, len(s), want)
			}
			if !slices.IsSortedFunc(s, func(a, b int32) int { return position[a] - position[b] }) || len(slices.Compact(slices.Clone(s))) != len(s) {
				t.Errorf("seed %d, fraction %g: %v is not a subset in train's order", seed, f, s)
			}
			for _, g := range s {
				if _, ok := position[g]; !ok {
					t.Errorf("seed %d, fraction %g: molecule %d is not in train", seed, f, g)
				}
			}
			// Nested: within every larger fraction's subset.
			for j, larger := range fractions {
				for _, g := range s {
					if larger > f && !slices.Contains(subsets[j], g) {
						t.Errorf("seed %d: molecule %d of fraction %g is not in fraction %g's subset", seed, g, f, larger)
					}
				}
			}
			// Both classes of both tasks once there is room for them.
			var held [tasks][2]bool
			for _, g := range s {
				for task := range tasks {
					if y := labels[position[g]*tasks+task]; y == 0 || y == 1 {
						held[task][int(y)] = true
					}
				}
			}
			if all := held == [tasks][2]bool{{true, true}, {true, true}}; len(s) >= 2*tasks && !all {
				t.Errorf("seed %d, fraction %g (%d molecules): classes held %v", seed, f, len(s), held)
			}
			if f == 1 && !slices.Equal(s, train) {
				t.Errorf("seed %d: fraction 1 is not train", seed)
			}
		}
		// 2 molecules: the first two of the cover (a molecule holds at most 2
		// of the 4 pairs), the second bringing a (task, class) pair the first
		// lacks. Two molecules drawn blindly may hold a single pair (both
		// negative on task 0 and missing on task 1).
		var pairs int
		seen := map[[2]int]bool{}
		for _, g := range subsets[slices.Index(fractions, 0.01)] {
			for task := range tasks {
				if y := labels[position[g]*tasks+task]; (y == 0 || y == 1) && !seen[[2]int{task, int(y)}] {
					seen[[2]int{task, int(y)}] = true
					pairs++
				}
			}
		}
		if pairs < 2 {
			t.Errorf("seed %d: 2 molecules hold %d (task, class) pairs, want ≥ 2 (%v)", seed, pairs, seen)
		}
	}
	if !differ {
		t.Error("every seed drew the same subsets")
	}
}

// A task with one class in train, or with no labels at all, cannot be
// covered and does not stop the others.
func TestLabelSubsetsUncoverable(t *testing.T) {
	nan := float32(math.NaN())
	train := []int32{5, 6, 7, 8, 9, 10}
	labels := []float32{ // task 0 all negative; task 1 unlabelled; task 2 one positive (molecule 9)
		0, nan, 0,
		0, nan, 0,
		0, nan, 0,
		0, nan, 0,
		0, nan, 1,
		0, nan, 0,
	}
	for seed := range uint64(10) {
		subsets, err := evaluate.LabelSubsets(train, labels, 3, []float64{0.5, 0.34}, seed)
		if err != nil {
			t.Fatal(err)
		}
		// The cover is two molecules: the first met and then molecule 9 or,
		// when 9 came first, the next one (a negative of task 2).
		if len(subsets[0]) != 3 || len(subsets[1]) != 2 || !slices.Contains(subsets[1], 9) {
			t.Errorf("seed %d: subsets %v, want 3 and 2 molecules, the smaller holding molecule 9", seed, subsets)
		}
	}
}

// Fractions outside (0, 1] or listed twice, and a label matrix of the wrong
// size, are refused, naming the flag.
func TestLabelSubsetsRefuse(t *testing.T) {
	train, labels := labelTable(10, 3)
	for _, tc := range []struct {
		fractions []float64
		labels    []float32
		want      string
	}{
		{[]float64{0}, labels, "label_fractions 0 must be a share of the train labels, in (0, 1]"},
		{[]float64{0.5, -0.1}, labels, "label_fractions -0.1 must be a share"},
		{[]float64{1.5}, labels, "label_fractions 1.5 must be a share"},
		{[]float64{math.NaN()}, labels, "label_fractions NaN must be a share"},
		{[]float64{0.1, 0.5, 0.1}, labels, "label_fractions 0.1 is listed twice"},
		{[]float64{0.5}, labels[:19], "19 labels for 10 molecules and 2 tasks"},
	} {
		_, err := evaluate.LabelSubsets(train, tc.labels, 2, tc.fractions, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fractions %v, %d labels: error %v, want %q", tc.fractions, len(tc.labels), err, tc.want)
		}
	}
}
