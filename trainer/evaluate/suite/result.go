package suite

import (
	"fmt"
	"os"
	"path/filepath"

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
