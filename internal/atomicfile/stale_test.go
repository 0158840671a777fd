package atomicfile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deadPID is the process id of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A process killed while writing (SIGKILL, which no handler sees) leaves
// its temporary file or folder beside the target; the next write of that
// target removes the temporaries of writers that are gone, and only those:
// a live process's, another target's and a temporary without a process id
// (made before the id was in the name) stay. They used to stay forever.
func TestWriteRemovesTemporariesOfDeadWriters(t *testing.T) {
	dir := t.TempDir()
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	dead := deadPID(t)
	mk := func(name string, folder bool) string {
		p := filepath.Join(dir, name)
		var err error
		if folder {
			err = os.MkdirAll(filepath.Join(p, "inside"), 0o755)
		} else {
			err = os.WriteFile(p, []byte("partial"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	staleFile := mk(fmt.Sprintf(".out.npy.tmp-%d-123456", dead), false)
	staleDir := mk(fmt.Sprintf(".model.tmp-%d-99", dead), true)
	kept := []string{
		mk(fmt.Sprintf(".out.npy.tmp-%d-654321", live.Process.Pid), false), // a write under way
		mk(fmt.Sprintf(".other.npy.tmp-%d-1", dead), false),                // another target's
		mk(".out.npy.tmp-2837465", false),                                  // no process id
		mk(fmt.Sprintf(".out.npy.tmp-%d", dead), false),                    // not this package's name
	}
	if err := WriteFile(filepath.Join(dir, "out.npy"), []byte("whole"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(filepath.Join(dir, "model"), func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "model.pt"), []byte("w"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	names := entries(t, dir)
	want := append(slices.Clone(kept), "model", "out.npy")
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("the folder holds %q, want %q (%s and %s removed)", names, want, staleFile, staleDir)
	}
	for _, n := range names {
		if strings.Contains(n, fmt.Sprintf(".tmp-%d-", os.Getpid())) {
			t.Errorf("this process's temporary %s was left", n)
		}
	}
}
