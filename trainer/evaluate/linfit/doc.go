// Package linfit fits the linear models put on a frozen encoder's
// embeddings: linear evaluation's (docs/method.md §7) and the linear-probe
// start of fine-tuning (LP-FT). Every model here is per task t, on features
// x standardised with the mean and population std of the rows it is fitted
// on (Standardisation; a constant feature stays 0), for every L2 strength λ
// of a grid:
//
//   - ridge regression, exact: w_t, b_t minimise 1/n Σ (x_i·w + b − y_i)² +
//     λ‖w‖² over the labelled rows (FitRidge, by Cholesky);
//   - logistic regression, iterative: w_t, b_t minimise the mean over the
//     rows labelled for t of BCE(x·w_t + b_t, y_t) + λ/2·‖w_t‖², every task
//     and λ at once by full-batch Adam on the closed-form gradient, the
//     tasks grouped by the rows they are labelled on (FitLogistic).
//
// Each task then keeps the λ its valid rows prefer (BestPerTask on ROC-AUC,
// LowestPerTask on RMSE); a Probe is such a choice, one linear model per
// task. Nothing here reads a dataset or a split: callers hand in features
// and labels (n×T, row-major, NaN where missing).
package linfit
