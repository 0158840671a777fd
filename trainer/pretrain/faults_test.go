package pretrain_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// Every setting that cannot work is refused by Validate with the field's
// JSON name, NaN and infinities included (they used to pass the range
// checks and fail later, writing "json: unsupported value: NaN").
func TestPretrainConfigValidateNamesTheField(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		edit  func(c *runfolder.Config)
		field string
	}{
		{"alpha NaN", func(c *runfolder.Config) { c.Model.Alpha = nan }, "model.alpha"},
		{"tau Inf", func(c *runfolder.Config) { c.Model.Tau = inf }, "model.tau"},
		{"lr NaN", func(c *runfolder.Config) { c.LR = nan }, "lr"},
		{"dropout 2", func(c *runfolder.Config) { c.Model.Encoder.Dropout = 2 }, "model.encoder.dropout"},
		{"hidden 0", func(c *runfolder.Config) { c.Model.Encoder.Hidden = 0 }, "model.encoder.hidden"},
		{"p_drop 1.5", func(c *runfolder.Config) { c.Model.PDrop = 1.5 }, "model.p_drop"},
		{"lambda_sub -1", func(c *runfolder.Config) { c.Model.LambdaSub = -1 }, "model.lambda_sub"},
		{"sinkhorn_lambda Inf", func(c *runfolder.Config) { c.Model.SinkhornLambda = inf }, "model.sinkhorn_lambda"},
		{"clip NaN", func(c *runfolder.Config) { c.ClipGradNorm = nan }, "clip_grad_norm"},
	}
	for _, tc := range tests {
		c := runfolder.DefaultConfig()
		c.Data = "x"
		tc.edit(&c)
		var fe *field.Error
		if err := c.Validate(); !errors.As(err, &fe) || fe.Name != tc.field {
			t.Errorf("%s: %v, want an error about field %s", tc.name, err, tc.field)
		}
	}
	ok := runfolder.DefaultConfig()
	ok.Data = "x"
	if err := ok.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// A new run that fails before its first checkpoint leaves nothing behind,
// so that the corrected command can start it in the same folder (it used to
// leave config.json and refuse the rerun: "already holds a run"); a folder
// the user made stays, empty.
func TestFailedNewRunLeavesNothing(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Epochs = 1
	dir := t.TempDir()
	given := filepath.Join(dir, "given")
	if err := os.Mkdir(given, 0o755); err != nil {
		t.Fatal(err)
	}
	noBatch := cfg
	noBatch.Model.Eta = 1000
	tooBig := cfg
	tooBig.BatchSize = 301
	diverging := cfg
	diverging.LR, diverging.CheckpointEvery = 1e30, 100 // NaN at step 2, before any checkpoint
	tests := []struct {
		name string
		cfg  runfolder.Config
		want string
	}{
		{"eta 1000", noBatch, "model.eta 1000 leaves none of the 300 molecules"},
		{"batch 301", tooBig, "batch_size 301 is more than the"},
		{"diverging", diverging, "the loss is NaN"},
	}
	for _, tc := range tests {
		for _, run := range []string{filepath.Join(dir, "new"), given} {
			_, err := pretrain.Run(run, tc.cfg, testEnv(t), pretrain.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s in %s: error %v, want %q", tc.name, run, err, tc.want)
			}
			left, statErr := os.ReadDir(run)
			switch {
			case run == given && (statErr != nil || len(left) > 0):
				t.Errorf("%s: the given folder holds %v (%v) afterwards", tc.name, left, statErr)
			case run != given && statErr == nil:
				t.Errorf("%s: %s was left behind", tc.name, run)
			}
		}
	}
	if _, err := pretrain.Run(given, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Errorf("the corrected run: %v", err)
	}
}

// A run folder is locked while a process works on it: a second process,
// resuming or starting anew, fails naming the holder's pid, and once the
// holder is killed (SIGKILL: no cleanup) the run resumes.
func TestRunLock(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Epochs = 1000 // runs until killed
	run := filepath.Join(t.TempDir(), "run")
	holder := child(t, run, cfg, false)
	waitForSteps(t, run, 2, holder)
	want := fmt.Sprintf("run folder %s is in use by process %d", run, holder.Process.Pid)
	for _, resume := range []bool{true, false} {
		if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: resume}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("resume %v while another process runs: %v, want %q", resume, err, want)
		}
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	if _, err := os.Stat(run); err != nil {
		t.Fatalf("the refused runs removed the holder's folder: %v", err)
	}
	cfg.MaxSteps = 12
	if res, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: true}); err != nil || res.Steps != 12 {
		t.Fatalf("resume after the holder was killed: %v, %+v", err, res)
	}
}

