package evaluate_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// oneTaskSynthetic featurises synthetic molecules keeping only the first
// task, with noisy labels, so that the λ a run would choose on its valid
// part and on its test part can differ.
func oneTaskSynthetic(t *testing.T, molecules int, noise float64) string {
	t.Helper()
	full := synthetic.Table(synthetic.Options{Molecules: molecules, Seed: 11, Noise: noise})
	tasks := len(full.Tasks)
	one := *full
	one.Tasks, one.Labels = full.Tasks[:1], nil
	for i := range full.SMILES {
		one.Labels = append(one.Labels, full.Labels[i*tasks])
	}
	dir := filepath.Join(t.TempDir(), "synth1")
	rep, err := data.Featurize(&one, dir, data.FeaturizeOptions{Split: "scaffold"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rejected) > 0 {
		t.Fatalf("RDKit rejected %v", rep.Rejected[0])
	}
	return dir
}

// Linear evaluation keeps, for a task, the λ of the grid with the best valid
// ROC-AUC (the first on ties), never the best test one, and reports that
// λ's valid and test figures — on synthetic molecules, without ../shared.
// The seeds are such that valid and test prefer different λ in some run,
// which the test asserts, so choosing on test cannot pass.
func TestLinearEvalChoosesLambdaOnValid(t *testing.T) {
	cfg := smallLinear(t, oneTaskSynthetic(t, 300, 0.25))
	cfg.Seeds, cfg.Steps = 4, 100
	res, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != cfg.Seeds {
		t.Fatalf("%d runs, want %d", len(res.Runs), cfg.Seeds)
	}
	differ := 0
	for i, r := range res.Runs {
		if len(r.ValidByL2) != len(cfg.L2Grid) || len(r.TestByL2) != len(cfg.L2Grid) {
			t.Fatalf("run %d: %d valid and %d test values for %d λ", i, len(r.ValidByL2), len(r.TestByL2), len(cfg.L2Grid))
		}
		onValid := slices.Index(r.ValidByL2, slices.Max(r.ValidByL2))
		onTest := slices.Index(r.TestByL2, slices.Max(r.TestByL2))
		if r.TestByL2[onValid] != r.TestByL2[onTest] {
			differ++
		}
		if !slices.Equal(r.L2, []float64{cfg.L2Grid[onValid]}) {
			t.Errorf("run %d: chose λ %v; valid by λ %v puts the best at %g (test's best: %g)", i, r.L2, r.ValidByL2, cfg.L2Grid[onValid], cfg.L2Grid[onTest])
		}
		if r.ValidROCAUC != r.ValidByL2[onValid] || r.TestROCAUC != r.TestByL2[onValid] || !slices.Equal(r.TestPerTask, r.TestByL2[onValid:onValid+1]) {
			t.Errorf("run %d: reports valid %v test %v (per task %v), want λ=%g's valid %v test %v",
				i, r.ValidROCAUC, r.TestROCAUC, r.TestPerTask, cfg.L2Grid[onValid], r.ValidByL2[onValid], r.TestByL2[onValid])
		}
		t.Logf("run %d: valid %v, test %v", i, r.ValidByL2, r.TestByL2)
	}
	if differ == 0 {
		t.Fatal("in no run do valid and test prefer λ of different test ROC-AUC: the check could not tell them apart")
	}
}
