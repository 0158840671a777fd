package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// Result is every evaluation of a suite, and the gains of pre-training.
type Result struct {
	Config  Config  `json:"config"`
	Entries []Entry `json:"entries"` // dataset, evaluation, protocol, replicate; pre-trained first
	Gains   []Gain  `json:"gains"`   // per benchmark, evaluation and protocol
	Average []Gain  `json:"average"` // per evaluation and protocol, over the benchmarks (Benchmark "average")
	Seconds float64 `json:"seconds"`
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
// suite.json; its errors, "cannot be read: …" or "is not a suite result",
// are for the caller to put after the path. A result that names no
// precision reads as fp32, which such results were.
func ReadResult(path string) (*Result, error) {
	file := ResultFile(path)
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil || r.Entries == nil {
		return nil, errors.New("is not a suite result")
	}
	for _, c := range []*evaluate.Common{&r.Config.Finetune.Common, &r.Config.Linear.Common} {
		if c.Precision == "" {
			c.Precision = model.FP32
		}
	}
	return &r, nil
}
