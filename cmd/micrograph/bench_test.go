package main

import (
	"encoding/json"
	"math"
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
// rank 0 with 2 processes of 1 thread and the global batch. Its figures of
// time are the slowest process's (pretrain's benchTimes, TestBenchTimes),
// checked against the processes' own times it reports, not against a
// clock: s_per_step is the larger of the ranks' s_per_step, exactly;
// molecules_per_s the global batch over it; s_per_epoch it times the steps
// per epoch; data_wait_fraction rank 0's wait over it; and the ranks' parts
// of a step add up to the global batch.
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
		SPerStep  float64 `json:"s_per_step"`
		SPerEpoch float64 `json:"s_per_epoch"`
		PerEpoch  int     `json:"steps_per_epoch"`
		Wait      float64 `json:"data_wait_fraction"`
		Ranks     []struct {
			SPerStep         float64 `json:"s_per_step"`
			DataWaitSPerStep float64 `json:"data_wait_s_per_step"`
			MoleculesPerStep float64 `json:"molecules_per_step"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --nproc 2 printed %q: %v", out, err)
	}
	if res.Processes != 2 || res.Threads != 1 || res.Batch != 8 || res.Steps != 2 || !(res.Molecules > 0) || res.Memory <= 0 || res.PerEpoch != 5 {
		t.Errorf("bench --nproc 2: %+v", res)
	}
	if len(res.Ranks) != 2 {
		t.Fatalf("bench --nproc 2: %d ranks' profiles, want 2", len(res.Ranks))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }
	r0, r1 := res.Ranks[0], res.Ranks[1]
	if res.SPerStep != max(r0.SPerStep, r1.SPerStep) || !near(res.Molecules, 8/res.SPerStep) || res.SPerEpoch != res.SPerStep*5 ||
		!near(res.Wait, r0.DataWaitSPerStep/res.SPerStep) || r0.MoleculesPerStep+r1.MoleculesPerStep != 8 {
		t.Errorf("bench --nproc 2: s_per_step %v, molecules_per_s %v, s_per_epoch %v, data_wait_fraction %v from the ranks' %+v; "+
			"want the slowest rank's s_per_step, 8 molecules over it, 5 times it, rank 0's wait over it, 8 molecules per step in all",
			res.SPerStep, res.Molecules, res.SPerEpoch, res.Wait, res.Ranks)
	}
}
