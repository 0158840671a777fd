package evaluate_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// jobsEnv is testEnv with jobs runs side by side (1: in this process), each
// on one libtorch thread.
func jobsEnv(t *testing.T, jobs int) runenv.Env {
	env := testEnv(t)
	env.Jobs, env.Threads = jobs, 1
	return env
}

// Acceptance: runs made side by side in two processes are the runs made
// one after another in this process, and each is the run made alone (an
// evaluation of its seed only), bit for bit: every epoch's loss and
// figures, the selected epoch (across folds under cross-validation) and its
// figures, the summaries; fine-tuning on ogbg-molbace's scaffold split and
// in 3-fold cross-validation, and linear evaluation with two label
// fractions under both, a pre-trained encoder and a random one.
func TestRunsSideBySideAreTheRunsAlone(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	encoder := writeSeededEncoder(t, smallEncoder, 11)
	for _, protocol := range []evaluate.Protocol{evaluate.ProtocolScaffold, "cv3"} {
		t.Run("finetune "+string(protocol), func(t *testing.T) {
			cfg := smallFinetune(t, bace)
			cfg.Protocol, cfg.Seeds, cfg.Epochs = protocol, 3, 3
			if protocol != evaluate.ProtocolScaffold {
				cfg.Seeds, cfg.Epochs = 2, 2
			}
			one, err := evaluate.Finetune(cfg, jobsEnv(t, 1))
			if err != nil {
				t.Fatal(err)
			}
			two, err := evaluate.Finetune(cfg, jobsEnv(t, 2))
			if err != nil {
				t.Fatal(err)
			}
			if testenv.Untimed(t, one) != testenv.Untimed(t, two) {
				t.Errorf("side by side:\n%s\none after another:\n%s", testenv.Untimed(t, two), testenv.Untimed(t, one))
			}
			alone := cfg
			alone.Seeds, alone.Seed = 1, cfg.Seed+1
			single, err := evaluate.Finetune(alone, jobsEnv(t, 1))
			if err != nil {
				t.Fatal(err)
			}
			folds := len(single.Runs)
			if got, want := testenv.Untimed(t, two.Runs[folds:2*folds]), testenv.Untimed(t, single.Runs); got != want {
				t.Errorf("seed %d side by side:\n%s\nalone:\n%s", alone.Seed, got, want)
			}
			if slices.Equal(two.Runs[0].TestROCAUC, two.Runs[folds].TestROCAUC) {
				t.Errorf("seeds %d and %d have the same test curve %v: the comparison cannot tell runs apart", cfg.Seed, alone.Seed, two.Runs[0].TestROCAUC)
			}
		})
		for _, encoderPath := range []string{encoder, ""} {
			t.Run(fmt.Sprintf("linear %s, pre-trained %v", protocol, encoderPath != ""), func(t *testing.T) {
				cfg := smallLinear(t, bace)
				cfg.Protocol, cfg.EncoderPath, cfg.Seeds, cfg.Steps, cfg.LabelFractions = protocol, encoderPath, 3, 60, []float64{0.2, 1}
				one, err := evaluate.LinearEval(cfg, jobsEnv(t, 1))
				if err != nil {
					t.Fatal(err)
				}
				two, err := evaluate.LinearEval(cfg, jobsEnv(t, 2))
				if err != nil {
					t.Fatal(err)
				}
				if testenv.Untimed(t, one) != testenv.Untimed(t, two) {
					t.Errorf("side by side:\n%s\none after another:\n%s", testenv.Untimed(t, two), testenv.Untimed(t, one))
				}
				alone := cfg
				alone.Seeds, alone.Seed = 1, cfg.Seed+2
				single, err := evaluate.LinearEval(alone, jobsEnv(t, 1))
				if err != nil {
					t.Fatal(err)
				}
				n := len(single.Runs)
				if got, want := testenv.Untimed(t, two.Runs[2*n:3*n]), testenv.Untimed(t, single.Runs); got != want {
					t.Errorf("seed %d side by side:\n%s\nalone:\n%s", alone.Seed, got, want)
				}
			})
		}
	}
}

