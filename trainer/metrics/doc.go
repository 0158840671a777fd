// Package metrics holds the numbers micrograph reports, in plain Go with no
// tensors: ROC-AUC, normalised mutual information, means and standard
// deviations over runs, Student's t tests, and the spectra and distances of
// embedding matrices that the diagnosis reads.
package metrics
