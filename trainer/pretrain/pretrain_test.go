package pretrain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// childEnv makes the test binary a pre-training process (see TestMain), so
// that tests can kill real runs.
const childEnv = "MICROGRAPH_TEST_PRETRAIN"

type childJob struct {
	Run    string           `json:"run"`
	Config runfolder.Config `json:"config"`
	Resume bool             `json:"resume"`
	Job    *distributed.Env `json:"job,omitempty"` // one rank of a data-parallel run
}

func TestMain(m *testing.M) {
	if job := os.Getenv(childEnv); job != "" {
		os.Exit(runChild(job))
	}
	os.Exit(testenv.RunWithPrivateUserCache(m))
}

// runChild pre-trains as `micrograph pretrain` does: SIGTERM and SIGINT stop
// the run after a checkpoint.
func runChild(job string) int {
	var j childJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	stop := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-signals; close(stop) }()
	dev, err := testdevice.Parse()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	env := runEnv(dev)
	env.Stop = stop
	_, err = pretrain.Run(j.Run, j.Config, env, pretrain.Options{Resume: j.Resume, Job: j.Job, Timeout: rankTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

var synth struct {
	once sync.Once
	dir  string
	err  error
}

// synthData is a small synthetic dataset shared by the tests of this binary.
func synthData(t *testing.T) string {
	t.Helper()
	synth.once.Do(func() {
		dir, err := os.MkdirTemp("", "micrograph-trainer-")
		if err != nil {
			synth.err = err
			return
		}
		synth.dir = filepath.Join(dir, "synth")
		_, synth.err = synthetic.Write(synth.dir, synthetic.Options{Molecules: 300, Seed: 1})
	})
	if synth.err != nil {
		t.Fatal(synth.err)
	}
	return synth.dir
}

// smallConfig is a run of a couple of seconds: 2 epochs of 9 steps. On a
// GPU it asks for deterministic algorithms: the tests compare runs bit for
// bit, and scatter-adds there otherwise sum in a varying order.
func smallConfig(t *testing.T) runfolder.Config {
	c := runfolder.DefaultConfig()
	c.Deterministic = testdevice.Get(t).IsCUDA()
	c.Data = synthData(t)
	c.Model.Encoder.Hidden, c.Model.Encoder.Layers, c.Model.Motifs = 32, 2, 8
	c.BatchSize, c.Epochs, c.CheckpointEvery, c.Keep = 32, 2, 4, 2
	c.Seed = 7
	return c
}

// child starts a pre-training process; env adds variables.
func child(t *testing.T, run string, cfg runfolder.Config, resume bool, env ...string) *exec.Cmd {
	t.Helper()
	return startChild(t, childJob{Run: run, Config: cfg, Resume: resume}, env...)
}

// startChild starts a pre-training process for j; env adds variables.
func startChild(t *testing.T, j childJob, env ...string) *exec.Cmd {
	t.Helper()
	job, _ := json.Marshal(j)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+string(job)), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func finish(t *testing.T, run string, cfg runfolder.Config, resume bool) {
	t.Helper()
	if err := child(t, run, cfg, resume).Wait(); err != nil {
		t.Fatalf("pre-training %s: %v", run, err)
	}
}

// waitForSteps polls the run's log until it holds n records, however long
// that takes on a busy machine; a process that exits first, or goes on
// without logging them until the test's deadline nears, fails the test.
func waitForSteps(t *testing.T, run string, n int, cmd *exec.Cmd) {
	t.Helper()
	hang := testenv.HangReport(t)
	for ; ; time.Sleep(5 * time.Millisecond) {
		if records, err := runfolder.ReadLog(run); err == nil && len(records) >= n {
			return
		}
		select {
		case <-hang:
			cmd.Process.Kill()
			t.Fatalf("%s never logged %d steps", run, n)
		default:
		}
		if exited(cmd.Process.Pid) {
			t.Fatalf("%s: the process exited before logging %d steps", run, n)
		}
	}
}

// exited says whether the child pid has ended (a zombie not yet waited for).
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command's name, which is in parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// sameLosses compares logs field by field, except throughput.
func sameLosses(t *testing.T, name string, got, want []runfolder.LogRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d log records, want %d", name, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		g.MoleculesPerS, w.MoleculesPerS = 0, 0
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: record %d (loss off by %.3g relative)\n got %+v\nwant %+v", name, i,
				math.Abs(float64(g.Loss)-float64(w.Loss))/math.Abs(float64(w.Loss)), g, w)
		}
	}
}

