package metrics

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

var (
	nan   = float32(math.NaN())
	nan64 = math.NaN()
)

// near reports whether a and b agree to 1e-9, NaN matching NaN.
func near(a, b float64) bool {
	return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) <= 1e-9
}

// RMSE and MAE by hand: per task over labelled molecules, mean over tasks
// that have labels.
func TestRegressionErrorsHandComputed(t *testing.T) {
	tests := []struct {
		name           string
		labels, preds  []float32
		tasks          int
		rmse, mae      []float64
		rmseMean, mMAE float64
	}{
		// Errors 1, 0, 2: RMSE √(5/3), MAE 1.
		{"one task", []float32{1, 2, 3}, []float32{2, 2, 5}, 1,
			[]float64{math.Sqrt(5.0 / 3)}, []float64{1}, math.Sqrt(5.0 / 3), 1},
		// Rows (1, -) (3, 0) (-, 4) against (0, 9) (3, 1) (7, 2): task 0 errors -1, 0; task 1 errors 1, -2.
		{"two tasks, missing labels", []float32{1, nan, 3, 0, nan, 4}, []float32{0, 9, 3, 1, 7, 2}, 2,
			[]float64{math.Sqrt(0.5), math.Sqrt(2.5)}, []float64{0.5, 1.5}, (math.Sqrt(0.5) + math.Sqrt(2.5)) / 2, 1},
		// Task 1 has no label: NaN, and left out of the mean.
		{"unlabelled task", []float32{2, nan, 4, nan}, []float32{1, 0, 4, 0}, 2,
			[]float64{math.Sqrt(0.5), nan64}, []float64{0.5, nan64}, math.Sqrt(0.5), 0.5},
		// A NaN prediction for a missing label does not matter.
		{"NaN where unlabelled", []float32{nan, 1}, []float32{nan, 1}, 1, []float64{0}, []float64{0}, 0, 0},
		{"no labels at all", []float32{nan}, []float32{1}, 1, []float64{nan64}, []float64{nan64}, nan64, nan64},
	}
	for _, tc := range tests {
		rmse, mean, err := RMSE(tc.labels, tc.preds, tc.tasks)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range tc.rmse {
			if !near(rmse[i], tc.rmse[i]) {
				t.Errorf("%s: RMSE task %d = %v, want %v", tc.name, i, rmse[i], tc.rmse[i])
			}
		}
		if !near(mean, tc.rmseMean) {
			t.Errorf("%s: mean RMSE %v, want %v", tc.name, mean, tc.rmseMean)
		}
		mae, mean, err := MAE(tc.labels, tc.preds, tc.tasks)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range tc.mae {
			if !near(mae[i], tc.mae[i]) {
				t.Errorf("%s: MAE task %d = %v, want %v", tc.name, i, mae[i], tc.mae[i])
			}
		}
		if !near(mean, tc.mMAE) {
			t.Errorf("%s: mean MAE %v, want %v", tc.name, mean, tc.mMAE)
		}
	}
}

// Shapes that disagree and non-finite predictions for labelled molecules
// are errors; the latter names the molecule and task.
func TestRegressionErrorsRefuse(t *testing.T) {
	if _, _, err := RMSE([]float32{1, 2}, []float32{1}, 1); err == nil {
		t.Error("RMSE accepted 2 labels and 1 prediction")
	}
	if _, _, err := MAE([]float32{1, 2, 3}, []float32{1, 2, 3}, 2); err == nil {
		t.Error("MAE accepted 3 values for 2 tasks")
	}
	inf := float32(math.Inf(1))
	for _, p := range []float32{nan, inf} {
		_, _, err := RMSE([]float32{1, 2, 3, 4}, []float32{1, 2, 3, p}, 2)
		if !errors.Is(err, ErrNonFinitePrediction) || err.Error() != "rmse: non-finite prediction: "+fmt.Sprint(p)+" for molecule 1, task 1" {
			t.Errorf("prediction %v: %v", p, err)
		}
	}
}

// Task 0: labels 1, 3, 5 (one missing): mean 3, population std √(8/3).
// Task 1: all 2: std 0 becomes 1. Task 2: no labels: mean 0, std 1.
func TestStandardizerHandComputed(t *testing.T) {
	labels := []float32{
		1, 2, nan,
		3, 2, nan,
		nan, 2, nan,
		5, nan, nan,
	}
	s := FitStandardizer(labels, 3)
	wantMean, wantStd := []float64{3, 2, 0}, []float64{math.Sqrt(8.0 / 3), 1, 1}
	for i := range 3 {
		if !near(s.Mean[i], wantMean[i]) || !near(s.Std[i], wantStd[i]) {
			t.Errorf("task %d: mean %v std %v, want %v %v", i, s.Mean[i], s.Std[i], wantMean[i], wantStd[i])
		}
	}
	z := s.Apply(labels)
	sd := math.Sqrt(8.0 / 3)
	want := []float64{-2 / sd, 0, nan64, 0, 0, nan64, nan64, 0, nan64, 2 / sd, nan64, nan64}
	for i, v := range z {
		if !(math.IsNaN(want[i]) && v != v) && math.Abs(float64(v)-want[i]) > 1e-6 {
			t.Errorf("standardised [%d] = %v, want %v", i, v, want[i])
		}
	}
	// Restore undoes Apply (to float32 rounding), missing values kept missing.
	back := s.Restore(z)
	for i, v := range back {
		if labels[i] != labels[i] {
			if v == v {
				t.Errorf("restored [%d] = %v, want NaN", i, v)
			}
		} else if math.Abs(float64(v-labels[i])) > 1e-6 {
			t.Errorf("restored [%d] = %v, want %v", i, v, labels[i])
		}
	}
	// The standardised train labels have mean 0 and variance 1 where they vary.
	var m, v float64
	for _, i := range []int{0, 3, 9} {
		m += float64(z[i]) / 3
	}
	for _, i := range []int{0, 3, 9} {
		v += (float64(z[i]) - m) * (float64(z[i]) - m) / 3
	}
	if math.Abs(m) > 1e-6 || math.Abs(v-1) > 1e-6 {
		t.Errorf("standardised task 0: mean %v variance %v, want 0 and 1", m, v)
	}
}
