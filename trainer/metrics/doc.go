// Package metrics holds the numbers micrograph reports, in plain Go with no
// tensors: ROC-AUC, RMSE and MAE with the label standardisation regression
// heads train in, normalised mutual information, means and standard
// deviations over runs, Student's t tests, and the spectra and distances of
// embedding matrices that the diagnosis reads.
package metrics
