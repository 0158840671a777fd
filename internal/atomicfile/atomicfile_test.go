package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// entries lists dir's names, temporary ones included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	errFill := errors.New("fill failed")
	steps := []struct {
		name    string
		fill    func(w io.Writer) error
		perm    os.FileMode
		wantErr error
		want    string // content of path afterwards ("" means absent)
	}{
		{"create", func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }, 0o600, nil, "one"},
		{"failure keeps the old content", func(w io.Writer) error {
			io.WriteString(w, "partial")
			return errFill
		}, 0o644, errFill, "one"},
		{"replace", func(w io.Writer) error { _, err := io.WriteString(w, "two, longer"); return err }, 0o640, nil, "two, longer"},
	}
	wantPerm := os.FileMode(0o600)
	for _, s := range steps {
		err := Write(path, s.perm, s.fill)
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
		}
		if err == nil {
			wantPerm = s.perm
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if string(b) != s.want {
			t.Errorf("%s: content %q, want %q", s.name, b, s.want)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != wantPerm {
			t.Errorf("%s: mode %v, want %v", s.name, fi.Mode().Perm(), wantPerm)
		}
		if names := entries(t, dir); len(names) != 1 || names[0] != "f.json" {
			t.Errorf("%s: folder holds %q, want only f.json (no temporary files)", s.name, names)
		}
	}
}

func TestWriteMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "f")
	if err := WriteFile(path, []byte("x"), 0o644); err == nil {
		t.Fatal("WriteFile into a missing folder succeeded")
	}
}

func TestWriteDir(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "sub", "ds")
	errFill := errors.New("fill failed")

	// A failed fill leaves neither the folder nor its temporary.
	err := WriteDir(path, func(tmp string) error {
		os.WriteFile(filepath.Join(tmp, "a"), []byte("a"), 0o644)
		return errFill
	})
	if !errors.Is(err, errFill) {
		t.Fatalf("err %v, want %v", err, errFill)
	}
	if names := entries(t, filepath.Join(parent, "sub")); len(names) != 0 {
		t.Fatalf("after a failed fill the parent holds %q", names)
	}

	// A successful fill appears whole, nested files included.
	err = WriteDir(path, func(tmp string) error {
		if err := os.MkdirAll(filepath.Join(tmp, "raw"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, "raw", "b.csv"), []byte("1,2\n"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(path, "raw", "b.csv"))
	if err != nil || string(b) != "1,2\n" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if names := entries(t, filepath.Join(parent, "sub")); len(names) != 1 || names[0] != "ds" {
		t.Fatalf("parent holds %q, want only ds", names)
	}

	// An existing folder is never replaced.
	err = WriteDir(path, func(string) error { t.Fatal("fill called for an existing folder"); return nil })
	if err == nil {
		t.Fatal("WriteDir over an existing folder succeeded")
	}
	if _, err := os.Stat(filepath.Join(path, "raw", "b.csv")); err != nil {
		t.Fatalf("existing folder damaged: %v", err)
	}
}
