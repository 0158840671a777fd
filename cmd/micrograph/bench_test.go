package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data"
)

// bench reports the libtorch operators of a step. On the CPU, putting the
// batch on the device is one allocation per tensor of the device graph (12),
// the loader's collation runs none, and the step's count follows the code,
// not the molecules: batches drawn with another seed give the same count.
func TestBenchCountsOperators(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := data.WriteSynthetic(synth, data.SynthOptions{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, seed := range []string{"1", "2"} {
		code, out, errs := runCLI(t, "bench", "--data", synth, "--device", "cpu", "--hidden", "8", "--layers", "2",
			"--motifs", "4", "--batch-size", "8", "--steps", "1", "--warmup", "0", "--seed", seed)
		if code != 0 {
			t.Fatalf("bench --seed %s: status %d: %s", seed, code, errs)
		}
		var res struct {
			Step    int64 `json:"ops_per_step"`
			Upload  int64 `json:"ops_upload"`
			Collate int64 `json:"ops_collate"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("bench --seed %s printed %q: %v", seed, out, err)
		}
		if res.Upload != 12 || res.Collate != 0 || res.Step <= res.Upload {
			t.Errorf("bench --seed %s: %d operators per step, %d to upload, %d to collate; want 12 to upload, 0 to collate and more per step",
				seed, res.Step, res.Upload, res.Collate)
		}
		steps = append(steps, res.Step)
	}
	if steps[0] != steps[1] {
		t.Errorf("operators per step %d with seed 1, %d with seed 2", steps[0], steps[1])
	}
}
