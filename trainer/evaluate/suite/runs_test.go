package suite_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// smallSuite fine-tunes (2 epochs) and probes one encoder on datasets under
// the scaffold protocol, 2 seeds from 42.
func smallSuite(t *testing.T, encoder string, datasets ...string) suite.Config {
	cfg := suite.Config{
		EncoderPaths: []string{encoder},
		Datasets:     datasets,
		Evaluations:  []string{suite.EvaluationFinetune, suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold},
		Finetune:     evaluate.DefaultFinetuneConfig(),
		Linear:       smallLinear(t, ""),
	}
	cfg.Finetune.Epochs, cfg.Finetune.Seeds, cfg.Finetune.Seed = 2, 2, 42
	cfg.Linear.Steps = 40
	return cfg
}

// Acceptance: every run of a suite made side by side (two processes) is
// the same run made alone, an evaluation of its seed only in this process,
// bit for bit: fine-tuning and linear evaluation on ogbg-molbace, with the
// pre-trained encoder and without.
func TestSuiteRunIsTheRunAlone(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	cfg := smallSuite(t, writeSeededEncoder(t, smallEncoder, 3), bace)
	res, err := suite.Run(cfg, jobsEnv(t, 2), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 4 {
		t.Fatalf("%d entries, want 4", len(res.Entries))
	}
	for _, e := range res.Entries {
		encoder := ""
		if e.Pretrained {
			encoder = cfg.EncoderPaths[0]
		}
		for i := range 2 {
			var got, want string
			if e.Evaluation == suite.EvaluationFinetune {
				alone := cfg.Finetune
				alone.Data, alone.EncoderPath, alone.Encoder, alone.Seeds, alone.Seed = bace, encoder, smallEncoder, 1, 42+uint64(i)
				single, err := evaluate.Finetune(alone, jobsEnv(t, 1))
				if err != nil {
					t.Fatal(err)
				}
				got, want = testenv.Untimed(t, e.Finetune.Runs[i]), testenv.Untimed(t, single.Runs[0])
			} else {
				alone := cfg.Linear
				alone.Data, alone.EncoderPath, alone.Encoder, alone.Seeds, alone.Seed = bace, encoder, smallEncoder, 1, 42+uint64(i)
				single, err := evaluate.LinearEval(alone, jobsEnv(t, 1))
				if err != nil {
					t.Fatal(err)
				}
				got, want = testenv.Untimed(t, e.Linear.Runs[i]), testenv.Untimed(t, single.Runs[0])
			}
			if got != want {
				t.Errorf("%s, pre-trained %v, seed %d: in the suite\n%s\nalone\n%s", e.Evaluation, e.Pretrained, 42+i, got, want)
			}
		}
	}
}

// runFiles are the names of the run files in dir, with their information.
func runFiles(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]os.FileInfo{}
	for _, d := range entries {
		info, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[d.Name()] = info
	}
	return out
}

// finetuned are the seeds of the fine-tuning progress lines in progress:
// the fine-tuning runs made.
func finetuned(progress string) []string {
	var seeds []string
	for _, m := range regexp.MustCompile(`(?m)^finetune \S+: seed (\d+), scaffold split, epoch 1/`).FindAllStringSubmatch(progress, -1) {
		seeds = append(seeds, m[1])
	}
	slices.Sort(seeds)
	return slices.Compact(seeds)
}

