package linfit

import (
	"math"

	"github.com/micrograph/micrograph/trainer/metrics"
)

// BestPerTask is the grid index each task keeps: its best valid ROC-AUC
// (validByTask[g][t]; ties: the earlier), or, for a task whose valid labels
// hold one class, the one with the best mean (validByL2).
func BestPerTask(validByL2 []metrics.Value, validByTask [][]float64, tasks int) []int {
	overall := 0
	for g := range validByL2 {
		if validByL2[g] > validByL2[overall] {
			overall = g
		}
	}
	chosen := make([]int, tasks)
	for t := range chosen {
		best := -1
		for g := range validByTask {
			if v := validByTask[g][t]; !math.IsNaN(v) && (best < 0 || v > validByTask[best][t]) {
				best = g
			}
		}
		if best < 0 {
			best = overall
		}
		chosen[t] = best
	}
	return chosen
}

// LowestPerTask is the grid index each task keeps on a figure where lower
// is better (an RMSE, byTask[g][t]): its lowest, the earlier on ties, a NaN
// never kept over a number (the first index when every one is NaN).
func LowestPerTask(byTask [][]float64, tasks int) []int {
	chosen := make([]int, tasks)
	for t := range chosen {
		for g := range byTask {
			if a, b := byTask[g][t], byTask[chosen[t]][t]; a < b || math.IsNaN(b) && !math.IsNaN(a) {
				chosen[t] = g
			}
		}
	}
	return chosen
}

// PickScores takes, from scores of every grid value on n molecules
// (G×n×T, row-major), each task's chosen one: n×T.
func PickScores(scores []float32, n int, chosen []int) []float32 {
	tasks := len(chosen)
	out := make([]float32, n*tasks)
	for i := range n {
		for t, g := range chosen {
			out[i*tasks+t] = scores[(g*n+i)*tasks+t]
		}
	}
	return out
}
