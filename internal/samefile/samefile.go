// Package samefile tells which file a path names, so that a command can
// refuse to write where it reads: whether two paths are the same file (hard
// and symbolic links included), whether a path lies inside a folder, and a
// path with the symbolic links of what exists resolved. Paths that do not
// exist yet are compared by name, once the folders above them that do
// exist are resolved.
package samefile

import (
	"os"
	"path/filepath"
	"strings"
)

// Same tells whether a and b are the same file: the same one on disk when
// both exist (hard links and symbolic links included), else the same
// path once made absolute with the links of what exists resolved.
func Same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return Resolve(a) == Resolve(b)
}

// Within tells whether path lies inside the folder dir (after resolving
// symbolic links of what exists).
func Within(path, dir string) bool {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false
	}
	d, p := Resolve(dir), Resolve(filepath.Dir(path))
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}

// absolute is path made absolute and clean; on failure, path cleaned.
func absolute(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return filepath.Clean(path)
}

// Resolve is path absolute with the symbolic links of its longest
// existing part resolved: the file itself when it exists, else the folders
// above it that do.
func Resolve(path string) string {
	a := absolute(path)
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	if dir := filepath.Dir(a); dir != a {
		return filepath.Join(Resolve(dir), filepath.Base(a))
	}
	return a
}

// Inside tells whether path, with every symbolic link followed (its own
// included), lies strictly inside the folder dir (links resolved too): what
// a folder holds as its own, not what a link in it points at elsewhere.
func Inside(path, dir string) bool {
	d, p := Resolve(dir), Resolve(path)
	return strings.HasPrefix(p, d+string(filepath.Separator))
}
