package linfit

import (
	"math"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// Probe is a linear model on standardised features: logits (or
// standardised predictions) x·w_t + b_t per task t, with the λ each task
// took.
type Probe struct {
	W, B []float64 // W is T×d, row-major
	L2   []float64 // the λ each task took
}

// ProbeData is what a probe is fitted on (Fit, n×d) and its λ chosen on
// (Valid), both standardised alike, with their labels (n×T, NaN where
// missing).
type ProbeData struct {
	Fit, Valid             *torch.Tensor
	FitLabels, ValidLabels []float32
}

// LogisticProbe fits f's logistic regressions (every task and λ of f.Grid
// at once) on d.Fit and keeps, per task, the λ with the best valid ROC-AUC
// (BestPerTask's rule).
func LogisticProbe(d ProbeData, f Logistic) (Probe, error) {
	tasks, grid := f.Tasks, f.Grid
	w, b, _ := FitLogistic(d.Fit, d.FitLabels, f)
	scores := torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](d.Valid.MatMul(w).Add(b)) })
	n := len(d.ValidLabels) / tasks
	validByL2 := make([]metrics.Value, len(grid))
	validByTask := make([][]float64, len(grid))
	for g := range grid {
		perTask, mean, err := metrics.ROCAUC(d.ValidLabels, scores[g*n*tasks:(g+1)*n*tasks], tasks)
		if err != nil { // no task with both classes in the held-out part: every λ ties
			perTask, mean = make([]float64, tasks), math.NaN()
			for t := range perTask {
				perTask[t] = math.NaN()
			}
		}
		validByL2[g], validByTask[g] = metrics.Value(mean), perTask
	}
	chosen := BestPerTask(validByL2, validByTask, tasks)
	ws, bs := torch.ToSlice[float32](w), torch.ToSlice[float32](b) // G×d×T, G×1×T
	dim := len(ws) / (len(grid) * tasks)
	p := Probe{W: make([]float64, tasks*dim), B: make([]float64, tasks)}
	for t, g := range chosen {
		for j := range dim {
			p.W[t*dim+j] = float64(ws[(g*dim+j)*tasks+t])
		}
		p.B[t] = float64(bs[g*tasks+t])
		p.L2 = append(p.L2, grid[g])
	}
	return p, nil
}

// RidgeProbe fits a ridge regression per task and λ of grid (FitRidge) on
// d.Fit and keeps, per task, the λ with the lowest valid RMSE
// (LowestPerTask's rule).
func RidgeProbe(d ProbeData, tasks int, grid []float64) (Probe, error) {
	x, xv := torch.ToSlice[float32](d.Fit), torch.ToSlice[float32](d.Valid)
	dim := int(d.Fit.Size(1))
	nFit := len(d.FitLabels) / tasks
	fits := make([][]Ridge, tasks)
	rmse := make([][]float64, len(grid)) // [g][t]
	for g := range rmse {
		rmse[g] = make([]float64, tasks)
	}
	y := make([]float32, nFit)
	for t := range tasks {
		for i := range y {
			y[i] = d.FitLabels[i*tasks+t]
		}
		var err error
		if fits[t], err = FitRidge(x, dim, y, grid); err != nil {
			return Probe{}, err
		}
		for g, fit := range fits[t] {
			var sum float64
			var n int
			for i, pred := range fit.Predict(xv) {
				if v := d.ValidLabels[i*tasks+t]; v == v {
					sum += (pred - float64(v)) * (pred - float64(v))
					n++
				}
			}
			rmse[g][t] = math.Sqrt(sum / float64(n))
		}
	}
	p := Probe{W: make([]float64, tasks*dim), B: make([]float64, tasks)}
	for t, g := range LowestPerTask(rmse, tasks) {
		copy(p.W[t*dim:(t+1)*dim], fits[t][g].W)
		p.B[t] = fits[t][g].B
		p.L2 = append(p.L2, grid[g])
	}
	return p, nil
}