// finetune --save keeps every seed's model at its selected epoch, made side
// by side: ensemble.json lists them best valid first with their runs'
// figures, each member a saved model that loads alone and records its run.
// With SaveTop 2 only the two best are kept (the same runs, so the every-seed
// ensemble's first two), and the others' folders are gone. A run that dies
// after writing its member fails the command and leaves neither the folder
// nor a temporary beside it.
func TestFinetuneSaveKeepsAnEnsemble(t *testing.T) {
	cfg := smallFinetune(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	cfg.Seeds, cfg.Epochs = 3, 3
	parent := t.TempDir()
	every, top := cfg, cfg
	every.Save, top.Save, top.SaveTop = filepath.Join(parent, "every"), filepath.Join(parent, "top"), 2
	res, err := evaluate.Finetune(every, jobsEnv(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	e := res.Saved
	if e == nil || e.Dir != every.Save || e.Format != infer.EnsembleFormat || e.Version != 1 || e.Selection != "every seed" ||
		e.Metric != evaluate.MetricROCAUC || len(e.Members) != 3 {
		t.Fatalf("saved %+v", e)
	}
	var onDisk infer.EnsembleManifest
	if b, err := os.ReadFile(filepath.Join(every.Save, infer.EnsembleFile)); err != nil || json.Unmarshal(b, &onDisk) != nil ||
		testenv.Untimed(t, onDisk) != testenv.Untimed(t, e.EnsembleManifest) {
		t.Errorf("ensemble.json (%v): %s, the result's %+v", err, b, e.EnsembleManifest)
	}
	var seeds []uint64
	for i, m := range e.Members {
		r := res.Runs[slices.IndexFunc(res.Runs, func(r evaluate.FinetuneRun) bool { return r.Seed == m.Seed })]
		seeds = append(seeds, m.Seed)
		if m.Dir != fmt.Sprintf("seed-%d", m.Seed) || m.Split != "scaffold" || m.Epoch != r.BestEpoch || m.Valid != r.BestValid || m.Test != r.TestAtBest {
			t.Errorf("member %d %+v, its run: epoch %d, valid %v, test %v", i, m, r.BestEpoch, r.BestValid, r.TestAtBest)
		}
		if i > 0 && m.Valid > e.Members[i-1].Valid {
			t.Errorf("member %d (valid %v) after member %d (valid %v)", i, m.Valid, i-1, e.Members[i-1].Valid)
		}
		saved, clf, err := infer.LoadModel(filepath.Join(every.Save, m.Dir), torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		clf.Free()
		var member evaluate.SavedMember
		if err := json.Unmarshal(saved.Training, &member); err != nil || member.Seed != m.Seed || member.Epoch != m.Epoch ||
			member.Valid != m.Valid || member.Test != m.Test || member.Metric != evaluate.MetricROCAUC {
			t.Errorf("%s records %s (%v), want member %+v", m.Dir, saved.Training, err, m)
		}
	}
	if slices.Sort(seeds); !slices.Equal(seeds, []uint64{5, 6, 7}) {
		t.Errorf("members of seeds %v, want 5, 6, 7", seeds)
	}

	res, err = evaluate.Finetune(top, jobsEnv(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testenv.Untimed(t, res.Saved.Members), testenv.Untimed(t, e.Members[:2]); got != want || res.Saved.Selection != "the 2 best by valid" {
		t.Errorf("the 2 best (%s): %s, want %s", res.Saved.Selection, got, want)
	}
	entries, _ := os.ReadDir(top.Save)
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	if want := []string{e.Members[0].Dir, e.Members[1].Dir, infer.EnsembleFile}; !slices.Equal(names, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s holds %v, want %v", top.Save, names, want)
	}

	failed := cfg
	failed.Save = filepath.Join(parent, "failed")
	t.Setenv(failpoint.Env, "after member seed-6") // read by the pool's processes as they start
	_, err = evaluate.Finetune(failed, jobsEnv(t, 2))
	if err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("a run killed after writing its member: %v", err)
	}
	entries, _ = os.ReadDir(parent)
	if len(entries) != 2 {
		var left []string
		for _, d := range entries {
			left = append(left, d.Name())
		}
		t.Errorf("%s holds %v after the failure, want only every and top", parent, left)
	}
}
