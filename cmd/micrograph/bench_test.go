package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/torch"
)

// bench reports the libtorch operators of a step and the threads and
// processes it ran them with. On the CPU, putting the batch on the device is
// one allocation per tensor of the device graph (12), the loader's collation
// runs none, and the step's count follows the code, not the molecules or the
// threads: batches drawn with another seed, on another number of threads,
// give the same count.
func TestBenchCountsOperators(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	defer torch.SetNumThreads(torch.NumThreads()) // bench runs in this process
	var steps []int64
	for _, tc := range []struct{ seed, threads string }{{"1", "1"}, {"2", "2"}} {
		code, out, errs := runCLI(t, "bench", "--data", synth, "--device", "cpu", "--hidden", "8", "--layers", "2",
			"--motifs", "4", "--batch-size", "8", "--steps", "1", "--warmup", "0", "--seed", tc.seed, "--threads", tc.threads)
		if code != 0 {
			t.Fatalf("bench --seed %s --threads %s: status %d: %s", tc.seed, tc.threads, code, errs)
		}
		var res struct {
			Step      int64 `json:"ops_per_step"`
			Upload    int64 `json:"ops_upload"`
			Collate   int64 `json:"ops_collate"`
			Threads   int   `json:"threads"`
			Processes int   `json:"processes"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("bench --seed %s printed %q: %v", tc.seed, out, err)
		}
		if res.Upload != 12 || res.Collate != 0 || res.Step <= res.Upload {
			t.Errorf("bench --seed %s: %d operators per step, %d to upload, %d to collate; want 12 to upload, 0 to collate and more per step",
				tc.seed, res.Step, res.Upload, res.Collate)
		}
		if want, _ := strconv.Atoi(tc.threads); res.Threads != want || res.Processes != 1 {
			t.Errorf("bench --threads %s reports %d threads and %d processes, want %d and 1", tc.threads, res.Threads, res.Processes, want)
		}
		steps = append(steps, res.Step)
	}
	if steps[0] != steps[1] {
		t.Errorf("operators per step %d with seed 1 on one thread, %d with seed 2 on two", steps[0], steps[1])
	}
}

// bench --nproc 2 times the steps of two processes, each on half of every
// batch, as pretrain --nproc 2 runs them, and says so: one JSON line from
// rank 0 with 2 processes of 1 thread and the global batch.
func TestBenchProcesses(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(asMainEnv, "1") // the ranks are this test binary acting as micrograph
	code, out, errs := runCLI(t, "bench", "--data", synth, "--device", "cpu", "--hidden", "8", "--layers", "2",
		"--motifs", "4", "--batch-size", "8", "--steps", "2", "--warmup", "1", "--nproc", "2", "--threads", "1",
		"--sync-batch-norm", "--global-negatives")
	if code != 0 {
		t.Fatalf("bench --nproc 2: status %d: %s", code, errs)
	}
	var res struct {
		Threads   int     `json:"threads"`
		Processes int     `json:"processes"`
		Batch     int     `json:"batch_size"`
		Steps     int     `json:"steps"`
		Memory    int64   `json:"peak_memory_bytes"`
		Molecules float64 `json:"molecules_per_s"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --nproc 2 printed %q: %v", out, err)
	}
	if res.Processes != 2 || res.Threads != 1 || res.Batch != 8 || res.Steps != 2 || !(res.Molecules > 0) || res.Memory <= 0 {
		t.Errorf("bench --nproc 2: %+v", res)
	}
}
