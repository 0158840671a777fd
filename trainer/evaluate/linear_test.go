package evaluate_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
)

func smallLinear(t *testing.T, dataPath string) evaluate.LinearEvalConfig {
	cfg := evaluate.DefaultLinearEvalConfig()
	cfg.Data = dataPath
	cfg.Encoder, cfg.Seeds, cfg.Seed, cfg.Steps = smallEncoder, 2, 42, 200
	return cfg
}

// writeSeededEncoder exports the encoder that a classifier seeded with seed
// starts from, which is also the random encoder the downstream protocols
// draw for that seed.
func writeSeededEncoder(t *testing.T, arch model.EncoderConfig, seed uint64) string {
	t.Helper()
	torch.ManualSeed(seed)
	clf, err := model.NewClassifier(arch, 1, testdevice.Get(t), torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	path := filepath.Join(t.TempDir(), "encoder.pt")
	if err := model.SaveEncoder(path, arch, clf.EncoderState(), "test", 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// Linear evaluation on ogbg-molbace gives a complete result, and an exported
// encoder is loaded: the encoder a seed draws, exported and loaded back,
// gives exactly the random baseline's result for that seed.
func TestLinearEvalOnBace(t *testing.T) {
	cfg := smallLinear(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	res, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pretrained || res.EmbeddingDim != 16 || len(res.Runs) != 2 || res.Test.N != 2 {
		t.Fatalf("pretrained %v, embedding %d, %d runs, test over %d", res.Pretrained, res.EmbeddingDim, len(res.Runs), res.Test.N)
	}
	for i, r := range res.Runs {
		if r.Seed != 42+uint64(i) || r.Train+r.Valid+r.Test != 1513 {
			t.Errorf("run %d: seed %d, parts %d/%d/%d", i, r.Seed, r.Train, r.Valid, r.Test)
		}
		if len(r.ValidByL2) != len(cfg.L2Grid) || len(r.TrainLossByL2) != len(cfg.L2Grid) {
			t.Errorf("run %d: %d valid and %d loss values for %d λ", i, len(r.ValidByL2), len(r.TrainLossByL2), len(cfg.L2Grid))
		}
		for g, v := range r.ValidByL2 {
			if !inUnitInterval(v) || !(r.TrainLossByL2[g] > 0) {
				t.Errorf("run %d λ=%g: valid %v, train loss %v", i, cfg.L2Grid[g], v, r.TrainLossByL2[g])
			}
		}
		// One task: its λ is the grid's best on valid, whose value is reported.
		best := slices.Index(r.ValidByL2, slices.Max(r.ValidByL2))
		if len(r.L2) != 1 || r.L2[0] != cfg.L2Grid[best] || r.ValidROCAUC != r.ValidByL2[best] {
			t.Errorf("run %d: chose λ %v (valid %v) from %v", i, r.L2, r.ValidROCAUC, r.ValidByL2)
		}
		if !inUnitInterval(r.TestROCAUC) || len(r.TestPerTask) != 1 || r.TestPerTask[0] != r.TestROCAUC {
			t.Errorf("run %d: test %v, per task %v", i, r.TestROCAUC, r.TestPerTask)
		}
	}
	// The random baseline draws one encoder per seed.
	if res.Runs[0].ValidByL2[0] == res.Runs[1].ValidByL2[0] {
		t.Errorf("seeds 42 and 43 gave the same valid ROC-AUC %v", res.Runs[0].ValidByL2[0])
	}

	// Loading an exported encoder: the encoder seed 43 draws, loaded and used
	// for every seed, repeats run 1 (seed 43) and changes run 0 (seed 42,
	// whose embeddings would come from seed 42's encoder without the file).
	cfg.EncoderPath = writeSeededEncoder(t, smallEncoder, 43)
	cfg.Encoder = model.EncoderConfig{} // the file's architecture is used
	loaded, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Pretrained || loaded.Config.Encoder != smallEncoder {
		t.Errorf("pretrained %v, architecture %+v", loaded.Pretrained, loaded.Config.Encoder)
	}
	if !slices.Equal(loaded.Runs[1].ValidByL2, res.Runs[1].ValidByL2) || loaded.Runs[1].TestROCAUC != res.Runs[1].TestROCAUC {
		t.Errorf("loaded seed-43 encoder: valid %v test %v; random seed 43: valid %v test %v",
			loaded.Runs[1].ValidByL2, loaded.Runs[1].TestROCAUC, res.Runs[1].ValidByL2, res.Runs[1].TestROCAUC)
	}
	if slices.Equal(loaded.Runs[0].ValidByL2, res.Runs[0].ValidByL2) {
		t.Errorf("seed 42 with seed 43's encoder loaded equals the random seed-42 encoder: the encoder was not loaded")
	}
}

// Under a cvK protocol each seed keeps, for every task and fold, the one λ
// whose test ROC-AUC averaged over its folds is highest (recomputed here
// from the per-λ figures), and reports each fold's test ROC-AUC at it.
func TestLinearEvalCrossValidation(t *testing.T) {
	cfg := smallLinear(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	cfg.Protocol, cfg.Steps = "cv3", 50
	res, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 6 || res.Protocol != "cv3" || res.Folds != 3 || len(res.Selected) != 2 || res.Test.N != 6 || res.Valid.N != 0 {
		t.Fatalf("%d runs, protocol %q, %d folds, selected %+v, test over %d, valid over %d",
			len(res.Runs), res.Protocol, res.Folds, res.Selected, res.Test.N, res.Valid.N)
	}
	var all []float64
	for s, sel := range res.Selected {
		runs := res.Runs[3*s : 3*s+3]
		best, bestMean := 0, -1.0
		for g := range cfg.L2Grid {
			mean := (float64(runs[0].TestByL2[g]) + float64(runs[1].TestByL2[g]) + float64(runs[2].TestByL2[g])) / 3
			if mean > bestMean {
				best, bestMean = g, mean
			}
		}
		if sel.Seed != 42+uint64(s) || sel.L2 != cfg.L2Grid[best] || math.Abs(float64(sel.FoldMean)-bestMean) > 1e-12 {
			t.Errorf("seed %d: selected %+v, want λ %g of fold mean %v", s, sel, cfg.L2Grid[best], bestMean)
		}
		for i, r := range runs {
			if r.Valid != 0 || r.Train+r.Test != 1513 || len(r.TestByL2) != len(cfg.L2Grid) || len(r.ValidByL2) != 0 ||
				!slices.Equal(r.L2, []float64{cfg.L2Grid[best]}) || r.TestROCAUC != r.TestByL2[best] ||
				!inUnitInterval(r.TestROCAUC) || r.TestPerTask[0] != r.TestROCAUC {
				t.Errorf("seed %d fold %d: parts %d/%d/%d, λ %v, test %v of %v", s, i, r.Train, r.Valid, r.Test, r.L2, r.TestROCAUC, r.TestByL2)
			}
			all = append(all, float64(r.TestROCAUC))
		}
	}
	var sum float64
	for _, v := range all {
		sum += v
	}
	if math.Abs(float64(res.Test.Mean)-sum/6) > 1e-12 {
		t.Errorf("test mean %v, want the mean of the six folds' %v", res.Test.Mean, sum/6)
	}
}

// On the synthetic dataset, whose labels are rules over planted functional
// groups, even a random encoder's mean-pooled embeddings hold the atom
// types that reveal the groups, so the linear classifiers must rank well
// above chance on every task: this fails if fitting, selection or the
// scoring of the chosen classifiers were broken. Every tensor is freed.
func TestLinearEvalLearnsSynthetic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(dir, synthetic.Options{Molecules: 1000, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cfg := smallLinear(t, dir)
	cfg.Encoder.Hidden, cfg.Seeds = 32, 1
	live, leaked := torch.LiveTensors(), torch.LeakedTensors()
	res, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if torch.LiveTensors() != live || torch.LeakedTensors() != leaked {
		t.Errorf("linear evaluation left %d tensors allocated and %d to the garbage collector",
			torch.LiveTensors()-live, torch.LeakedTensors()-leaked)
	}
	r := res.Runs[0]
	t.Logf("test ROC-AUC %.3f, per task %v, λ %v", r.TestROCAUC, r.TestPerTask, r.L2)
	if r.TestROCAUC < 0.75 {
		t.Errorf("test ROC-AUC %.3f on the synthetic tasks, want ≥ 0.75", r.TestROCAUC)
	}
	for i, v := range r.TestPerTask {
		if !(v > 0.6) {
			t.Errorf("task %s: test ROC-AUC %v, want > 0.6", res.Dataset.Tasks[i], v)
		}
	}
}

// With label fractions every seed and split is fitted once per fraction on
// LabelSubsets of its train part (valid and test unchanged), and the result
// summarises each fraction. Fraction 1 repeats the evaluation without
// fractions exactly, and a fraction's runs do not depend on which other
// fractions are listed (its subsets come from the seed alone).
func TestLinearEvalLabelFractions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(dir, synthetic.Options{Molecules: 400, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cfg := smallLinear(t, dir)
	cfg.Steps = 100
	ds, err := data.Open(dir, data.OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	trainPart := len(ds.Split.Train)

	all, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LabelFractions = []float64{0.05, 1}
	res, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LabelFractions = []float64{0.05}
	scarce, err := evaluate.LinearEval(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}

	if len(res.Runs) != 4 || len(all.Runs) != 2 || len(scarce.Runs) != 2 {
		t.Fatalf("%d, %d and %d runs, want 4, 2 and 2", len(res.Runs), len(all.Runs), len(scarce.Runs))
	}
	sameRun := func(a, b evaluate.LinearEvalRun) bool {
		return a.Seed == b.Seed && a.Train == b.Train && a.LabelFraction == b.LabelFraction &&
			slices.Equal(a.ValidByL2, b.ValidByL2) && slices.Equal(a.TrainLossByL2, b.TrainLossByL2) && a.TestROCAUC == b.TestROCAUC
	}
	small := evaluate.LabelSubsetSize(trainPart, 0.05)
	for i, r := range res.Runs {
		seed, fraction, train := 42+uint64(i/2), 0.05, small
		if i%2 == 1 {
			fraction, train = 1, trainPart
		}
		if r.Seed != seed || r.LabelFraction != fraction || r.TrainPart != trainPart || r.Train != train ||
			r.Valid != len(ds.Split.Valid) || r.Test != len(ds.Split.Test) {
			t.Errorf("run %d: seed %d, fraction %g, %d of %d train, %d valid, %d test; want seed %d, fraction %g, %d of %d",
				i, r.Seed, r.LabelFraction, r.Train, r.TrainPart, r.Valid, r.Test, seed, fraction, train, trainPart)
		}
		want := all.Runs[i/2]
		if fraction < 1 {
			want = scarce.Runs[i/2]
		}
		if !sameRun(r, want) {
			t.Errorf("run %d (seed %d, fraction %g): valid %v, loss %v, test %v; alone: valid %v, loss %v, test %v",
				i, r.Seed, fraction, r.ValidByL2, r.TrainLossByL2, r.TestROCAUC, want.ValidByL2, want.TrainLossByL2, want.TestROCAUC)
		}
	}
	if slices.Equal(res.Runs[0].TrainLossByL2, res.Runs[1].TrainLossByL2) {
		t.Error("5 % and 100 % of the train labels gave the same fits")
	}

	if len(all.ByFraction) != 0 || len(res.ByFraction) != 2 {
		t.Fatalf("by fraction: %d without fractions, %d with two", len(all.ByFraction), len(res.ByFraction))
	}
	for k, f := range res.ByFraction {
		want := []metrics.Stat{scarce.Test, all.Test}[k]
		if f.Fraction != cfg.LabelFractions[0] && k == 0 || k == 1 && f.Fraction != 1 ||
			!slices.Equal(f.Train, []int{[]int{small, trainPart}[k]}) || f.Test != want {
			t.Errorf("fraction %d: %+v, want test %+v", k, f, want)
		}
	}
	// The headline is the largest fraction's, as without fractions.
	if res.Test != all.Test || res.Valid != all.Valid || !slices.Equal(res.TestPerTask, all.TestPerTask) {
		t.Errorf("test %+v valid %+v, want those with every label: %+v, %+v", res.Test, res.Valid, all.Test, all.Valid)
	}
}