// everyCheckpointReads loads every checkpoint file of a run.
func everyCheckpointReads(t *testing.T, run string) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(run, "checkpoints", "step-*.pt"))
	for _, p := range paths {
		ck, err := runfolder.LoadCheckpoint(p)
		if err != nil {
			t.Fatalf("unreadable checkpoint: %v", err)
		}
		ck.Free()
	}
	return paths
}

func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// A run killed mid-epoch, and another killed while writing a checkpoint,
// resume to log exactly the losses of an uninterrupted run; no checkpoint is
// ever unreadable.
func TestResumeAfterCrashesMatchesUninterruptedRun(t *testing.T) {
	cfg := smallConfig(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "uninterrupted")
	finish(t, ref, cfg, false)
	want, err := runfolder.ReadLog(ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 18 {
		t.Fatalf("the uninterrupted run logged %d steps, want 18", len(want))
	}

	// SIGKILL in the middle of the first epoch.
	killed := filepath.Join(dir, "killed")
	cmd := child(t, killed, cfg, false)
	waitForSteps(t, killed, 6, cmd)
	cmd.Process.Kill()
	cmd.Wait()
	if n := len(everyCheckpointReads(t, killed)); n == 0 {
		t.Fatal("no checkpoint before the kill")
	}
	finish(t, killed, cfg, true)
	got, _ := runfolder.ReadLog(killed)
	sameLosses(t, "killed mid-epoch", got, want)

	// SIGKILL after the step-8 checkpoint is written but before it is renamed
	// into place.
	torn := filepath.Join(dir, "torn")
	err = child(t, torn, cfg, false, failpoint.Env+"=before rename step-000000008.pt").Wait()
	if !killedBySIGKILL(err) {
		t.Fatalf("the failpoint did not kill the run: %v", err)
	}
	paths := everyCheckpointReads(t, torn)
	if len(paths) != 1 || !strings.HasSuffix(paths[0], "step-000000004.pt") {
		t.Fatalf("after the torn write the checkpoints are %v, want step 4 only", paths)
	}
	if tmp, _ := filepath.Glob(filepath.Join(torn, "checkpoints", ".step-000000008.pt.tmp-*")); len(tmp) != 1 {
		t.Fatalf("the interrupted write left %v", tmp)
	}
	finish(t, torn, cfg, true)
	got, _ = runfolder.ReadLog(torn)
	sameLosses(t, "killed while checkpointing", got, want)
	if tmp, _ := filepath.Glob(filepath.Join(torn, "checkpoints", ".step-*")); len(tmp) != 0 {
		t.Errorf("stale temporary files remain: %v", tmp)
	}
	if paths := everyCheckpointReads(t, torn); len(paths) != cfg.Keep {
		t.Errorf("%d checkpoints kept, want %d", len(paths), cfg.Keep)
	}
}

// SIGTERM finishes the step, checkpoints and exits 0; resuming completes the
// run with the uninterrupted losses.
func TestSignalStopsWithCheckpoint(t *testing.T) {
	cfg := smallConfig(t)
	cfg.CheckpointEvery = 100 // only the stop writes one
	dir := t.TempDir()
	ref := filepath.Join(dir, "uninterrupted")
	finish(t, ref, cfg, false)
	want, _ := runfolder.ReadLog(ref)

	run := filepath.Join(dir, "stopped")
	cmd := child(t, run, cfg, false)
	waitForSteps(t, run, 3, cmd)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("a stopped run exited with %v", err)
	}
	records, _ := runfolder.ReadLog(run)
	paths := everyCheckpointReads(t, run)
	last := fmt.Sprintf("step-%09d.pt", records[len(records)-1].Step)
	if len(paths) != 1 || !strings.HasSuffix(paths[0], last) || len(records) == len(want) {
		t.Fatalf("stopped after %d steps with checkpoints %v", len(records), paths)
	}
	finish(t, run, cfg, true)
	got, _ := runfolder.ReadLog(run)
	sameLosses(t, "stopped and resumed", got, want)
}

