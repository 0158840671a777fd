package suite_test

import (
	"encoding/json"
	"github.com/micrograph/micrograph/internal/testenv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// syntheticBenchmark writes the built-in synthetic dataset under a
// benchmark's OGB folder name, so that a suite takes it for that benchmark.
func syntheticBenchmark(t *testing.T, name string, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if _, err := synthetic.Write(dir, synthetic.Options{Molecules: 160, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// --random-from's settings check, on the synthetic dataset (no ../shared
// needed). An earlier suite fine-tuned and probed two encoders on "bace".
// A later suite of other encoders that probes only, with the same probe
// settings, takes the earlier random runs entry for entry and remakes the
// pre-trained ones, whatever its fine-tuning settings (it runs none). One
// that differs in anything its random runs depend on is refused before any
// evaluation, naming random_from and what differs: the probe's seeds, L2
// grid or steps, the datasets (another benchmark in the same number), the
// encoder architecture; and so is one that fine-tunes with other settings.
func TestSuiteRandomFromSettingsOnSyntheticData(t *testing.T) {
	bace := syntheticBenchmark(t, "ogbg_molbace", 5)
	bbbp := syntheticBenchmark(t, "ogbg_molbbbp", 6)
	first := suite.Config{
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 3), writeSeededEncoder(t, smallEncoder, 4)},
		Datasets:     []string{bace},
		Evaluations:  []string{suite.EvaluationFinetune, suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold},
		Finetune:     evaluate.DefaultFinetuneConfig(),
		Linear:       smallLinear(t, ""),
	}
	first.Finetune.Epochs, first.Finetune.Seeds = 1, 2
	first.Linear.Seeds, first.Linear.Steps = 2, 20
	earlier, err := suite.Run(first, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := json.Marshal(earlier)
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	randomLinear := map[int]suite.Entry{}
	for _, e := range earlier.Entries {
		if !e.Pretrained && e.Evaluation == suite.EvaluationLinear {
			randomLinear[e.Replicate] = e
		}
	}
	if len(earlier.Entries) != 8 || len(randomLinear) != 2 {
		t.Fatalf("the earlier suite has %d entries, %d random probes; want 8 and 2", len(earlier.Entries), len(randomLinear))
	}

	// later is a suite of other encoders that probes only and takes the
	// earlier random runs.
	later := func() suite.Config {
		c := first
		c.EncoderPaths = []string{writeSeededEncoder(t, smallEncoder, 5), writeSeededEncoder(t, smallEncoder, 6)}
		c.Evaluations = []string{suite.EvaluationLinear}
		c.Finetune.Epochs, c.Finetune.LR = 7, 0.5 // not run: not compared
		c.RandomFrom = dir
		return c
	}
	var progress strings.Builder
	env := cpuEnv(t)
	env.Progress = &progress
	res, err := suite.Run(later(), env, suite.Options{})
	if err != nil {
		t.Fatalf("a suite that runs none of the differing evaluations: %v", err)
	}
	if len(res.Entries) != 4 || res.RandomFinetune != nil {
		t.Fatalf("%d entries, want 4; random fine-tuning recorded %+v, want none", len(res.Entries), res.RandomFinetune)
	}
	for i, e := range res.Entries {
		if e.Pretrained {
			for _, was := range earlier.Entries {
				if was.Pretrained && was.Evaluation == e.Evaluation && was.Replicate == e.Replicate && was.Test == e.Test {
					t.Errorf("entry %d: the pre-trained run was taken from the earlier suite (test %v), not made with the new encoder", i, e.Test)
				}
			}
			continue
		}
		want := randomLinear[e.Replicate]
		e.Outcome.Linear, want.Outcome.Linear = nil, nil // compared through their figures
		if !reflect.DeepEqual(e, want) {
			t.Errorf("entry %d: random run %+v, earlier %+v", i, e, want)
		}
	}
	taken := 0
	for _, line := range strings.Split(progress.String(), "\n") {
		if strings.Contains(line, "taken from "+dir) && strings.Contains(line, "without pre-training") {
			taken++
		}
	}
	if n := strings.Count(progress.String(), "taken from "+dir); n != 2 || taken != 2 {
		t.Errorf("%d runs said to be taken, %d of them without pre-training; want 2 and 2:\n%s", n, taken, progress.String())
	}

	refused := []struct {
		name, says string
		edit       func(c *suite.Config)
	}{
		{"other seeds", "evaluation settings", func(c *suite.Config) { c.Linear.Seeds = 3 }},
		{"another L2 grid", "evaluation settings", func(c *suite.Config) { c.Linear.L2Grid = []float64{1, 0.1} }},
		{"other steps", "evaluation settings", func(c *suite.Config) { c.Linear.Steps = 21 }},
		{"another benchmark", "datasets", func(c *suite.Config) { c.Datasets = []string{bbbp} }},
		{"another architecture", "architecture", func(c *suite.Config) {
			c.EncoderPaths = []string{writeSeededEncoder(t, model.EncoderConfig{Hidden: 8, Layers: 1, MLPLayers: 1, T: 1}, 5)}
		}},
		{"fine-tuning with other settings", "evaluation settings", func(c *suite.Config) {
			c.Evaluations = []string{suite.EvaluationFinetune, suite.EvaluationLinear}
		}},
	}
	for _, tc := range refused {
		c := later()
		tc.edit(&c)
		var progress strings.Builder
		env := cpuEnv(t)
		env.Progress = &progress
		_, err := suite.Run(c, env, suite.Options{})
		if err == nil || !strings.Contains(err.Error(), "random_from") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want a refusal naming random_from and %q", tc.name, err, tc.says)
		}
		if progress.Len() > 0 {
			t.Errorf("%s: evaluations ran before the refusal:\n%s", tc.name, progress.String())
		}
	}
}

// --random-from takes the runs without pre-training of an earlier suite
// that fine-tuned them with another recipe (the learning rate, and no rate
// of the encoder's own): the result
// records the earlier fine-tuning settings, the random entries are the
// earlier ones, and suite.md says, under its table, which recipe each side
// used.
func TestSuiteRandomFromAnotherRecipe(t *testing.T) {
	bace := syntheticBenchmark(t, "ogbg_molbace", 5)
	first := suite.Config{
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 3)},
		Datasets:     []string{bace},
		Evaluations:  []string{suite.EvaluationFinetune},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold},
		Finetune:     evaluate.DefaultFinetuneConfig(),
	}
	first.Finetune.Epochs, first.Finetune.Seeds = 1, 2
	earlier, err := suite.Run(first, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := json.Marshal(earlier)
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	later := first
	later.EncoderPaths = []string{writeSeededEncoder(t, smallEncoder, 5)}
	later.Finetune.LR, later.Finetune.EncoderLR = 0.01, 1e-4
	later.RandomFrom = dir
	res, err := suite.Run(later, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RandomFinetune == nil || !reflect.DeepEqual(*res.RandomFinetune, first.Finetune) {
		t.Errorf("random fine-tuning recorded %+v, want the earlier suite's %+v", res.RandomFinetune, first.Finetune)
	}
	if got, want := testenv.Untimed(t, res.Entries[1]), testenv.Untimed(t, earlier.Entries[1]); res.Entries[1].Pretrained || got != want {
		t.Errorf("the random entry %s, the earlier suite's %s", got, want)
	}
	if line := "Fine-tune, no pre-training: the runs of " + dir + ", fine-tuned with encoder_lr (not set), lr 0.001 (the pre-trained encoders with encoder_lr 0.0001, lr 0.01).\n"; !strings.Contains(res.Markdown(), line) {
		t.Errorf("the table lacks %q:\n%s", line, res.Markdown())
	}
	// A suite taking them in turn from this one records the recipe they
	// were made with, not this one's.
	b, _ = json.Marshal(res)
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = suite.Run(later, cpuEnv(t), suite.Options{})
	if err != nil || res.RandomFinetune == nil || res.RandomFinetune.LR != first.Finetune.LR {
		t.Errorf("taken twice: %v, recorded %+v", err, res.RandomFinetune)
	}
}
