package samefile

import (
	"os"
	"path/filepath"
	"testing"
)

// Paths compared in a folder holding a file f, a hard link h and a
// symbolic link s to it, a folder d with a symbolic link l to it, and names
// that do not exist yet.
func TestSameAndWithin(t *testing.T) {
	dir := t.TempDir()
	f, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{os.Link(f, filepath.Join(dir, "h")), os.Symlink(f, filepath.Join(dir, "s")), os.Symlink(d, filepath.Join(dir, "l"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{at("f"), at("h"), true},
		{at("f"), at("s"), true},
		{at("f"), at("d/../f"), true},
		{at("l/new"), at("d/new"), true}, // not there yet: by name, the link resolved
		{at("f"), at("d/f"), false},
		{at("d/new"), at("d/other"), false},
	} {
		if got := Same(tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	for _, tc := range []struct {
		path, dir string
		within    bool
	}{
		{at("d/new"), at("d"), true},
		{at("l/sub/new"), at("d"), true},
		{at("d/new"), at("l"), true},
		{at("dx/new"), at("d"), false}, // a prefix of the name is not the folder
		{at("f"), at("d"), false},
		{at("d/new"), at("f"), false}, // a file holds nothing
	} {
		if got := Within(tc.path, tc.dir); got != tc.within {
			t.Errorf("Within(%s, %s) = %v, want %v", tc.path, tc.dir, got, tc.within)
		}
	}
	if got, want := Resolve(at("l/new")), filepath.Join(Resolve(d), "new"); got != want {
		t.Errorf("Resolve: %s, want %s", got, want)
	}
}
