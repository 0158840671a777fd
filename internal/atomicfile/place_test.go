package atomicfile_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/atomicfile"
)

// entriesBut lists dir's entries other than those named in old.
func entriesBut(t *testing.T, dir string, old ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
next:
	for _, e := range entries {
		for _, o := range old {
			if e.Name() == o {
				continue next
			}
		}
		out = append(out, e.Name())
	}
	return out
}

// While Write fills it, the temporary file lies beside the target (the
// rename into place is then atomic, on one file system), hidden and named
// after it: ".<name>.tmp-*"; the target still holds its old content.
// Afterwards only the target remains.
func TestWriteMakesTheTemporaryFileBesideTheTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.Write(path, 0o600, func(w io.Writer) error {
		tmp := entriesBut(t, dir, "state.json")
		if len(tmp) != 1 || !strings.HasPrefix(tmp[0], ".state.json.tmp-") {
			t.Errorf("while writing, the folder holds %v besides the target, want one .state.json.tmp-* file", tmp)
		}
		if f, ok := w.(*os.File); !ok || filepath.Dir(f.Name()) != dir {
			t.Errorf("writing to %v, want a file in %s", w, dir)
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Errorf("while writing, the target holds %q", b)
		}
		_, err := io.WriteString(w, "new")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := entriesBut(t, dir); len(left) != 1 || left[0] != "state.json" {
		t.Errorf("afterwards the folder holds %v", left)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("target holds %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

// WriteDir fills a hidden temporary folder beside the final one,
// ".<name>.tmp-*", and the final folder appears only afterwards.
func TestWriteDirMakesTheTemporaryFolderBesideTheTarget(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "encoded")
	err := atomicfile.WriteDir(path, func(tmp string) error {
		if filepath.Dir(tmp) != parent || !strings.HasPrefix(filepath.Base(tmp), ".encoded.tmp-") {
			t.Errorf("filling %s, want %s/.encoded.tmp-*", tmp, parent)
		}
		if got := entriesBut(t, parent); len(got) != 1 || got[0] != filepath.Base(tmp) {
			t.Errorf("while filling, the parent holds %v", got)
		}
		return os.WriteFile(filepath.Join(tmp, "a"), []byte("x"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesBut(t, parent); len(got) != 1 || got[0] != "encoded" {
		t.Errorf("afterwards the parent holds %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(path, "a")); err != nil || string(b) != "x" {
		t.Errorf("encoded/a: %q, %v", b, err)
	}
}
