package evaluate_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// smallEncoder keeps the downstream tests within seconds.
var smallEncoder = model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}

// inUnitInterval reports whether v is a ROC-AUC: finite and in [0, 1].
func inUnitInterval(v metrics.Value) bool { return v >= 0 && v <= 1 }

func smallFinetune(t *testing.T, dataPath string) evaluate.FinetuneConfig {
	cfg := evaluate.DefaultFinetuneConfig()
	cfg.Data = dataPath
	cfg.Encoder, cfg.Epochs, cfg.Seeds, cfg.Seed = smallEncoder, 3, 2, 5
	return cfg
}

// Fine-tuning on ogbg-molbace's scaffold split gives a complete result:
// every run with one value per epoch, the selected epoch's figures, and
// summaries that are the mean and std of the runs' values.
func TestFinetuneOnBace(t *testing.T) {
	cfg := smallFinetune(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	res, err := evaluate.Finetune(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pretrained || res.Dataset.Molecules != 1513 || res.Dataset.Split != "scaffold" || !slices.Equal(res.Dataset.Tasks, []string{"Class"}) {
		t.Errorf("dataset %+v, pretrained %v", res.Dataset, res.Pretrained)
	}
	if res.Config.Encoder.Dropout != 0.5 || res.Config.Encoder.Hidden != 16 {
		t.Errorf("recorded architecture %+v, want the small encoder with dropout 0.5", res.Config.Encoder)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	var tests []float64
	for i, r := range res.Runs {
		if r.Seed != 5+uint64(i) || r.Train+r.Valid+r.Test != 1513 || r.Split != "scaffold" {
			t.Errorf("run %d: seed %d, split %s %d/%d/%d", i, r.Seed, r.Split, r.Train, r.Valid, r.Test)
		}
		for name, curve := range map[string][]metrics.Value{"train loss": r.TrainLoss, "valid": r.ValidROCAUC, "test": r.TestROCAUC} {
			if len(curve) != 3 {
				t.Errorf("run %d: %s has %d epochs, want 3", i, name, len(curve))
			}
		}
		for e := range r.ValidROCAUC {
			if !inUnitInterval(r.ValidROCAUC[e]) || !inUnitInterval(r.TestROCAUC[e]) || !(r.TrainLoss[e] > 0) || math.IsInf(float64(r.TrainLoss[e]), 0) {
				t.Errorf("run %d epoch %d: loss %v, valid %v, test %v", i, e+1, r.TrainLoss[e], r.ValidROCAUC[e], r.TestROCAUC[e])
			}
		}
		best := slices.Index(r.ValidROCAUC, slices.Max(r.ValidROCAUC)) + 1
		if r.BestEpoch != best || r.BestValid != r.ValidROCAUC[best-1] || r.TestAtBest != r.TestROCAUC[best-1] {
			t.Errorf("run %d: best epoch %d (valid %v, test %v), want epoch %d of valid %v", i, r.BestEpoch, r.BestValid, r.TestAtBest, best, r.ValidROCAUC)
		}
		if len(r.TestPerTask) != 1 || r.TestPerTask[0] != r.TestAtBest {
			t.Errorf("run %d: per-task test %v, want [%v]", i, r.TestPerTask, r.TestAtBest)
		}
		tests = append(tests, float64(r.TestAtBest))
	}
	mean := (tests[0] + tests[1]) / 2
	std := math.Abs(tests[0]-tests[1]) / 2
	if math.Abs(float64(res.Test.Mean)-mean) > 1e-12 || math.Abs(float64(res.Test.Std)-std) > 1e-12 || res.Test.N != 2 {
		t.Errorf("test summary %+v, want mean %v std %v over 2", res.Test, mean, std)
	}
	if len(res.TestPerTask) != 1 || res.TestPerTask[0].Task != "Class" || res.TestPerTask[0].Mean != res.Test.Mean {
		t.Errorf("per-task summary %+v", res.TestPerTask)
	}

	// The JSON form holds the same, with the configuration used.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back evaluate.FinetuneResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Config.Epochs != 3 || back.Config.Data != cfg.Data || len(back.Runs[1].TestROCAUC) != 3 || back.Test != res.Test {
		t.Errorf("JSON round trip lost data: %s", b)
	}

	// Run i depends on Seed+i only: a lone run seeded 6 repeats run 1.
	cfg.Seeds, cfg.Seed = 1, 6
	again, err := evaluate.Finetune(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Runs[0].ValidROCAUC, res.Runs[1].ValidROCAUC) || !slices.Equal(again.Runs[0].TrainLoss, res.Runs[1].TrainLoss) {
		t.Errorf("seed 6 alone: valid %v loss %v; as second run: valid %v loss %v",
			again.Runs[0].ValidROCAUC, again.Runs[0].TrainLoss, res.Runs[1].ValidROCAUC, res.Runs[1].TrainLoss)
	}

	// Loading an exported encoder replaces the encoder's initialisation: the
	// encoder that seed 6 draws, exported and loaded, repeats run 1 (seed 6)
	// and changes run 0 (seed 5).
	cfg.EncoderPath = writeSeededEncoder(t, smallEncoder, 6)
	cfg.Encoder = model.EncoderConfig{}
	cfg.Seeds, cfg.Seed = 2, 5
	loaded, err := evaluate.Finetune(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Pretrained || loaded.Config.Encoder.Hidden != 16 || loaded.Config.Encoder.Dropout != 0.5 {
		t.Errorf("pretrained %v, architecture %+v", loaded.Pretrained, loaded.Config.Encoder)
	}
	if !slices.Equal(loaded.Runs[1].TrainLoss, res.Runs[1].TrainLoss) {
		t.Errorf("seed 6 with its own encoder loaded: loss %v; from scratch: %v", loaded.Runs[1].TrainLoss, res.Runs[1].TrainLoss)
	}
	if slices.Equal(loaded.Runs[0].TrainLoss, res.Runs[0].TrainLoss) {
		t.Errorf("seed 5 with seed 6's encoder loaded trains exactly as from scratch: the encoder was not loaded")
	}
}

// Under a cvK protocol every fold is a run per seed, trained on the other
// folds with no valid part; each seed's runs all report the epoch of best
// test ROC-AUC averaged over its folds (recomputed here from the curves);
// and every tensor a run makes is freed when it ends.
func TestFinetuneCrossValidation(t *testing.T) {
	cfg := smallFinetune(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	cfg.Protocol, cfg.Seeds, cfg.Epochs = "cv3", 2, 3
	live, leaked := torch.LiveTensors(), torch.LeakedTensors()
	res, err := evaluate.Finetune(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if torch.LiveTensors() != live || torch.LeakedTensors() != leaked {
		t.Errorf("fine-tuning left %d tensors allocated and %d to the garbage collector",
			torch.LiveTensors()-live, torch.LeakedTensors()-leaked)
	}
	if len(res.Runs) != 6 || res.Dataset.Split != "cv3" || res.Protocol != "cv3" || res.Folds != 3 || res.Test.N != 6 || res.Valid.N != 0 {
		t.Fatalf("%d runs, split %q, protocol %q, %d folds, test over %d, valid over %d",
			len(res.Runs), res.Dataset.Split, res.Protocol, res.Folds, res.Test.N, res.Valid.N)
	}
	if len(res.Selected) != 2 {
		t.Fatalf("selected %+v, want one per seed", res.Selected)
	}
	for s, sel := range res.Selected {
		runs := res.Runs[3*s : 3*s+3]
		bestEpoch, bestMean := 0, -1.0
		for e := range cfg.Epochs {
			mean := (float64(runs[0].TestROCAUC[e]) + float64(runs[1].TestROCAUC[e]) + float64(runs[2].TestROCAUC[e])) / 3
			if mean > bestMean {
				bestEpoch, bestMean = e+1, mean
			}
		}
		if sel.Seed != 5+uint64(s) || sel.Epoch != bestEpoch || math.Abs(float64(sel.FoldMean)-bestMean) > 1e-12 {
			t.Errorf("seed %d: selected %+v, want epoch %d of fold mean %v", s, sel, bestEpoch, bestMean)
		}
		for i, r := range runs {
			// 1513 = 505 + 504 + 504: fold i tests, the others train.
			wantTest := []int{505, 504, 504}[i]
			if r.Seed != sel.Seed || r.Split != fmt.Sprintf("cv3-fold%d", i) || r.Test != wantTest || r.Valid != 0 || r.Train != 1513-wantTest {
				t.Errorf("seed %d fold %d: seed %d, split %s, %d/%d/%d", s, i, r.Seed, r.Split, r.Train, r.Valid, r.Test)
			}
			if r.BestEpoch != bestEpoch || r.TestAtBest != r.TestROCAUC[bestEpoch-1] || !inUnitInterval(r.TestAtBest) ||
				len(r.ValidROCAUC) != 0 || !math.IsNaN(float64(r.BestValid)) || len(r.TestPerTask) != 1 || r.TestPerTask[0] != r.TestAtBest {
				t.Errorf("seed %d fold %d: epoch %d, test %v of %v, valid %v, per task %v", s, i, r.BestEpoch, r.TestAtBest, r.TestROCAUC, r.ValidROCAUC, r.TestPerTask)
			}
		}
	}
}

// testEnv runs an evaluation on the test device ($MICROGRAPH_TEST_DEVICE,
// else the CPU), with the test's own dataset cache; on a GPU, with
// deterministic algorithms, as the tests compare runs bit for bit.
func testEnv(t *testing.T) runenv.Env {
	env := runenv.Default()
	env.Device = testdevice.Get(t)
	env.Dataset.CacheDir = t.TempDir()
	testdevice.Deterministic(t)
	return env
}
