package metrics_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/metrics"
)

var nan = float32(math.NaN())

func TestROCAUCHandComputed(t *testing.T) {
	tests := []struct {
		name    string
		labels  []float32
		scores  []float32
		tasks   int
		perTask []float64
		mean    float64
	}{
		// Positives above every negative: 1; below: 0.
		{"perfect", []float32{0, 0, 1, 1}, []float32{0.1, 0.2, 0.8, 0.9}, 1, []float64{1}, 1},
		{"inverted", []float32{1, 1, 0, 0}, []float32{0.1, 0.2, 0.8, 0.9}, 1, []float64{0}, 0},
		// Pairs (pos, neg): (0.4, 0.1) ok, (0.4, 0.5) wrong, (0.7, 0.1) ok, (0.7, 0.5) ok: 3/4.
		{"one swap", []float32{0, 1, 0, 1}, []float32{0.1, 0.4, 0.5, 0.7}, 1, []float64{0.75}, 0.75},
		// A tie between a positive and a negative counts half: (0.5,0.5) ½, (0.5,0.2) 1 → 3/4.
		{"tie", []float32{1, 0, 0}, []float32{0.5, 0.5, 0.2}, 1, []float64{0.75}, 0.75},
		{"all tied", []float32{1, 0, 1, 0}, []float32{3, 3, 3, 3}, 1, []float64{0.5}, 0.5},
		// Missing labels are left out: without the NaN rows this is "perfect".
		{"missing", []float32{0, nan, 1, nan, 1}, []float32{0.1, 0.99, 0.8, 0.0, 0.9}, 1, []float64{1}, 1},
		// Task 1 has one class only and is skipped; the mean is task 0's.
		{"single class", []float32{0, 1, 1, 1, 0, 1}, []float32{0.2, 0.3, 0.9, 0.1, 0.1, 0.6}, 2, []float64{1, math.NaN()}, 1},
		// Two tasks averaged: 1 and 0.
		{"two tasks", []float32{0, 1, 1, 0}, []float32{0.1, 0.1, 0.9, 0.9}, 2, []float64{1, 0}, 0.5},
	}
	for _, tc := range tests {
		perTask, mean, err := metrics.ROCAUC(tc.labels, tc.scores, tc.tasks)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for i, want := range tc.perTask {
			got := perTask[i]
			if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && math.Abs(got-want) > 1e-12) {
				t.Errorf("%s: task %d = %v, want %v", tc.name, i, got, want)
			}
		}
		if math.Abs(mean-tc.mean) > 1e-12 {
			t.Errorf("%s: mean %v, want %v", tc.name, mean, tc.mean)
		}
	}
	if _, _, err := metrics.ROCAUC([]float32{1, 1, nan}, []float32{1, 2, 3}, 1); err == nil {
		t.Error("no task with both classes: no error")
	}
	if _, _, err := metrics.ROCAUC([]float32{1, 0}, []float32{1}, 1); err == nil {
		t.Error("mismatched lengths: no error")
	}
}

// Random cases (with ties and missing labels) agree with scikit-learn's
// roc_auc_score applied task by task with OGB's filtering.
func TestROCAUCMatchesScikitLearn(t *testing.T) {
	py := testenv.Python(t, "sklearn", "numpy")
	r := rand.New(rand.NewPCG(7, 7))
	type testCase struct {
		Labels [][]float64 `json:"labels"` // NaN encoded as -1
		Scores [][]float64 `json:"scores"`
	}
	var cases []testCase
	var ours [][]float64
	for c := range 30 {
		n, tasks := 5+r.IntN(200), 1+r.IntN(4)
		labels, scores := make([]float32, n*tasks), make([]float32, n*tasks)
		tc := testCase{}
		for i := range n {
			var lrow, srow []float64
			for k := range tasks {
				y := float32(r.IntN(2))
				if r.Float64() < 0.2 {
					y = nan
				}
				s := float32(math.Round(r.Float64()*20) / 20) // coarse: many ties
				if c%3 == 0 {
					s = float32(r.NormFloat64())
				}
				labels[i*tasks+k], scores[i*tasks+k] = y, s
				if math.IsNaN(float64(y)) {
					lrow = append(lrow, -1)
				} else {
					lrow = append(lrow, float64(y))
				}
				srow = append(srow, float64(s))
			}
			tc.Labels, tc.Scores = append(tc.Labels, lrow), append(tc.Scores, srow)
		}
		perTask, _, _ := metrics.ROCAUC(labels, scores, tasks)
		cases, ours = append(cases, tc), append(ours, perTask)
	}
	in, _ := json.Marshal(cases)
	script := `
import json, sys
import numpy as np
from sklearn.metrics import roc_auc_score
out = []
for c in json.loads(sys.stdin.read()):
    y, s = np.array(c["labels"]), np.array(c["scores"], dtype=np.float32)
    row = []
    for k in range(y.shape[1]):
        m = y[:, k] >= 0
        if (y[m, k] == 1).any() and (y[m, k] == 0).any():
            row.append(roc_auc_score(y[m, k], s[m, k]))
        else:
            row.append(None)
    out.append(row)
print(json.dumps(out))
`
	cmd := py.Command("-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var theirs [][]*float64
	if err := json.Unmarshal(out, &theirs); err != nil {
		t.Fatal(err)
	}
	for c := range cases {
		for k, want := range theirs[c] {
			got := ours[c][k]
			if want == nil {
				if !math.IsNaN(got) {
					t.Errorf("case %d task %d: %v, scikit-learn skips it", c, k, got)
				}
				continue
			}
			if math.Abs(got-*want) > 1e-9 {
				t.Errorf("case %d task %d: %.12f, scikit-learn %.12f", c, k, got, *want)
			}
		}
	}
}

// A NaN or infinite score of a labelled molecule is an error naming it (it
// used to spin forever: NaN never equals itself in the tie loop); on a
// molecule without a label it does not matter.
func TestROCAUCNonFiniteScores(t *testing.T) {
	inf := float32(math.Inf(1))
	labels := []float32{0, 1, nan, 1}
	tests := []struct {
		name   string
		scores []float32
		want   string // "" for no error
	}{
		{"NaN", []float32{0.1, nan, 0.3, 0.9}, "NaN for molecule 1, task 0"},
		{"+Inf", []float32{0.1, 0.5, 0.3, inf}, "+Inf for molecule 3, task 0"},
		{"-Inf", []float32{-inf, 0.5, 0.3, 0.9}, "-Inf for molecule 0, task 0"},
		{"NaN without a label", []float32{0.1, 0.5, nan, 0.9}, ""},
	}
	for _, tc := range tests {
		perTask, mean, err := metrics.ROCAUC(labels, tc.scores, 1)
		switch {
		case tc.want == "" && (err != nil || mean != 1 || perTask[0] != 1):
			t.Errorf("%s: %v, %v, %v; want 1", tc.name, perTask, mean, err)
		case tc.want != "" && (!errors.Is(err, metrics.ErrNonFiniteScore) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want ErrNonFiniteScore saying %q", tc.name, err, tc.want)
		}
	}
}
