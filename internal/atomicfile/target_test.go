package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Write refuses a target that is a folder or a FIFO (renaming over a device
// would replace it), and its errors name the target, never the temporary
// file; nothing is left behind.
func TestWriteTargets(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "enc.json")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, want string
	}{
		{folder, "write " + folder + ": it is a folder"},
		{fifo, "write " + fifo + ": it is not a regular file (a FIFO)"},
		{filepath.Join(dir, "missing", "f"), "write " + filepath.Join(dir, "missing", "f") + ": no such file or directory"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		tests = append(tests, struct{ path, want string }{filepath.Join(readOnly, "f"), "write " + filepath.Join(readOnly, "f") + ": permission denied"})
	}
	for _, tc := range tests {
		err := WriteFile(tc.path, []byte("x"), 0o644)
		if err == nil || err.Error() != tc.want || strings.Contains(err.Error(), ".tmp-") {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	if names := entries(t, dir); strings.Join(names, " ") != "enc.json pipe ro" {
		t.Errorf("folder holds %q", names)
	}
}

// An interruption removes the temporary file of a write under way, and the
// write then fails without putting anything in place.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "e.npy")
	err := Write(path, 0o644, func(w io.Writer) error {
		io.WriteString(w, "partial")
		names := entries(t, dir)
		if len(names) != 1 || !strings.HasPrefix(names[0], ".e.npy.tmp-") {
			t.Errorf("during the write the folder holds %q", names)
		}
		unlock := removeTemps()
		unlock()
		return nil
	})
	if err == nil || !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("write after an interruption: %v", err)
	}
	if names := entries(t, dir); len(names) != 0 {
		t.Errorf("after the interruption the folder holds %q", names)
	}
}
