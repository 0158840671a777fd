package pretrain_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// rankTimeout bounds the collectives of the tests' data-parallel runs.
const rankTimeout = 20 * time.Second

// ranksOnTheCPU skips a data-parallel test where the tests run on a GPU:
// its ranks would share the one GPU, which NCCL refuses. make test runs it
// on the CPU, over Gloo.
func ranksOnTheCPU(t *testing.T) {
	if dev := testdevice.Get(t); dev.IsCUDA() {
		t.Skipf("data-parallel tests run on the CPU (%s is %s: two ranks cannot share one GPU)", testdevice.Env, dev)
	}
}

// startRanks starts world ranks of a data-parallel run over Gloo on loopback.
func startRanks(t *testing.T, run string, cfg runfolder.Config, resume bool, world int) []*exec.Cmd {
	t.Helper()
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	port := testenv.FreePort(t)
	var cmds []*exec.Cmd
	for r := range world {
		e := &distributed.Env{Rank: r, WorldSize: world, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port}
		cmds = append(cmds, startChild(t, childJob{Run: run, Config: cfg, Resume: resume, Job: e}))
	}
	return cmds
}

// finishRanks runs a data-parallel run to its end.
func finishRanks(t *testing.T, run string, cfg runfolder.Config, resume bool, world int) {
	t.Helper()
	for r, c := range startRanks(t, run, cfg, resume, world) {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d of %d: %v", r, world, err)
		}
	}
}

// equivalenceConfig is a run whose every loss is a mean over nodes,
// subgraphs or molecules of the global batch, so that 2 processes sharing
// each batch of 32 compute what 1 computes: no dropout and no subgraph
// perturbation (the ranks draw their own random numbers), and batch norm and
// L_contra's negatives over the global batch, as the default split on a CPU
// has them.
func equivalenceConfig(t *testing.T) runfolder.Config {
	cfg := smallConfig(t)
	cfg.Model.Encoder.Dropout, cfg.Model.PDrop, cfg.Model.PAdd = 0, 0, 0
	cfg.SyncBatchNorm, cfg.GlobalNegatives = true, true
	cfg.Epochs, cfg.MaxSteps, cfg.CheckpointEvery = 3, 20, 100
	return cfg
}

// relDiff is |a−b| relative to the larger magnitude (and at least 1e-3, so
// that values near 0 are compared absolutely).
func relDiff(a, b float64) float64 {
	return math.Abs(a-b) / math.Max(1e-3, math.Max(math.Abs(a), math.Abs(b)))
}