// The loss curves of a diverged run, huge values a few ulps apart, are drawn
// (the tick loop used to spin forever: beyond 2⁵³ a float counter stops).
func TestWriteLossPlotHugeValues(t *testing.T) {
	records := []runfolder.LogRecord{
		{Step: 1, Epoch: 1, Loss: 1e20, Parts: paperParts(1, 1, 1, 1e20)},
		{Step: 2, Epoch: 1, Loss: 1e20 + 32768, Parts: paperParts(2, 1, 1, 1e20+16384)},
	}
	var buf bytes.Buffer
	if err := report.WriteLossPlot(&buf, records, "diverged"); err != nil || !strings.Contains(buf.String(), "</svg>") {
		t.Errorf("error %v, %d bytes", err, buf.Len())
	}
}

// paperParts are a log record's parts under the paper objective.
func paperParts(nodeMot, motSub, reg, contra float64) []runfolder.LossPart {
	return []runfolder.LossPart{{Name: "node_mot", Value: metrics.Value(nodeMot)}, {Name: "mot_sub", Value: metrics.Value(motSub)},
		{Name: "reg", Value: metrics.Value(reg)}, {Name: "contra", Value: metrics.Value(contra)}}
}

// A run folder that cannot be one is refused before anything is written:
// a file, a symbolic link to nothing, or, for a new run, a folder holding
// other things and no run (the dataset folder given by mistake). An empty
// or missing folder, and a run's own folder on resume, are fine.
func TestCheckRunFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	full := filepath.Join(dir, "full")
	empty := filepath.Join(dir, "empty")
	run := filepath.Join(dir, "run")
	dangling := filepath.Join(dir, "dangling")
	for _, d := range []string{full, empty, run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{file, filepath.Join(full, "data.csv"), filepath.Join(run, "config.json")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path   string
		resume bool
		want   string // "" for no error
	}{
		{file, false, "is a file, not a folder"},
		{dangling, false, "is a symbolic link to " + filepath.Join(dir, "nowhere") + ", which does not exist"},
		{full, false, "is not empty (1 entries) and holds no run"},
		{empty, false, ""},
		{filepath.Join(dir, "new"), false, ""},
		{run, false, ""}, // the run itself refuses to start again ("already holds a run")
		{run, true, ""},
	}
	for _, c := range cases {
		err := runfolder.CheckRunFolder(c.path, c.resume)
		var fe *field.Error
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (resume %v): %v", c.path, c.resume, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &fe) || fe.Name != "run"):
			t.Errorf("%s (resume %v): %v, want a run field error with %q", c.path, c.resume, err, c.want)
		}
	}
	// Run refuses the full folder and writes nothing into it.
	cfg := smallConfig(t)
	if _, err := pretrain.Run(full, cfg, testEnv(t), pretrain.Options{}); err == nil || !strings.Contains(err.Error(), "holds no run") {
		t.Errorf("Run in a full folder: %v", err)
	}
	if left, _ := os.ReadDir(full); len(left) != 1 {
		t.Errorf("the full folder holds %v afterwards", left)
	}
}

// A checkpoint of another run's shape, copied in as the newest, is named on
// resume with both shapes and what to do, and nothing of the run changes.
func TestResumeNamesAForeignCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig(t)
	cfg.MaxSteps = 4
	run, other := filepath.Join(dir, "run"), filepath.Join(dir, "other")
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	wide := cfg
	wide.Model.Encoder.Hidden, wide.MaxSteps = 64, 6
	if _, err := pretrain.Run(other, wide, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(run, "checkpoints", "step-000000006.pt")
	b, err := os.ReadFile(filepath.Join(other, "checkpoints", "step-000000006.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(runfolder.LogPath(run))
	cfg.MaxSteps = 8
	_, err = pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: true})
	want := []string{foreign, "model.encoder.hidden 64 there, 32 in " + runfolder.ConfigPath(run), "the checkpoint is not this run's"}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("resume over a foreign checkpoint: %v; want it to say %q", err, w)
		}
	}
	if after, _ := os.ReadFile(runfolder.LogPath(run)); !bytes.Equal(before, after) {
		t.Error("the log changed")
	}
}