// Acceptance: a suite keeps each run in its run folder as it finishes, and
// the suite run again with --seeds 10 after --seeds 3 takes seeds 0–2's
// runs from the folder, untouched, and makes only seeds 3–9's, with the
// figures of seeds 0–2 unchanged; run once more it makes none and gives the
// same result. A run file of other settings (another epoch count) is never
// taken; a file that holds another run than its name says is an error
// naming it.
func TestSuiteTakesTheRunsItKept(t *testing.T) {
	bace := syntheticBenchmark(t, "ogbg_molbace", 5)
	cfg := smallSuite(t, writeSeededEncoder(t, smallEncoder, 3), bace)
	cfg.Finetune.Seeds, cfg.Finetune.Seed, cfg.Linear.Seeds, cfg.Linear.Seed = 3, 0, 3, 0
	dir := filepath.Join(t.TempDir(), "runs")
	run := func(c suite.Config) (*suite.Result, string) {
		t.Helper()
		var progress strings.Builder
		env := jobsEnv(t, 2)
		env.Progress = &progress
		res, err := suite.Run(c, env, suite.Options{RunFiles: dir})
		if err != nil {
			t.Fatalf("%v\n%s", err, progress.String())
		}
		return res, progress.String()
	}
	three, progress := run(cfg)
	if !strings.Contains(progress, "suite: 0 of 12 runs taken from "+dir+", 12 to make") {
		t.Errorf("the first call's progress:\n%s", progress)
	}
	kept := runFiles(t, dir)
	if len(kept) != 12 {
		t.Fatalf("%d run files, want 12: %v", len(kept), kept)
	}

	ten := cfg
	ten.Finetune.Seeds, ten.Linear.Seeds = 10, 10
	res, progress := run(ten)
	if !strings.Contains(progress, "suite: 12 of 40 runs taken from "+dir+", 28 to make") {
		t.Errorf("with 10 seeds, the progress:\n%s", progress)
	}
	if got, want := finetuned(progress), strings.Fields("3 4 5 6 7 8 9"); !slices.Equal(got, want) {
		t.Errorf("fine-tuned seeds %v, want %v", got, want)
	}
	now := runFiles(t, dir)
	if len(now) != 40 {
		t.Errorf("%d run files, want 40", len(now))
	}
	for name, was := range kept {
		if !os.SameFile(was, now[name]) || !was.ModTime().Equal(now[name].ModTime()) {
			t.Errorf("%s was written again", name)
		}
	}
	for i, e := range res.Entries {
		was := three.Entries[i]
		switch {
		case e.Finetune != nil && testenv.Untimed(t, e.Finetune.Runs[:3]) != testenv.Untimed(t, was.Finetune.Runs):
			t.Errorf("entry %d: fine-tuning runs of seeds 0–2 changed", i)
		case e.Linear != nil && testenv.Untimed(t, e.Linear.Runs[:3]) != testenv.Untimed(t, was.Linear.Runs):
			t.Errorf("entry %d: linear runs of seeds 0–2 changed", i)
		case len(e.RunTests) != 10:
			t.Errorf("entry %d: %d runs, want 10", i, len(e.RunTests))
		}
	}
	again, progress := run(ten)
	if !strings.Contains(progress, "suite: 40 of 40 runs taken from "+dir+", 0 to make") || len(finetuned(progress)) > 0 {
		t.Errorf("the same suite again:\n%s", progress)
	}
	if testenv.Untimed(t, again) != testenv.Untimed(t, res) || again.Markdown() != res.Markdown() {
		t.Errorf("the same suite again, from its runs:\n%s\nfirst\n%s", testenv.Untimed(t, again), testenv.Untimed(t, res))
	}

	other := cfg
	other.Finetune.Epochs = 3
	if _, progress := run(other); !strings.Contains(progress, "suite: 6 of 12 runs taken") || !slices.Equal(finetuned(progress), strings.Fields("0 1 2")) {
		t.Errorf("another epoch count took the fine-tuning runs of 2 epochs:\n%s", progress)
	}

	var first, second string
	for name := range now {
		if strings.Contains(name, "-linear-scaffold-random-seed0-") {
			first = name
		}
		if strings.Contains(name, "-linear-scaffold-random-seed1-") {
			second = name
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, second))
	if err != nil || first == "" {
		t.Fatalf("%v (files %v)", err, now)
	}
	if err := os.WriteFile(filepath.Join(dir, first), b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := jobsEnv(t, 2)
	if _, err := suite.Run(ten, env, suite.Options{RunFiles: dir}); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, first)+" is not the run its name says") {
		t.Errorf("a run file holding another run: %v", err)
	}
}

