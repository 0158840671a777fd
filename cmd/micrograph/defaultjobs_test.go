package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// finetune without --jobs or --threads makes its runs one per core, each
// on one libtorch thread, as many at a time as there are cores (and runs,
// and memory for them): the line it says, from a run end to end.
func TestDefaultJobsAreOnePerCore(t *testing.T) {
	cores := cpuCores()
	if cores < 2 {
		t.Skip("one core: the runs are made one after another, in one process")
	}
	runs := cores + 1
	if free := runenv.AvailableMemory(); free > 0 && int64(cores) > 1+free/(1<<30) {
		t.Skipf("%d GiB available: too little memory for a process per core", free>>30)
	}
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 60, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	c, out := micrograph("finetune", "--data", synth, "--out", filepath.Join(dir, "r.json"), "--seeds", fmt.Sprint(runs), "--epochs", "1",
		"--hidden", "16", "--layers", "2", "--device", "cpu", "--cache", filepath.Join(dir, "cache"))
	if err := c.Run(); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := fmt.Sprintf("micrograph: %d of the %d runs at a time, each in a process of 1 libtorch thread(s), on a CPU of %d cores", cores, runs, cores)
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