// Acceptance: 20 steps of batch 32 with world size 2 (each rank's part cut
// by atoms) give the losses and parameters of world size 1. Not bit for
// bit: every sum over the batch (Sinkhorn's, batch norm's, the losses'
// means, the gradients) is two float32 partial sums added by the
// all-reduce instead of one sum, which rounds differently (≈1e-7 relative per sum), and 20 steps of Adam compound
// it. Measured: losses within 9.2e-6 and 5.7e-6 (relative; two builds of
// the kernels) over the 20 steps, so
// lossTol = 5e-5; with per-rank batch norm instead the very first step
// already differs (its subgraphs), and a wrong split of the batch or
// per-rank Sinkhorn moves the losses by far more. Parameters: see below.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	ranksOnTheCPU(t)
	cfg := equivalenceConfig(t)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one"), filepath.Join(dir, "two")
	finish(t, one, cfg, false)
	finishRanks(t, two, cfg, false, 2)

	want, err := runfolder.ReadLog(one)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runfolder.ReadLog(two)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 20 || len(got) != 20 {
		t.Fatalf("%d and %d log records, want 20", len(want), len(got))
	}
	const lossTol, paramTol = 5e-5, 2e-4
	var worstLoss float64
	for i := range want {
		w, g := want[i], got[i]
		if g.Step != w.Step || g.Epoch != w.Epoch || g.Subgraphs != w.Subgraphs {
			t.Fatalf("record %d: step %d epoch %d with %d subgraphs, want %d %d %d", i, g.Step, g.Epoch, g.Subgraphs, w.Step, w.Epoch, w.Subgraphs)
		}
		for _, p := range [][3]any{{"loss", g.Loss, w.Loss}, {"node_mot", g.Part("node_mot"), w.Part("node_mot")}, {"mot_sub", g.Part("mot_sub"), w.Part("mot_sub")}, {"reg", g.Part("reg"), w.Part("reg")}, {"contra", g.Part("contra"), w.Part("contra")}} {
			d := relDiff(float64(p[1].(metrics.Value)), float64(p[2].(metrics.Value)))
			worstLoss = max(worstLoss, d)
			if d > lossTol {
				t.Errorf("step %d: %s %v with 2 processes, %v with 1", w.Step, p[0], p[1], p[2])
			}
		}
	}
	a, b := lastCheckpoint(t, one), lastCheckpoint(t, two)
	defer a.Free()
	defer b.Free()
	if a.Step != 20 || b.Step != 20 || len(a.Model) != len(b.Model) {
		t.Fatalf("checkpoints at steps %d and %d with %d and %d tensors", a.Step, b.Step, len(a.Model), len(b.Model))
	}
	s := torch.NewScope()
	defer s.Close()
	// Adam's first steps are ±lr whatever the gradient's size, so an entry
	// whose gradient is 0 in exact arithmetic (a bias right before batch
	// norm, which removes any shift) follows the rounding noise in steps of
	// up to lr: such entries may differ by 2·lr per step. Every other entry
	// agrees to paramTol; measured here: 141 of 11,680 entries wander (the
	// two GENConv output biases, their running means, a few embedding rows
	// that every atom shares), by at most 0.019.
	wander := 2 * cfg.LR * float64(cfg.MaxSteps)
	var entries, wandering int
	var worstParam float64
	for i, n := range a.Model {
		if n.Tensor.DType() != torch.Float32 {
			continue // num_batches_tracked
		}
		x := torch.ToSlice[float64](n.Tensor.ToDType(torch.Float64))
		y := torch.ToSlice[float64](b.Model[i].Tensor.ToDType(torch.Float64))
		for k := range x {
			entries++
			d := relDiff(x[k], y[k])
			if d <= paramTol {
				worstParam = max(worstParam, d)
				continue
			}
			wandering++
			if math.Abs(x[k]-y[k]) > wander {
				t.Errorf("%s[%d] = %v with 2 processes, %v with 1", n.Name, k, y[k], x[k])
			}
		}
	}
	if wandering > entries/30 {
		t.Errorf("%d of %d parameter entries differ by more than %g (relative): more than the biases batch norm cancels", wandering, entries, paramTol)
	}
	t.Logf("largest relative differences: losses %.2g, parameters %.2g; %d of %d entries wander (see above)", worstLoss, worstParam, wandering, entries)
}