// A non-finite loss stops the run with a message naming the last good
// checkpoint, which stays readable; SkipNonFinite skips such batches.
func TestNonFiniteLoss(t *testing.T) {
	cfg := smallConfig(t)
	cfg.LR, cfg.CheckpointEvery, cfg.Epochs = 1e30, 1, 1 // the weights explode at step 2
	run := filepath.Join(t.TempDir(), "exploding")
	_, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{})
	if err == nil || !strings.Contains(err.Error(), "the loss is NaN") || !strings.Contains(err.Error(), "step-000000001.pt") {
		t.Fatalf("error %v does not report the NaN and the last good checkpoint", err)
	}
	if paths := everyCheckpointReads(t, run); len(paths) != 1 {
		t.Errorf("checkpoints after the stop: %v", paths)
	}
	cfg.SkipNonFinite = true
	res, err := pretrain.Run(filepath.Join(t.TempDir(), "skipping"), cfg, testEnv(t), pretrain.Options{})
	if err != nil || res.Steps != 9 {
		t.Fatalf("with skipping: %v after %v steps", err, res)
	}
}

func TestRunFolderChecks(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Epochs = 1
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	run := filepath.Join(dir, "run")
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	bigger := cfg
	bigger.Model.Encoder.Hidden = 64
	otherLR := cfg
	otherLR.LR = 0.01
	longer := cfg
	longer.Epochs = 2
	tests := []struct {
		name   string
		run    string
		cfg    runfolder.Config
		resume bool
		want   string // part of the error; "" for success
	}{
		{"a file", file, cfg, false, "is a file"},
		{"an existing run", run, cfg, false, "already holds a run"},
		{"resume of nothing", filepath.Join(dir, "absent"), cfg, true, "holds no run"},
		{"another shape", run, bigger, true, "shape differs"},
		{"another learning rate", run, otherLR, true, "lr is 0.001 in the run but 0.01 was asked"},
		{"more epochs", run, longer, true, ""},
	}
	for _, tc := range tests {
		_, err := pretrain.Run(tc.run, tc.cfg, testEnv(t), pretrain.Options{Resume: tc.resume})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if records, _ := runfolder.ReadLog(run); len(records) != 18 {
		t.Errorf("the lengthened run logged %d steps, want 18", len(records))
	}
}

// The released objective resumes exactly too: its host-side draws (walks,
// balls, k-means starts) are seeded from libtorch's CPU generator, which
// the checkpoint restores, and its motif table is initialised only when a
// run starts. Killed mid-epoch and resumed, a run logs what an
// uninterrupted one does, for the spectral sampler (the extra encoder pass
// draws its own dropout masks) and the k-hop sampler.
func TestReleasedResumeAfterKillMatchesUninterruptedRun(t *testing.T) {
	for _, sampler := range []string{model.SamplerSpectral, model.SamplerKHop} {
		t.Run(sampler, func(t *testing.T) {
			cfg, err := runfolder.DefaultConfigOf(model.ObjectiveReleased)
			if err != nil {
				t.Fatal(err)
			}
			small := smallConfig(t)
			cfg.Data, cfg.Seed, cfg.Deterministic = small.Data, small.Seed, small.Deterministic
			cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs, cfg.Model.Sampler = 32, 2, 8, sampler
			cfg.BatchSize, cfg.Epochs, cfg.CheckpointEvery, cfg.Keep = 32, 2, 4, 2
			dir := t.TempDir()
			ref := filepath.Join(dir, "uninterrupted")
			finish(t, ref, cfg, false)
			want, err := runfolder.ReadLog(ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 18 || want[0].Part("sampler") == 0 || len(want[0].Parts) != 3 {
				t.Fatalf("the uninterrupted run logged %d steps, first %+v", len(want), want[0])
			}
			sameLosses(t, "killed mid-epoch", killedAndResumed(t, filepath.Join(dir, "killed"), cfg), want)
		})
	}
}

// killedAndResumed starts a run of cfg in folder run, SIGKILLs it after
// its sixth logged step, resumes it to the end and returns its log.
func killedAndResumed(t *testing.T, run string, cfg runfolder.Config) []runfolder.LogRecord {
	t.Helper()
	cmd := child(t, run, cfg, false)
	waitForSteps(t, run, 6, cmd)
	cmd.Process.Kill()
	cmd.Wait()
	finish(t, run, cfg, true)
	got, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A bf16 run killed mid-epoch resumes to log exactly the uninterrupted bf16
// run's losses; those are not the float32 run's (the products really are
// bfloat16) but near them; and the precision cannot change on resume.
//
// How near: bfloat16 keeps 8 significant bits, so each operand of a product
// is rounded by up to u = 2⁻⁸ relative and, to first order, so are the
// embeddings the losses compare. Every loss part is a cross-entropy (or, for
// the cut regulariser, a function) of cosine similarities divided by τ, so
// an error of u in a cosine moves a logit by u/τ. The bound allows twice
// that, 2u/τ relative (15.6 % at the default τ = 0.05): the first-order
// error, and as much again for an assignment that Sinkhorn's argmax moves.
// (Under 1 % on the CPU here; 2 % in the GPU check on an H200, whose cuBLAS
// may also sum partial products in bfloat16.) A loss outside it is not bfloat16's rounding
// but a wrong computation.
func TestBF16ResumeAfterKillMatchesUninterruptedRun(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Precision = model.BF16
	if err := cfg.Precision.Check(testdevice.Get(t)); err != nil {
		t.Skipf("no bfloat16 products here: %v", err)
	}
	dir := t.TempDir()
	ref := filepath.Join(dir, "uninterrupted")
	finish(t, ref, cfg, false)
	want, err := runfolder.ReadLog(ref)
	if err != nil {
		t.Fatal(err)
	}
	fp32 := filepath.Join(dir, "fp32")
	cfg32 := cfg
	cfg32.Precision = model.FP32
	finish(t, fp32, cfg32, false)
	other, _ := runfolder.ReadLog(fp32)
	first, first32 := float64(want[0].Loss), float64(other[0].Loss)
	const u = 1.0 / 256
	bound := 2 * u / cfg.Model.Tau
	if diff := math.Abs(first-first32) / math.Abs(first32); first == first32 || diff > bound {
		t.Errorf("first loss in bf16 %v, in fp32 %v (%.3g relative): want different but within 2u/τ = %.3g", first, first32, diff, bound)
	}

	sameLosses(t, "bf16 killed mid-epoch", killedAndResumed(t, filepath.Join(dir, "killed"), cfg), want)

	if err := runfolder.CheckResume(cfg, cfg32); err == nil || !strings.Contains(err.Error(), "precision") {
		t.Errorf("resuming a bf16 run in fp32: %v, want a refusal naming precision", err)
	}
}

// runEnv is where the tests' runs run, and the children's: dev, one
// libtorch thread, two collating goroutines, silent.
func runEnv(dev torch.Device) runenv.Env { return runenv.Env{Device: dev, Threads: 1, Workers: 2} }

// testEnv is runEnv on the test device ($MICROGRAPH_TEST_DEVICE, else the CPU).
func testEnv(t *testing.T) runenv.Env { return runEnv(testdevice.Get(t)) }
