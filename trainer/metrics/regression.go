package metrics

import (
	"errors"
	"fmt"
	"math"
)

// ErrNonFinitePrediction marks a regression prediction that is NaN or
// infinite where a label exists: no error can be computed from it.
var ErrNonFinitePrediction = errors.New("non-finite prediction")

// RMSE is the root mean squared error of preds against labels, both n×tasks
// row-major, per task over the molecules labelled for it (NaN labels are
// missing), and the mean over the tasks with at least one label; a task
// without labels is NaN.
func RMSE(labels, preds []float32, tasks int) (perTask []float64, mean float64, err error) {
	return perTaskError("rmse", labels, preds, tasks, func(d float64) float64 { return d * d }, math.Sqrt)
}

// MAE is the mean absolute error of preds against labels, shaped and
// averaged as in RMSE.
func MAE(labels, preds []float32, tasks int) (perTask []float64, mean float64, err error) {
	return perTaskError("mae", labels, preds, tasks, math.Abs, func(x float64) float64 { return x })
}

// perTaskError averages each task's loss(pred-label) over its labelled
// molecules and applies finish (the square root for RMSE) to the average.
func perTaskError(name string, labels, preds []float32, tasks int, loss, finish func(float64) float64) ([]float64, float64, error) {
	if tasks <= 0 || len(labels) != len(preds) || len(labels)%tasks != 0 {
		return nil, 0, fmt.Errorf("%s: labels (%d) and predictions (%d) must both be n×%d", name, len(labels), len(preds), tasks)
	}
	sums := make([]float64, tasks)
	counts := make([]int, tasks)
	for i, y := range labels {
		if y != y {
			continue
		}
		p := float64(preds[i])
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, math.NaN(), fmt.Errorf("%s: %w: %v for molecule %d, task %d", name, ErrNonFinitePrediction, preds[i], i/tasks, i%tasks)
		}
		sums[i%tasks] += loss(p - float64(y))
		counts[i%tasks]++
	}
	perTask := make([]float64, tasks)
	var total float64
	used := 0
	for t := range tasks {
		if counts[t] == 0 {
			perTask[t] = math.NaN()
			continue
		}
		perTask[t] = finish(sums[t] / float64(counts[t]))
		total += perTask[t]
		used++
	}
	if used == 0 {
		return perTask, math.NaN(), nil
	}
	return perTask, total / float64(used), nil
}

// Standardizer maps regression labels to zero mean and unit variance per
// task, with the train part's statistics, so that one MSE weighs every task
// alike and the head's initial scale fits the targets; predictions are
// mapped back to the labels' units with Restore.
type Standardizer struct {
	Mean []float64 `json:"mean"` // per task
	Std  []float64 `json:"std"`  // per task: the population standard deviation, 1 where it is 0 or undefined
}

// FitStandardizer computes each task's mean and standard deviation over the
// labelled molecules of labels (n×tasks row-major, NaN missing). A task with
// no labels gets mean 0; a task whose labels are all equal (or absent) gets
// std 1, so that Apply never divides by zero.
func FitStandardizer(labels []float32, tasks int) Standardizer {
	s := Standardizer{Mean: make([]float64, tasks), Std: make([]float64, tasks)}
	counts := make([]int, tasks)
	for i, y := range labels {
		if y == y {
			s.Mean[i%tasks] += float64(y)
			counts[i%tasks]++
		}
	}
	for t := range tasks {
		if counts[t] > 0 {
			s.Mean[t] /= float64(counts[t])
		}
	}
	for i, y := range labels {
		if y == y {
			d := float64(y) - s.Mean[i%tasks]
			s.Std[i%tasks] += d * d
		}
	}
	for t := range tasks {
		if counts[t] > 0 {
			s.Std[t] = math.Sqrt(s.Std[t] / float64(counts[t]))
		}
		if !(s.Std[t] > 0) {
			s.Std[t] = 1
		}
	}
	return s
}

// Apply is labels (n×tasks row-major) in standard units: (y-mean)/std per
// task, missing labels kept NaN.
func (s Standardizer) Apply(labels []float32) []float32 {
	tasks := len(s.Mean)
	out := make([]float32, len(labels))
	for i, y := range labels {
		out[i] = float32((float64(y) - s.Mean[i%tasks]) / s.Std[i%tasks])
	}
	return out
}

// Restore is predictions in standard units (n×tasks row-major) mapped back
// to the labels' units: z·std+mean per task.
func (s Standardizer) Restore(preds []float32) []float32 {
	tasks := len(s.Mean)
	out := make([]float32, len(preds))
	for i, z := range preds {
		out[i] = float32(float64(z)*s.Std[i%tasks] + s.Mean[i%tasks])
	}
	return out
}
