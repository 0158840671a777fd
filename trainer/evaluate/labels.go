package evaluate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/micrograph/micrograph/internal/field"
)

// labelStream separates the stream of the label subsets from any other use
// of the same seed.
const labelStream = 0x6c6162656c73 // "labels"

// ValidateLabelFractions checks the shares of the train labels a linear
// evaluation may be asked to fit on: each in (0, 1], none twice.
func ValidateLabelFractions(fractions []float64) error {
	for i, f := range fractions {
		if !(f > 0 && f <= 1) {
			return field.Errorf("label_fractions", f, "must be a share of the train labels, in (0, 1]")
		}
		if slices.Contains(fractions[:i], f) {
			return field.Errorf("label_fractions", f, "is listed twice")
		}
	}
	return nil
}

// LabelSubsetSize is how many of n train molecules the fraction f keeps:
// f·n rounded to the nearest integer, at least 1 (and at most n).
func LabelSubsetSize(n int, f float64) int {
	return min(n, max(1, int(math.Round(f*float64(n)))))
}

// LabelSubsets are the molecules of a train part that a label-scarce probe
// fits on, one subset per fraction: the first LabelSubsetSize(len(train), f)
// molecules of one order drawn from seed, each subset listed in train's
// order. labels is train's label matrix (len(train)×tasks, NaN where
// missing).
//
// The order is a permutation of train drawn from seed, with a cover moved to
// its front: walking the permutation, each molecule that holds a (task,
// class) label no earlier molecule holds joins the cover, in the order met.
// Hence, for one seed and train part,
//   - the subsets do not depend on the encoder, so every encoder sees the
//     same labelled molecules;
//   - they are nested: a smaller fraction's subset lies in every larger one's;
//   - a subset holds both classes of every task that has them in train as
//     soon as it is at least as large as the cover (at most 2·tasks
//     molecules); a smaller one holds the cover's first molecules, so it
//     still favours classes not yet seen. The size is never raised to fit the
//     cover: a fraction means that share of the molecules.
//
// Fraction 1 gives train itself.
func LabelSubsets(train []int32, labels []float32, tasks int, fractions []float64, seed uint64) ([][]int32, error) {
	n := len(train)
	if len(labels) != n*tasks {
		return nil, fmt.Errorf("label subsets: %d labels for %d molecules and %d tasks", len(labels), n, tasks)
	}
	if err := ValidateLabelFractions(fractions); err != nil {
		return nil, err
	}
	perm := rand.New(rand.NewPCG(seed, labelStream)).Perm(n)
	seen := make([]bool, 2*tasks) // (task, class) → held by an earlier molecule
	cover, rest := make([]int, 0, 2*tasks), make([]int, 0, n)
	for _, i := range perm {
		adds := false
		for t := range tasks {
			switch y := labels[i*tasks+t]; y {
			case 0, 1:
				if c := 2*t + int(y); !seen[c] {
					seen[c], adds = true, true
				}
			}
		}
		if adds {
			cover = append(cover, i)
		} else {
			rest = append(rest, i)
		}
	}
	order := append(cover, rest...)
	subsets := make([][]int32, len(fractions))
	for k, f := range fractions {
		chosen := slices.Clone(order[:LabelSubsetSize(n, f)])
		slices.Sort(chosen) // positions in train: train's order
		subset := make([]int32, len(chosen))
		for j, i := range chosen {
			subset[j] = train[i]
		}
		subsets[k] = subset
	}
	return subsets, nil
}
