package suite_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// --random-from compares what the data holds, not where it is: a suite
// whose benchmark file was replaced by other molecules at the same path is
// refused (it used to report Δ and p-values against random encoders
// evaluated on the old molecules), and so is one from before suites
// recorded their data's content. A suite.json that is damaged (truncated,
// empty, NaN where JSON has no NaN) is the file's error naming it and the
// place, not misuse of the flag (it was exit 2, "is not a suite result").
func TestRandomFromComparesTheDataNotItsPath(t *testing.T) {
	dir := t.TempDir()
	bace := filepath.Join(dir, "bace") // a benchmark's name
	if _, err := synthetic.Write(bace, synthetic.Options{Molecules: 120, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := suite.Config{
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 3)},
		Datasets:     []string{bace},
		Evaluations:  []string{suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold},
		Linear:       smallLinear(t, ""),
	}
	cfg.Linear.Seeds, cfg.Linear.Steps = 1, 20
	first, err := suite.Run(cfg, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := data.ContentKey(bace); first.DataKeys["bace"] != key || key == "" {
		t.Fatalf("the suite records %q for bace, want its content key %q", first.DataKeys, key)
	}
	saveSuite := func(name string, r any) string {
		folder := filepath.Join(dir, name)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(folder, "suite.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return folder
	}
	earlier := saveSuite("first", first)
	second := cfg
	second.EncoderPaths = []string{writeSeededEncoder(t, smallEncoder, 5)}
	second.RandomFrom = earlier
	if _, err := suite.Run(second, cpuEnv(t), suite.Options{}); err != nil {
		t.Fatalf("the same data: %v", err)
	}

	old := *first
	old.DataKeys = nil
	second.RandomFrom = saveSuite("old", &old)
	_, err = suite.Run(second, cpuEnv(t), suite.Options{})
	if want := "does not record what " + bace + " held when it ran"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a suite without data keys: %v, want %q", err, want)
	}

	// Other molecules at the same path.
	if err := os.RemoveAll(bace); err != nil {
		t.Fatal(err)
	}
	if _, err := synthetic.Write(bace, synthetic.Options{Molecules: 120, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	second.RandomFrom = earlier
	_, err = suite.Run(second, cpuEnv(t), suite.Options{})
	var fe *field.Error
	if want := "ran its random encoders on other molecules than " + bace + " holds now"; err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &fe) || fe.Name != "random_from" {
		t.Errorf("the data replaced: %v, want a random_from error with %q", err, want)
	}

	body, _ := json.Marshal(first)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "empty: no JSON value"},
		{"truncated", string(body[:len(body)/2]), "the JSON ends early (truncated?)"},
		{"NaN", `{"config": {}, "entries": [{"test": {"mean": NaN}}]}`, `not valid JSON at byte 46: invalid character 'N' looking for beginning of value (after the key "mean")`},
	} {
		folder := filepath.Join(dir, tc.name)
		os.MkdirAll(folder, 0o755)
		file := filepath.Join(folder, "suite.json")
		if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		second.RandomFrom = folder
		_, err := suite.Run(second, cpuEnv(t), suite.Options{})
		if err == nil || err.Error() != file+": "+tc.want || errors.As(err, &fe) {
			t.Errorf("%s suite.json: %v, want the file's error %q", tc.name, err, file+": "+tc.want)
		}
	}
}
