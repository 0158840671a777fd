// Package suite is the paper's downstream evaluation (docs/method.md §7):
// Run runs every evaluation of package evaluate under every protocol on
// every benchmark, with each pre-trained encoder and without pre-training,
// and tests the gains (Result.ComputeGains, paired t-tests); CompareArms sets
// several suites side by side. The evaluations it knows are listed once,
// in evaluationKinds.
package suite
