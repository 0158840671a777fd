package evaluate

import "github.com/micrograph/micrograph/trainer/metrics"

// The selection of a run's epoch under cross-validation, which has no valid
// part: the seed's folds choose together, on their mean test figure.

// testCurve is the run's test figure of the selection metric, per epoch.
func (r *FinetuneRun) testCurve() []metrics.Value {
	if r.TestRMSE != nil {
		return r.TestRMSE
	}
	return r.TestROCAUC
}

// selectEpochOnFolds applies the paper's selection to one seed's fold runs:
// each run reports the epoch with the best test figure (highest ROC-AUC,
// lowest RMSE) averaged over the folds.
func selectEpochOnFolds(seed uint64, runs []FinetuneRun, regression bool) SelectedEpoch {
	curves := make([][]metrics.Value, len(runs))
	for f := range runs {
		curves[f] = runs[f].testCurve()
	}
	best, mean := selectOnFolds(curves, regression)
	for f := range runs {
		r := &runs[f]
		r.BestEpoch, r.TestAtBest, r.TestPerTask = best+1, r.testCurve()[best], toValues(r.testPerTaskByEpoch[best])
		if regression {
			r.TestMAEAtBest = r.TestMAE[best]
		}
	}
	return SelectedEpoch{Seed: seed, Epoch: best + 1, FoldMean: metrics.Value(mean)}
}