// A run that fails (its process killed as it finishes) ends the suite with
// an error naming its entry; the entries whose runs had all finished are
// kept, with their gains.
func TestSuiteKeepsTheEntriesFinishedBeforeAFailure(t *testing.T) {
	bace, bbbp := syntheticBenchmark(t, "ogbg_molbace", 5), syntheticBenchmark(t, "ogbg_molbbbp", 6)
	cfg := smallSuite(t, writeSeededEncoder(t, smallEncoder, 3), bace, bbbp)
	cfg.Evaluations = []string{suite.EvaluationLinear}
	cfg.Linear.Seeds, cfg.Linear.Seed = 1, 42
	t.Setenv(failpoint.Env, "after linear run on ogbg_molbbbp, seed 42, split 0") // read by the pool's processes as they start
	res, err := suite.Run(cfg, jobsEnv(t, 2), suite.Options{})
	if err == nil || !strings.Contains(err.Error(), "bbbp, linear scaffold, ") || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("a killed run: %v", err)
	}
	if res == nil || len(res.Entries) != 2 || res.Entries[0].Benchmark != "bace" || res.Entries[1].Benchmark != "bace" || len(res.Gains) != 1 {
		t.Fatalf("the entries finished before the failure: %+v", res)
	}
}

// A run's failure names its own entry (dataset, evaluation, protocol and
// encoder) when the runs the suite makes are not all of its runs: the runs
// a suite takes from its run folder are not made, so the pool's job k is
// the suite's k-th run left to make, not its k-th run. Two encoders (seeds
// 42 and 43) on bace and bbbp, linear evaluation: every run is kept, then
// bace's random run of encoder 2 and bbbp's pre-trained run of encoder 2
// are removed and made again, the second killed as it finishes (the pool's
// job 1, the suite's run 6 of 0–7). The failure names bbbp's pre-trained
// encoder 2, and every other entry is kept.
func TestSuiteFailureNamesItsEntry(t *testing.T) {
	bace, bbbp := syntheticBenchmark(t, "ogbg_molbace", 5), syntheticBenchmark(t, "ogbg_molbbbp", 6)
	cfg := smallSuite(t, writeSeededEncoder(t, smallEncoder, 3), bace, bbbp)
	cfg.EncoderPaths = append(cfg.EncoderPaths, writeSeededEncoder(t, smallEncoder, 4))
	cfg.Evaluations = []string{suite.EvaluationLinear}
	cfg.Linear.Seeds, cfg.Linear.Seed = 1, 42
	dir := filepath.Join(t.TempDir(), "runs")
	if _, err := suite.Run(cfg, jobsEnv(t, 2), suite.Options{RunFiles: dir}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"bace-linear-scaffold-random-seed43-", "bbbp-linear-scaffold-pretrained-seed43-"} {
		files, _ := filepath.Glob(filepath.Join(dir, run+"*.json"))
		if len(files) != 1 {
			t.Fatalf("run files %s*: %q, want one", run, files)
		}
		if err := os.Remove(files[0]); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(failpoint.Env, "after linear run on ogbg_molbbbp, seed 43, split 0") // read by the pool's processes as they start
	res, err := suite.Run(cfg, jobsEnv(t, 2), suite.Options{RunFiles: dir})
	const want = "bbbp, linear scaffold, pre-trained encoder 2: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("a killed run: %v; want it named %q", err, want)
	}
	if res == nil || len(res.Entries) != 7 {
		t.Fatalf("the entries finished: %+v, want 7", res)
	}
	for _, e := range res.Entries {
		if e.Benchmark == "bbbp" && e.Pretrained && e.Replicate == 1 {
			t.Errorf("the failed entry was kept: %+v", e)
		}
	}
}
