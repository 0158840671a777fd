package linfit

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

// Hand-computed fits. One feature x = 0, 1, 2 with y = 1, 3, 5: centred,
// x'x/n = 2/3 and x'y/n = 4/3, so w = (4/3)/(2/3 + λ): λ = 2/3 gives w = 1,
// b = ȳ − x̄w = 3 − 1 = 2. Two orthogonal features (±1, 0), (0, ±1) with
// y = 10 ± 2, 10 ± 3: x'x/n = ½I, x'y/n = (1, 1.5); λ = ½ gives w = (1, 1.5),
// b = 10. A row with a NaN target (x = (100, 100)) is left out.
func TestFitRidgeHandComputed(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name   string
		x      []float32
		d      int
		y      []float32
		lambda float64
		w      []float64
		b      float64
	}{
		{"one feature", []float32{0, 1, 2}, 1, []float32{1, 3, 5}, 2.0 / 3, []float64{1}, 2},
		{"small λ", []float32{0, 1, 2}, 1, []float32{1, 3, 5}, 1e-9, []float64{2}, 1},
		{"two features, missing target", []float32{1, 0, -1, 0, 0, 1, 0, -1, 100, 100}, 2,
			[]float32{12, 8, 13, 7, nan}, 0.5, []float64{1, 1.5}, 10},
	}
	for _, tc := range tests {
		fits, err := FitRidge(tc.x, tc.d, tc.y, []float64{tc.lambda})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := fits[0]
		for j := range tc.w {
			if math.Abs(f.W[j]-tc.w[j]) > 1e-6 {
				t.Errorf("%s: w[%d] = %v, want %v", tc.name, j, f.W[j], tc.w[j])
			}
		}
		if math.Abs(f.B-tc.b) > 1e-6 {
			t.Errorf("%s: b = %v, want %v", tc.name, f.B, tc.b)
		}
	}
	// Predict is x·w + b: the one-feature fit at λ = 2/3 maps 4 to 6.
	fits, _ := FitRidge([]float32{0, 1, 2}, 1, []float32{1, 3, 5}, []float64{2.0 / 3})
	if p := fits[0].Predict([]float32{4, 0}); math.Abs(p[0]-6) > 1e-9 || math.Abs(p[1]-2) > 1e-9 {
		t.Errorf("predictions %v, want [6 2]", p)
	}
}

// More features than labelled rows still solve (λ > 0), while a λ of 0,
// shapes that disagree and no labelled row are refused.
func TestFitRidgeRefuses(t *testing.T) {
	if _, err := FitRidge([]float32{1, 2, 3, 4, 5, 6}, 3, []float32{1, 2}, []float64{0.1}); err != nil {
		t.Errorf("3 features, 2 rows: %v", err)
	}
	for _, tc := range []struct {
		name   string
		x      []float32
		d      int
		y      []float32
		lambda float64
	}{
		{"λ 0", []float32{1, 2}, 1, []float32{1, 2}, 0},
		{"shape", []float32{1, 2, 3}, 2, []float32{1, 2}, 1},
		{"no labels", []float32{1, 2}, 1, []float32{float32(math.NaN()), float32(math.NaN())}, 1},
	} {
		if _, err := FitRidge(tc.x, tc.d, tc.y, []float64{tc.lambda}); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// On random correlated data the fits equal scikit-learn's Ridge with
// alpha = λ·n (its objective sums where ours averages), to 1e-6 relative.
func TestFitRidgeMatchesScikitLearn(t *testing.T) {
	py := testenv.Python(t, "sklearn", "numpy")
	r := rand.New(rand.NewPCG(3, 9))
	const n, d = 40, 12
	x := make([]float32, n*d)
	y := make([]float32, n)
	for i := range n {
		base := r.NormFloat64()
		for j := range d {
			x[i*d+j] = float32(base*float64(j%3) + r.NormFloat64()) // correlated columns
		}
		y[i] = float32(3*float64(x[i*d]) - 2*float64(x[i*d+5]) + 0.5*r.NormFloat64() + 7)
	}
	lambdas := []float64{1e-3, 0.1, 10}
	fits, err := FitRidge(x, d, y, lambdas)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"x": x, "y": y, "d": d, "alphas": []float64{lambdas[0] * n, lambdas[1] * n, lambdas[2] * n}})
	const script = `
import json, sys
import numpy as np
from sklearn.linear_model import Ridge
inp = json.loads(sys.argv[1])
x = np.array(inp["x"], dtype=np.float64).reshape(-1, inp["d"])
y = np.array(inp["y"], dtype=np.float64)
out = []
for a in inp["alphas"]:
    m = Ridge(alpha=a, solver="cholesky").fit(x, y)
    out.append({"w": m.coef_.tolist(), "b": float(m.intercept_)})
json.dump(out, sys.stdout)
`
	out, err := py.Command("-c", script, string(in)).Output()
	if err != nil {
		t.Fatalf("scikit-learn: %v", err)
	}
	var ref []struct {
		W []float64
		B float64
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for g, f := range fits {
		worst := math.Abs(f.B-ref[g].B) / math.Max(1, math.Abs(ref[g].B))
		for j := range d {
			worst = max(worst, math.Abs(f.W[j]-ref[g].W[j])/math.Max(1, math.Abs(ref[g].W[j])))
		}
		if worst > 1e-6 {
			t.Errorf("λ %g: differs from scikit-learn by %g (w %v, want %v; b %v, want %v)", lambdas[g], worst, f.W, ref[g].W, f.B, ref[g].B)
		}
	}
}
