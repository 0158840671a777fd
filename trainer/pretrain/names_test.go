package pretrain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// checkpointNames lists the files of a run's checkpoint folder by name,
// sorted, temporary files included.
func checkpointNames(t *testing.T, run string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(run, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// markLog sets the loss of the log records of the given steps to a value no
// step computes, so that a resumed run shows whether it recomputed them.
func markLog(t *testing.T, run string, steps ...int64) {
	t.Helper()
	records, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, r := range records {
		if slices.Contains(steps, r.Step) {
			r.Loss = 12345
		}
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(line, '\n'))
	}
	if err := os.WriteFile(runfolder.LogPath(run), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// marked lists the steps whose logged loss markLog set.
func marked(t *testing.T, run string) (steps []int64, records int) {
	t.Helper()
	log, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range log {
		if r.Step != int64(i+1) {
			t.Fatalf("log record %d is step %d", i, r.Step)
		}
		if r.Loss == 12345 {
			steps = append(steps, r.Step)
		}
	}
	return steps, len(log)
}

// Pruning keeps the newest Keep checkpoints by name (step 16 and the final
// step 18 of 18, every 4, keep 2), the run reports the newest, and
// LatestCheckpoint — what resume loads — names the newest; resuming
// continues from it (the steps logged after an older one are not
// recomputed), and from the next older one when the newest is unreadable.
func TestCheckpointNamesAndTheOneResumeLoads(t *testing.T) {
	cfg := smallConfig(t)
	dir := t.TempDir()

	full := filepath.Join(dir, "full")
	res, err := pretrain.Run(full, cfg, testEnv(t), pretrain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointNames(t, full), []string{"step-000000016.pt", "step-000000018.pt"}; !slices.Equal(got, want) {
		t.Errorf("after 18 steps, checkpoint every 4, keep 2: %v, want %v", got, want)
	}
	if filepath.Base(res.Checkpoint) != "step-000000018.pt" || res.Steps != 18 {
		t.Errorf("result: %d steps, checkpoint %s", res.Steps, res.Checkpoint)
	}
	ck, skipped, err := runfolder.LatestCheckpoint(full)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(ck.Path) != "step-000000018.pt" || ck.Step != 18 || len(skipped) != 0 {
		t.Errorf("latest checkpoint %s (step %d), skipped %v; want step-000000018.pt", ck.Path, ck.Step, skipped)
	}
	ck.Free()

	for _, tc := range []struct {
		name    string
		corrupt bool  // truncate the newest checkpoint before resuming
		from    int64 // the step resume must continue from
	}{{"newest readable", false, 10}, {"newest unreadable", true, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			c := cfg
			c.MaxSteps = 10
			if _, err := pretrain.Run(run, c, testEnv(t), pretrain.Options{}); err != nil {
				t.Fatal(err)
			}
			if got, want := checkpointNames(t, run), []string{"step-000000008.pt", "step-000000010.pt"}; !slices.Equal(got, want) {
				t.Fatalf("after 10 steps: %v, want %v", got, want)
			}
			newest := filepath.Join(run, "checkpoints", "step-000000010.pt")
			if tc.corrupt {
				if err := os.Truncate(newest, 100); err != nil {
					t.Fatal(err)
				}
			}
			ck, skipped, err := runfolder.LatestCheckpoint(run)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Step != tc.from || filepath.Base(ck.Path) != fmt.Sprintf("step-%09d.pt", tc.from) ||
				len(skipped) != map[bool]int{false: 0, true: 1}[tc.corrupt] {
				t.Errorf("latest checkpoint %s (step %d), skipped %v; want step %d", ck.Path, ck.Step, skipped, tc.from)
			}
			ck.Free()
			markLog(t, run, 9, 10)
			if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: true}); err != nil {
				t.Fatal(err)
			}
			steps, records := marked(t, run)
			want := []int64{9, 10}[:tc.from-8]
			if records != 18 || !slices.Equal(steps, want) {
				t.Errorf("resumed log: %d records, steps %v kept from before the resume; want 18 and %v (resumed from step %d)", records, steps, want, tc.from)
			}
			// An unreadable checkpoint is never deleted (it counts for
			// neither --keep nor resume, and is said on stderr).
			kept := []string{"step-000000016.pt", "step-000000018.pt"}
			if tc.corrupt {
				kept = []string{"step-000000010.pt", "step-000000016.pt", "step-000000018.pt"}
			}
			if got := checkpointNames(t, run); !slices.Equal(got, kept) {
				t.Errorf("after resuming to 18 steps: %v, want %v", got, kept)
			}
		})
	}
}