func lastCheckpoint(t *testing.T, run string) *runfolder.Checkpoint {
	t.Helper()
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// Acceptance: kill -9 of one rank mid-run makes the other exit non-zero
// within the collective timeout with one line naming the failure; the last
// checkpoint stays readable, and the run resumes with 2 processes and then
// with 1 to its end, the data sequence continuing where it stopped.
func TestDeadRankEndsTheJobAndTheRunResumes(t *testing.T) {
	ranksOnTheCPU(t)
	cfg := smallConfig(t)
	cfg.Epochs, cfg.CheckpointEvery = 3, 3
	run := filepath.Join(t.TempDir(), "run")
	cmds := startRanks(t, run, cfg, false, 2)
	waitForSteps(t, run, 5, cmds[0])
	cmds[1].Process.Kill()
	cmds[1].Wait()
	// The survivor must end by itself: its collective timeout (rankTimeout)
	// fires, however long a busy machine takes to get there; one still
	// running near the test's deadline is reported as hung.
	died := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmds[0].Wait() }()
	var err error
	select {
	case err = <-done:
	case <-testenv.HangReport(t):
		cmds[0].Process.Kill()
		<-done
		t.Fatalf("rank 0 was still running %v after rank 1 died (its collective timeout: %v)", time.Since(died).Round(time.Second), rankTimeout)
	}
	t.Logf("rank 0 ended %v after rank 1 died (collective timeout %v)", time.Since(died).Round(time.Second), rankTimeout)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("rank 0 ended with %v, want exit status 1", err)
	}
	stderr := strings.TrimSpace(cmds[0].Stderr.(*strings.Builder).String())
	lines := strings.Split(stderr, "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "rank 0 of 2: another process of the job failed or stopped answering") {
		t.Fatalf("rank 0's last line is %q", last)
	}
	t.Logf("rank 0 said: %s", lines[len(lines)-1])
	paths := everyCheckpointReads(t, run)
	if len(paths) == 0 {
		t.Fatal("no checkpoint before the kill")
	}
	before, _ := runfolder.ReadLog(run)

	// Resume with 2 processes, stopping after 3 more steps, then with 1 to the end.
	twoMore := cfg
	twoMore.MaxSteps = int(lastStep(t, run)) + 3
	finishRanks(t, run, twoMore, true, 2)
	if got := lastStep(t, run); got != int64(twoMore.MaxSteps) {
		t.Fatalf("resumed with 2 processes to step %d, want %d", got, twoMore.MaxSteps)
	}
	finish(t, run, cfg, true)
	records, _ := runfolder.ReadLog(run)
	if len(records) != 27 {
		t.Fatalf("%d steps logged after both resumes, want 3 epochs of 9 = 27", len(records))
	}
	for i, r := range records {
		if r.Step != int64(i+1) || r.Epoch != i/9+1 || !(float64(r.Loss) > 0) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if len(before) < 5 {
		t.Fatalf("only %d steps logged before the kill", len(before))
	}
	ck := lastCheckpoint(t, run)
	defer ck.Free()
	var names []string
	for _, n := range ck.RNG {
		names = append(names, n.Name)
	}
	if ck.Step != 27 || ck.World != 1 || !slices.Contains(names, "cpu") || slices.Contains(names, "rank1/cpu") {
		t.Fatalf("final checkpoint (1 process) at step %d with generators %v", ck.Step, names)
	}
}

// lastStep is the step of a run's newest checkpoint.
func lastStep(t *testing.T, run string) int64 {
	ck := lastCheckpoint(t, run)
	defer ck.Free()
	return ck.Step
}

// A checkpoint of a data-parallel run holds every rank's generators.
func TestCheckpointHoldsEveryRanksGenerators(t *testing.T) {
	ranksOnTheCPU(t)
	cfg := smallConfig(t)
	cfg.MaxSteps, cfg.CheckpointEvery = 2, 2
	run := filepath.Join(t.TempDir(), "run")
	finishRanks(t, run, cfg, false, 2)
	ck := lastCheckpoint(t, run)
	defer ck.Free()
	states := map[string][]uint8{}
	for _, n := range ck.RNG {
		states[n.Name] = torch.ToSlice[uint8](n.Tensor)
	}
	if ck.World != 2 || len(states["cpu"]) == 0 || len(states["rank1/cpu"]) != len(states["cpu"]) {
		t.Fatalf("generator states %v", fmt.Sprint(len(states["cpu"]), len(states["rank1/cpu"])))
	}
	if slices.Equal(states["cpu"], states["rank1/cpu"]) {
		t.Fatal("both ranks' CPU generators are in the same state: they draw the same numbers")
	}
}

