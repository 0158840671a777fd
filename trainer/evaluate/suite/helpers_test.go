package suite_test

import (
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// Helpers shared with trainer/evaluate's tests (a test package cannot
// import another's).

// cpuEnv runs an evaluation on the CPU, with the test's own dataset cache.
func cpuEnv(t *testing.T) runenv.Env {
	env := runenv.Default()
	env.Dataset.CacheDir = t.TempDir()
	return env
}

// inUnitInterval reports whether v is a ROC-AUC: finite and in [0, 1].
func inUnitInterval(v metrics.Value) bool { return v >= 0 && v <= 1 }

// smallEncoder keeps the downstream tests within seconds.
var smallEncoder = model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}

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
	clf, err := model.NewClassifier(arch, 1, torch.CPU, torch.Float32)
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

// jobsEnv is cpuEnv with jobs runs side by side (1: in this process), each
// on one libtorch thread.
func jobsEnv(t *testing.T, jobs int) runenv.Env {
	env := cpuEnv(t)
	env.Jobs, env.Threads = jobs, 1
	return env
}
