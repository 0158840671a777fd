package suite

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// Result is every evaluation of a suite, and the gains of pre-training.
type Result struct {
	Config Config `json:"config"`
	// DataKeys is each benchmark's data.ContentKey when the suite ran, for
	// a later --random-from to tell whether the data is still the same;
	// absent in suites from before 2026-11-26.
	DataKeys map[string]string `json:"data_keys,omitempty"`
	// RandomFinetune, when the runs without pre-training were taken from an
	// earlier suite (Config.RandomFrom) that fine-tuned them with another
	// recipe than Config.Finetune's, is the settings they were fine-tuned
	// with.
	RandomFinetune *evaluate.FinetuneConfig `json:"random_finetune,omitempty"`
	Entries        []Entry                  `json:"entries"` // dataset, evaluation, protocol, replicate; pre-trained first
	Gains          []Gain                   `json:"gains"`   // per benchmark, evaluation and protocol
	Average        []Gain                   `json:"average"` // per evaluation and protocol, over the benchmarks (Benchmark "average")
	Seconds        float64                  `json:"seconds"`
}

// Entry is one evaluation under one protocol on one benchmark with one
// encoder.
type Entry struct {
	Benchmark  string            `json:"benchmark"`
	Evaluation string            `json:"evaluation"`
	Protocol   evaluate.Protocol `json:"protocol"`
	Pretrained bool              `json:"pretrained"`
	// Replicate i is encoder i, or the random encoders drawn from its seeds.
	Replicate int `json:"replicate"`
	evaluate.Outcome
}

// RunsFolder is the folder, in a suite's output folder, that keeps each
// finished run (Options.RunFiles).
const RunsFolder = "runs"

// OutputFiles are the files a suite writes into its output folder: the
// table and the results (Save), or their partial forms after a failure, the
// runs kept as they finish, and the lock the suite writing there holds.
var OutputFiles = []string{"suite.md", "suite.json", "suite-partial.md", "suite-partial.json", RunsFolder, "lock"}

// Save writes table (the result's Markdown) and the result into the folder
// dir, made if missing: suite.md and suite.json, or after a failure
// (partial: the evaluations finished before it) suite-partial.md and
// suite-partial.json. It returns the two files' paths.
func (r *Result) Save(dir, table string, partial bool) (md, js string, err error) {
	name := "suite"
	if partial {
		name = "suite-partial"
	}
	md, js = filepath.Join(dir, name+".md"), filepath.Join(dir, name+".json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return md, js, err
	}
	if err := atomicfile.WriteFile(md, []byte(table), 0o644); err != nil {
		return md, js, err
	}
	return md, js, atomicfile.WriteJSON(js, r)
}

// ResultFile is the suite.json of a suite's --out folder, or path itself
// when it names a file.
func ResultFile(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "suite.json")
	}
	return path
}

// ReadResult reads a suite's result, from its --out folder or its
// suite.json; its errors name the file. A result that names no precision
// reads as fp32, which such results were.
func ReadResult(path string) (*Result, error) {
	file := ResultFile(path)
	var r Result
	if err := inputfile.ReadJSON(file, &r); err != nil {
		return nil, err
	}
	if r.Entries == nil {
		return nil, fmt.Errorf("%s is not a suite result (no entries)", file)
	}
	for _, c := range []*evaluate.Common{&r.Config.Finetune.Common, &r.Config.Linear.Common} {
		if c.Precision == "" {
			c.Precision = model.FP32
		}
	}
	return &r, nil
}