// Ranks started with different configurations (issue #28: another --hidden
// made rank 0 die of SIGABRT in Gloo's broadcast) each end with status 1
// and one line before anything is trained or written: the differing rank
// names each field with its value and rank 0's, rank 0 names the rank.
func TestRanksMustAgreeOnTheConfig(t *testing.T) {
	ranksOnTheCPU(t)
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	tests := []struct {
		name   string
		change func(*runfolder.Config)
		want   string
	}{
		{"hidden", func(c *runfolder.Config) { c.Model.Encoder.Hidden = 16 }, "model.encoder.hidden 16 (rank 0: 32)"},
		{"seed and lr", func(c *runfolder.Config) { c.Seed, c.LR = 8, 0.01 }, "lr 0.01 (rank 0: 0.001), seed 8 (rank 0: 7)"},
	}
	for _, tc := range tests {
		cfg := smallConfig(t)
		other := cfg
		tc.change(&other)
		run := filepath.Join(t.TempDir(), "run")
		port := testenv.FreePort(t)
		var cmds []*exec.Cmd
		for r, c := range []runfolder.Config{cfg, other} {
			e := &distributed.Env{Rank: r, WorldSize: 2, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port}
			cmds = append(cmds, startChild(t, childJob{Run: run, Config: c, Job: e}))
		}
		wants := []string{
			"rank 0 of 2: rank 1 started with another configuration than rank 0's: start every rank with the same flags",
			"rank 1 of 2: its configuration differs from rank 0's: " + tc.want + ": start every rank with the same flags",
		}
		for r, c := range cmds {
			err := c.Wait()
			var exit *exec.ExitError
			stderr := strings.TrimSpace(c.Stderr.(*strings.Builder).String())
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.HasSuffix(stderr, wants[r]) || strings.Contains(stderr, "\n") {
				t.Errorf("%s: rank %d ended with %v, stderr %q; want status 1 and the one line %q", tc.name, r, err, stderr, wants[r])
			}
		}
		if _, err := os.Stat(run); err == nil {
			t.Errorf("%s: the refused job made %s", tc.name, run)
		}
	}
}

// Acceptance: a data-parallel run stopped and resumed with as many
// processes logs exactly the losses of an uninterrupted one, dropout and
// subgraph perturbation on: every rank continues from its own generators'
// saved states (rank 1's used to restart from its seed). With the default
// split's settings, as pretrain runs by default on a CPU of two cores.
func TestDataParallelResumeIsExact(t *testing.T) {
	ranksOnTheCPU(t)
	cfg := smallConfig(t)
	cfg.SyncBatchNorm, cfg.GlobalNegatives = true, true
	cfg.MaxSteps, cfg.CheckpointEvery = 6, 3
	dir := t.TempDir()
	whole, resumed := filepath.Join(dir, "whole"), filepath.Join(dir, "resumed")
	finishRanks(t, whole, cfg, false, 2)
	first := cfg
	first.MaxSteps = 3
	finishRanks(t, resumed, first, false, 2)
	finishRanks(t, resumed, cfg, true, 2)
	want, err := runfolder.ReadLog(whole)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runfolder.ReadLog(resumed)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 6 || len(got) != 6 {
		t.Fatalf("%d and %d log records, want 6", len(want), len(got))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Step != w.Step || g.Loss != w.Loss || g.Subgraphs != w.Subgraphs || !slices.Equal(g.Parts, w.Parts) {
			t.Errorf("step %d: resumed %v (%d subgraphs), uninterrupted %v (%d)", w.Step, g.Loss, g.Subgraphs, w.Loss, w.Subgraphs)
		}
	}
}

