package linfit

import (
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/trainer/metrics"
)

// The λ each task keeps, by hand: the highest ROC-AUC (BestPerTask) or the
// lowest RMSE (LowestPerTask) over the grid, the earlier on ties, a NaN
// never over a number; BestPerTask falls back on the best mean for a task
// whose figures are all NaN (one class in its valid labels).
func TestPerTaskChoice(t *testing.T) {
	nan := math.NaN()
	byTask := [][]float64{ // [g][t], three grid values, four tasks
		{0.7, nan, 0.5, nan},
		{0.9, nan, 0.5, nan},
		{0.8, 0.6, 0.4, nan},
	}
	if got, want := BestPerTask([]metrics.Value{0.5, 0.6, 0.7}, byTask, 4), []int{1, 2, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("BestPerTask: %v, want %v", got, want)
	}
	if got, want := LowestPerTask(byTask, 4), []int{0, 2, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("LowestPerTask: %v, want %v", got, want)
	}
	// Scores of 2 grid values on 2 molecules of 2 tasks (G×n×T); task 0
	// keeps grid value 1, task 1 grid value 0.
	scores := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := PickScores(scores, 2, []int{1, 0}), []float32{5, 2, 7, 4}; !slices.Equal(got, want) {
		t.Errorf("PickScores: %v, want %v", got, want)
	}
}

// The host standardisation by hand: features (1, 10), (3, 10), (5, 10) on
// the first two rows have mean (2, 10) and std (1, 0 → 1), so the third row
// standardises to (3, 0).
func TestStandardiser(t *testing.T) {
	x := []float32{1, 10, 3, 10, 5, 10}
	s := NewStandardiser(x, 2, []int32{0, 1})
	if got, want := s.Rows([]int32{2, 0}), []float32{3, 0, -1, 0}; !slices.Equal(got, want) {
		t.Errorf("standardised rows %v, want %v", got, want)
	}
}
