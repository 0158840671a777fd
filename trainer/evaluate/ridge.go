package evaluate

import (
	"fmt"
	"math"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// RidgeFit is one ridge regression: prediction x·W + B.
type RidgeFit struct {
	Lambda float64
	W      []float64 // one weight per feature
	B      float64
}

// FitRidge fits, for each λ of lambdas, the ridge regression minimising
//
//	1/n Σ (x_i·w + b − y_i)² + λ‖w‖²
//
// over the rows i whose target y_i is not NaN, the intercept b unpenalised
// (scikit-learn's Ridge with alpha = λ·n). x holds n rows of d features,
// row-major. The solution is exact: the features and targets are centred on
// the labelled rows' means, the d×d normal equations (XᵀX/n + λI)w = Xᵀy/n
// are formed once and solved by Cholesky for every λ. λ must be positive,
// which keeps the system positive definite even with fewer rows than
// features.
func FitRidge(x []float32, d int, y []float32, lambdas []float64) ([]RidgeFit, error) {
	if d <= 0 || len(x) != d*len(y) {
		return nil, fmt.Errorf("ridge: %d feature values for %d rows of %d features", len(x), len(y), d)
	}
	var rows []int
	for i, v := range y {
		if v == v {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("ridge: no labelled rows")
	}
	n := float64(len(rows))
	mean := make([]float64, d)
	var yMean float64
	for _, i := range rows {
		for j, v := range x[i*d : (i+1)*d] {
			mean[j] += float64(v)
		}
		yMean += float64(y[i])
	}
	for j := range mean {
		mean[j] /= n
	}
	yMean /= n
	gram := make([]float64, d*d) // XcᵀXc/n, lower triangle filled
	rhs := make([]float64, d)    // Xcᵀyc/n
	xc := make([]float64, d)
	for _, i := range rows {
		for j, v := range x[i*d : (i+1)*d] {
			xc[j] = float64(v) - mean[j]
		}
		yc := float64(y[i]) - yMean
		for j := range d {
			rhs[j] += xc[j] * yc
			row := gram[j*d : j*d+j+1]
			for k := range row {
				row[k] += xc[j] * xc[k]
			}
		}
	}
	for j := range d {
		rhs[j] /= n
		for k := 0; k <= j; k++ {
			gram[j*d+k] /= n
		}
	}
	fits := make([]RidgeFit, len(lambdas))
	a := make([]float64, d*d)
	for g, lambda := range lambdas {
		if !(lambda > 0) || math.IsInf(lambda, 0) {
			return nil, fmt.Errorf("ridge: λ %g must be positive and finite", lambda)
		}
		copy(a, gram)
		for j := range d {
			a[j*d+j] += lambda
		}
		w, err := choleskySolve(a, d, rhs)
		if err != nil {
			return nil, fmt.Errorf("ridge, λ %g: %w", lambda, err)
		}
		b := yMean
		for j := range d {
			b -= mean[j] * w[j]
		}
		fits[g] = RidgeFit{Lambda: lambda, W: w, B: b}
	}
	return fits, nil
}

// Predict is x·W + B for each row of x (d features each, row-major).
func (f RidgeFit) Predict(x []float32) []float64 {
	d := len(f.W)
	out := make([]float64, len(x)/d)
	for i := range out {
		s := f.B
		for j, v := range x[i*d : (i+1)*d] {
			s += float64(v) * f.W[j]
		}
		out[i] = s
	}
	return out
}

// choleskySolve solves A w = b for a symmetric positive definite d×d A of
// which the lower triangle is read (and overwritten by its factor L, A =
// LLᵀ).
func choleskySolve(a []float64, d int, b []float64) ([]float64, error) {
	for j := range d {
		s := a[j*d+j]
		for k := range j {
			s -= a[j*d+k] * a[j*d+k]
		}
		if !(s > 0) {
			return nil, fmt.Errorf("the normal equations are not positive definite (pivot %d is %g)", j, s)
		}
		l := math.Sqrt(s)
		a[j*d+j] = l
		for i := j + 1; i < d; i++ {
			s := a[i*d+j]
			for k := range j {
				s -= a[i*d+k] * a[j*d+k]
			}
			a[i*d+j] = s / l
		}
	}
	// L z = b, then Lᵀ w = z.
	w := make([]float64, d)
	for i := range d {
		s := b[i]
		for k := range i {
			s -= a[i*d+k] * w[k]
		}
		w[i] = s / a[i*d+i]
	}
	for i := d - 1; i >= 0; i-- {
		s := w[i]
		for k := i + 1; k < d; k++ {
			s -= a[k*d+i] * w[k]
		}
		w[i] = s / a[i*d+i]
	}
	return w, nil
}

// fitRidgeRun is linear evaluation on regression tasks: for every task and
// λ of the grid, a ridge regression (FitRidge) of the labels on the
// embeddings standardised with the train part's statistics, fitted on
// split's train part. On the scaffold split each task keeps the λ with the
// lowest valid RMSE (the first in grid order on ties) and its test RMSE and
// MAE are reported; with cross-validation the λ is chosen across folds
// (selectL2OnFolds). ValidByL2 and TestByL2 hold the mean RMSE over tasks.
// The fits are exact, so the seed changes nothing but a random encoder.
func fitRidgeRun(cfg *LinearEvalConfig, ds *data.Dataset, split *data.Split, embeddings *torch.Tensor, seed uint64) (LinearEvalRun, error) {
	start := time.Now()
	run := LinearEvalRun{Seed: seed, Split: split.Name, Train: len(split.Train), Valid: len(split.Valid), Test: len(split.Test),
		ValidROCAUC: metrics.Value(math.NaN()), TestROCAUC: metrics.Value(math.NaN())}
	all := torch.ToSlice[float32](embeddings)
	d := int(embeddings.Size(1))
	tasks, grid := ds.NumTasks(), len(cfg.L2Grid)

	// Features standardised on the train part; a constant feature stays 0.
	mean, std := make([]float64, d), make([]float64, d)
	for _, g := range split.Train {
		for j, v := range all[int(g)*d : int(g+1)*d] {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(len(split.Train))
	}
	for _, g := range split.Train {
		for j, v := range all[int(g)*d : int(g+1)*d] {
			std[j] += (float64(v) - mean[j]) * (float64(v) - mean[j])
		}
	}
	for j := range std {
		if std[j] = math.Sqrt(std[j] / float64(len(split.Train))); std[j] < 1e-6 {
			std[j] = 1
		}
	}
	features := func(idx []int32) []float32 {
		out := make([]float32, 0, len(idx)*d)
		for _, g := range idx {
			for j, v := range all[int(g)*d : int(g+1)*d] {
				out = append(out, float32((float64(v)-mean[j])/std[j]))
			}
		}
		return out
	}
	xTrain, xValid, xTest := features(split.Train), features(split.Valid), features(split.Test)
	trainLabels, validLabels, testLabels := splitLabels(ds, split.Train), splitLabels(ds, split.Valid), splitLabels(ds, split.Test)

	// preds[g] are the valid and test predictions of grid value g, n×T.
	validPreds, testPreds := make([][]float32, grid), make([][]float32, grid)
	for g := range grid {
		validPreds[g] = make([]float32, len(validLabels))
		testPreds[g] = make([]float32, len(testLabels))
	}
	y := make([]float32, len(split.Train))
	for t := range tasks {
		for i := range y {
			y[i] = trainLabels[i*tasks+t]
		}
		fits, err := FitRidge(xTrain, d, y, cfg.L2Grid)
		if err != nil {
			return run, fmt.Errorf("task %s: %w", ds.Tasks[t], err)
		}
		for g, f := range fits {
			for i, p := range f.Predict(xValid) {
				validPreds[g][i*tasks+t] = float32(p)
			}
			for i, p := range f.Predict(xTest) {
				testPreds[g][i*tasks+t] = float32(p)
			}
		}
	}
	validByTask := make([][]float64, grid)
	for g := range grid {
		perTask, test, err := metrics.RMSE(testLabels, testPreds[g], tasks)
		if err != nil {
			return run, fmt.Errorf("test, λ=%g: %w", cfg.L2Grid[g], err)
		}
		run.testPerTaskByL2 = append(run.testPerTaskByL2, perTask)
		run.TestByL2 = append(run.TestByL2, metrics.Value(test))
		_, mae, _ := metrics.MAE(testLabels, testPreds[g], tasks)
		run.testMAEByL2 = append(run.testMAEByL2, mae)
		if len(split.Valid) > 0 {
			perTask, valid, err := metrics.RMSE(validLabels, validPreds[g], tasks)
			if err != nil {
				return run, fmt.Errorf("valid, λ=%g: %w", cfg.L2Grid[g], err)
			}
			validByTask[g] = perTask
			run.ValidByL2 = append(run.ValidByL2, metrics.Value(valid))
		}
	}
	if len(split.Valid) == 0 {
		run.Seconds = time.Since(start).Seconds()
		return run, nil // cross-validation: the λ is chosen across folds
	}
	chosen := make([]int, tasks)
	for t := range tasks {
		for g := range grid {
			if better(true, validByTask[g][t], validByTask[chosen[t]][t]) {
				chosen[t] = g
			}
		}
		run.L2 = append(run.L2, cfg.L2Grid[chosen[t]])
	}
	pick := func(preds [][]float32) []float32 {
		out := make([]float32, len(preds[0]))
		for i := range out {
			out[i] = preds[chosen[i%tasks]][i]
		}
		return out
	}
	_, valid, _ := metrics.RMSE(validLabels, pick(validPreds), tasks)
	testPerTask, test, _ := metrics.RMSE(testLabels, pick(testPreds), tasks)
	_, mae, _ := metrics.MAE(testLabels, pick(testPreds), tasks)
	run.ValidRMSE, run.TestRMSE, run.TestMAE, run.TestPerTask = metrics.Value(valid), metrics.Value(test), metrics.Value(mae), toValues(testPerTask)
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}
