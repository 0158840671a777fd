package pretrain_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

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
