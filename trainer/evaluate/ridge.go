package evaluate

import (
	"fmt"
	"math"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate/linfit"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// fitRidgeRun is linear evaluation on regression tasks: for every task and
// λ of the grid, a ridge regression (linfit.FitRidge) of the labels on the
// embeddings standardised with the train part's statistics, fitted on
// split's train part. On the scaffold split each task keeps the λ with the
// lowest valid RMSE (the first in grid order on ties: linfit.LowestPerTask)
// and its test RMSE and MAE are reported; with cross-validation the λ is
// chosen across folds (selectL2OnFolds). ValidByL2 and TestByL2 hold the
// mean RMSE over tasks. The fits are exact, so the seed changes nothing but
// a random encoder.
func fitRidgeRun(cfg *LinearEvalConfig, ds *data.Dataset, split *data.Split, embeddings *torch.Tensor, seed uint64) (LinearEvalRun, error) {
	start := time.Now()
	run := LinearEvalRun{Seed: seed, Split: split.Name, Train: len(split.Train), Valid: len(split.Valid), Test: len(split.Test),
		ValidROCAUC: metrics.Value(math.NaN()), TestROCAUC: metrics.Value(math.NaN())}
	all := torch.ToSlice[float32](embeddings)
	d := int(embeddings.Size(1))
	tasks, grid := ds.NumTasks(), len(cfg.L2Grid)

	// Features standardised on the train part; a constant feature stays 0.
	std := linfit.NewStandardiser(all, d, split.Train)
	xTrain, xValid, xTest := std.Rows(split.Train), std.Rows(split.Valid), std.Rows(split.Test)
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
		fits, err := linfit.FitRidge(xTrain, d, y, cfg.L2Grid)
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
	chosen := linfit.LowestPerTask(validByTask, tasks)
	for t := range tasks {
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