// The two settings of a split batch act apart, each on its own part of the
// method (no test ran one without the other): in the first step of two
// processes, --sync-batch-norm alone gives the one-process run's node_mot,
// mot_sub and reg (batch norm over the global batch) but another contra
// (each rank's own negatives); --global-negatives alone gives the parts of
// a run with neither setting (batch norm per rank) but another contra.
func TestDataParallelSettingsActApart(t *testing.T) {
	ranksOnTheCPU(t)
	base := equivalenceConfig(t)
	base.Epochs, base.MaxSteps = 1, 1
	dir := t.TempDir()
	first := func(run string) runfolder.LogRecord {
		t.Helper()
		records, err := runfolder.ReadLog(run)
		if err != nil || len(records) != 1 {
			t.Fatalf("%s: %d records, %v", run, len(records), err)
		}
		return records[0]
	}
	finish(t, filepath.Join(dir, "one"), base, false)
	one := first(filepath.Join(dir, "one"))
	steps := map[string]runfolder.LogRecord{}
	for _, tc := range []struct {
		name            string
		sync, negatives bool
	}{{"neither", false, false}, {"sync", true, false}, {"negatives", false, true}} {
		cfg := base
		cfg.SyncBatchNorm, cfg.GlobalNegatives = tc.sync, tc.negatives
		run := filepath.Join(dir, tc.name)
		finishRanks(t, run, cfg, false, 2)
		steps[tc.name] = first(run)
	}
	part := func(r runfolder.LogRecord, name string) float64 { return float64(r.Part(name)) }
	for _, name := range []string{"node_mot", "mot_sub", "reg", "contra"} {
		t.Logf("%s: one process %.8g; two: neither %.8g, sync %.8g, negatives %.8g", name, part(one, name), part(steps["neither"], name), part(steps["sync"], name), part(steps["negatives"], name))
	}
	for _, name := range []string{"node_mot", "mot_sub", "reg"} {
		if d := relDiff(part(steps["sync"], name), part(one, name)); d > 5e-5 {
			t.Errorf("--sync-batch-norm alone: %s %v, one process %v: batch norm is not over the global batch", name, part(steps["sync"], name), part(one, name))
		}
		if d := relDiff(part(steps["negatives"], name), part(steps["neither"], name)); d > 1e-9 {
			t.Errorf("--global-negatives alone: %s %v, neither setting %v: it changed more than the negatives", name, part(steps["negatives"], name), part(steps["neither"], name))
		}
	}
	if relDiff(part(steps["neither"], "node_mot"), part(one, "node_mot")) < 1e-6 && relDiff(part(steps["neither"], "mot_sub"), part(one, "mot_sub")) < 1e-6 {
		t.Fatal("batch norm per rank gives the one-process losses: the test cannot tell the settings apart")
	}
	if d := relDiff(part(steps["sync"], "contra"), part(one, "contra")); d < 1e-4 {
		t.Errorf("--sync-batch-norm alone: contra %v, one process %v: its negatives are the global batch's", part(steps["sync"], "contra"), part(one, "contra"))
	}
	if d := relDiff(part(steps["negatives"], "contra"), part(steps["neither"], "contra")); d < 1e-4 {
		t.Errorf("--global-negatives alone: contra %v, neither setting %v: its negatives are its rank's", part(steps["negatives"], "contra"), part(steps["neither"], "contra"))
	}
}

// A stop asked of one rank alone (SIGTERM to rank 1, none to rank 0)
// travels with that step's losses: every rank stops after the same step,
// rank 0 writes the checkpoint of that step, both exit 0, and the run
// resumes with two processes to its end, logging the uninterrupted run's
// losses.
func TestStopOfOneRankStopsTheJob(t *testing.T) {
	ranksOnTheCPU(t)
	cfg := smallConfig(t)
	cfg.SyncBatchNorm, cfg.GlobalNegatives = true, true
	cfg.Epochs, cfg.CheckpointEvery = 40, 1000 // only the stop writes one before the end
	cfg.MaxSteps = 300
	dir := t.TempDir()
	run := filepath.Join(dir, "stopped")
	cmds := startRanks(t, run, cfg, false, 2)
	waitForSteps(t, run, 3, cmds[0])
	cmds[1].Process.Signal(syscall.SIGTERM)
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d of a stopped job: %v", r, err)
		}
	}
	records, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	last := records[len(records)-1].Step
	if step := lastStep(t, run); step != last || last >= int64(cfg.MaxSteps) {
		t.Fatalf("the job stopped at step %d of %d with its checkpoint at step %d", last, cfg.MaxSteps, step)
	}
	cfg.MaxSteps = int(last) + 3
	finishRanks(t, run, cfg, true, 2)
	whole := filepath.Join(dir, "whole")
	finishRanks(t, whole, cfg, false, 2)
	got, _ := runfolder.ReadLog(run)
	want, _ := runfolder.ReadLog(whole)
	sameLosses(t, "stopped and resumed", got, want)
}
