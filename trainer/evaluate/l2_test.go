package evaluate_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// probeData is n molecules of d features and three tasks, each a noisy
// linear rule over the features, with some labels missing (NaN) so that
// the tasks' labelled counts n_t differ; the split is 60/20/20 %, and the
// first feature drifts after train.
func probeData(n, d int) (*data.Dataset, *data.Split, []float32) {
	const tasks = 3
	r := rand.New(rand.NewPCG(21, 22))
	x := make([]float32, n*d)
	labels := make([]float32, n*tasks)
	dirs := make([][]float64, tasks)
	for t := range dirs {
		dirs[t] = make([]float64, d)
		for j := range d {
			dirs[t][j] = r.NormFloat64()
		}
	}
	for i := range n {
		for j := range d {
			x[i*d+j] = float32(3 + 2*r.NormFloat64()) // off-centre and scaled: standardising matters
		}
		if i >= n*6/10 {
			x[i*d] += 4 // valid and test drift: their statistics are not train's
		}
		for t := range tasks {
			s := 0.0
			for j := range d {
				s += dirs[t][j] * (float64(x[i*d+j]) - 3) / 2
			}
			y := float32(0)
			if s+1.5*r.NormFloat64() > 0 {
				y = 1
			}
			if r.Float64() < 0.1*float64(t) { // task t misses about 10·t % of its labels
				y = float32(math.NaN())
			}
			labels[i*tasks+t] = y
		}
	}
	ds := &data.Dataset{Tasks: []string{"a", "b", "c"}, Labels: labels}
	split := &data.Split{Name: "scaffold"}
	for i := range int32(n) {
		switch {
		case int(i) < n*6/10:
			split.Train = append(split.Train, i)
		case int(i) < n*8/10:
			split.Valid = append(split.Valid, i)
		default:
			split.Test = append(split.Test, i)
		}
	}
	return ds, split, x
}

// What the L2 grid's λ means (docs/method.md §7.4): the probe of λ minimises
// mean BCE + λ/2·‖w‖² over a task's labelled train molecules, which is
// scikit-learn's LogisticRegression with C = 1/(λ·n_t) on the features
// standardised with the train part's mean and population std. Fitted to convergence, the unpenalised train loss
// of every grid value matches scikit-learn's to 1e-4, and it rises with λ
// (the grid runs from strong to weak penalty, so it falls along the grid),
// strictly, by far more than the tolerance.
func TestLinearProbeL2MatchesScikitLearn(t *testing.T) {
	py := testenv.Python(t, "sklearn", "numpy")
	const n, d = 300, 6
	ds, split, x := probeData(n, d)
	cfg := evaluate.DefaultLinearEvalConfig()
	cfg.L2Grid, cfg.Steps, cfg.LR = []float64{10, 1, 0.1, 0.01, 0.001}, 3000, 0.01
	s := torch.NewScope()
	defer s.Close()
	run, err := evaluate.FitLinear(&cfg, ds, split, torch.FromSlice(x, n, d), 5)
	if err != nil {
		t.Fatal(err)
	}

	train := make([]float32, 0, len(split.Train)*d)
	for _, i := range split.Train {
		train = append(train, x[int(i)*d:int(i+1)*d]...)
	}
	var trainLabels []*float32 // null where missing
	for _, i := range split.Train {
		for k := range 3 {
			if v := ds.Labels[int(i)*3+k]; v == v {
				trainLabels = append(trainLabels, &v)
			} else {
				trainLabels = append(trainLabels, nil)
			}
		}
	}
	in, _ := json.Marshal(map[string]any{"x": train, "y": trainLabels, "d": d, "tasks": 3, "grid": cfg.L2Grid})
	const script = `
import json, sys
import numpy as np
from sklearn.linear_model import LogisticRegression
inp = json.load(sys.stdin)
x = np.array(inp["x"], dtype=np.float64).reshape(-1, inp["d"])
y = np.array([np.nan if v is None else v for v in inp["y"]]).reshape(-1, inp["tasks"])
x = (x - x.mean(axis=0)) / x.std(axis=0)   # the train part's mean and population std
out = []
for lam in inp["grid"]:
    losses = []
    for t in range(inp["tasks"]):
        keep = ~np.isnan(y[:, t])
        xt, yt = x[keep], y[keep, t]
        m = LogisticRegression(C=1 / (lam * len(yt)), tol=1e-12, max_iter=100000).fit(xt, yt)
        p = np.clip(m.predict_proba(xt)[:, 1], 1e-300, 1 - 1e-16)
        losses.append(float(-np.mean(yt * np.log(p) + (1 - yt) * np.log(1 - p))))
    out.append(float(np.mean(losses)))
json.dump(out, sys.stdout)
`
	cmd := py.Command("-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scikit-learn: %v", err)
	}
	var want []float64
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for g, lambda := range cfg.L2Grid {
		got := float64(run.TrainLossByL2[g])
		t.Logf("λ %g: train loss %.6f, scikit-learn %.6f", lambda, got, want[g])
		if math.Abs(got-want[g]) > 1e-4 {
			t.Errorf("λ %g: unpenalised train loss %.6f, scikit-learn's with C = 1/(λ·n_t) %.6f", lambda, got, want[g])
		}
		if g > 0 && !(float64(run.TrainLossByL2[g-1])-got > 1e-3) {
			t.Errorf("λ %g: train loss %.6f, not below λ %g's %.6f: the penalty does not weaken along the grid", lambda, got, cfg.L2Grid[g-1], float64(run.TrainLossByL2[g-1]))
		}
	}
}
