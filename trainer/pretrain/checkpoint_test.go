package pretrain_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// An unreadable checkpoint named after every good one (step-000000099.pt)
// is left alone and counted nowhere: resuming with --keep 1 keeps the new
// checkpoint, where pruning by name used to keep the unreadable file and
// delete every good one, the new one included.
func TestUnreadableCheckpointIsNotCounted(t *testing.T) {
	cfg := smallConfig(t)
	cfg.MaxSteps, cfg.Keep = 8, 1
	run := filepath.Join(t.TempDir(), "run")
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(run, "checkpoints", "step-000000099.pt")
	if err := os.WriteFile(junk, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.MaxSteps = 12
	res, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 12 {
		t.Errorf("resumed run ended at step %d, want 12", res.Steps)
	}
	names, _ := filepath.Glob(filepath.Join(run, "checkpoints", "*"))
	want := []string{filepath.Join(run, "checkpoints", "step-000000012.pt"), junk}
	if !slices.Equal(names, want) {
		t.Fatalf("checkpoints %q, want %q", names, want)
	}
	if b, err := os.ReadFile(junk); err != nil || string(b) != "not a checkpoint" {
		t.Errorf("the unreadable file was changed: %q, %v", b, err)
	}
	ck, skipped, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	if ck.Step != 12 || len(skipped) != 1 {
		t.Errorf("latest checkpoint: step %d, skipped %q; want step 12 and the unreadable file skipped", ck.Step, skipped)
	}
}

// A checkpoint records the threads of the process that wrote it; resuming
// with another count says, in one line, that the run will follow an
// uninterrupted one only to the last bits (it is bit-identical with the
// same count), and with the same count says nothing.
func TestResumeSaysWhenTheThreadCountDiffers(t *testing.T) {
	cfg := smallConfig(t)
	cfg.MaxSteps = 4
	run := filepath.Join(t.TempDir(), "run")
	if _, err := pretrain.Run(run, cfg, runEnv(torch.CPU), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	ck.Free()
	if ck.Threads != 1 {
		t.Fatalf("%s records %d threads, want 1", ck.Path, ck.Threads)
	}
	for _, tc := range []struct {
		threads  int
		maxSteps int
		says     bool
	}{{1, 5, false}, {2, 6, true}} {
		progress, err := os.Create(filepath.Join(t.TempDir(), "progress"))
		if err != nil {
			t.Fatal(err)
		}
		env := runEnv(torch.CPU)
		env.Threads, env.Progress = tc.threads, progress
		cfg.MaxSteps = tc.maxSteps
		if _, err := pretrain.Run(run, cfg, env, pretrain.Options{Resume: true}); err != nil {
			t.Fatal(err)
		}
		progress.Close()
		b, _ := os.ReadFile(progress.Name())
		said := strings.Count(string(b), "thread(s), this run has")
		resumed := filepath.Join(run, "checkpoints", fmt.Sprintf("step-%09d.pt", tc.maxSteps-1))
		want := resumed + " was written with 1 thread(s), this run has 2: its losses and weights will follow an uninterrupted run's only to the last bits (with 1 thread(s) it resumes bit-identically; docs/run-folder.md)"
		if tc.says && (said != 1 || !strings.Contains(string(b), want)) || !tc.says && said != 0 {
			t.Errorf("resumed with %d threads: the progress says\n%s\nwant the line %v: %q", tc.threads, b, tc.says, want)
		}
	}
}
