package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// input is a path a command reads, with the flag that named it; dataset
// says that a folder there is a dataset, which is only read, outputs included.
type input struct {
	flag, path string
	dataset    bool
}

// checkOutput is the one check of every output file before any work: the
// path flag names must not be a folder, a device, a FIFO or any other
// non-regular file, must not be one of inputs (the same file under any name)
// nor lie inside an input dataset folder (those are only read), and its
// folder must exist and take new files. Each refusal is a usage error that
// names the flag. Inputs with an empty path are skipped.
func checkOutput(flag, path string, inputs ...input) error {
	if st, err := os.Stat(path); err == nil {
		switch {
		case st.IsDir():
			return usageError{fmt.Errorf("%s %s is a folder; want a file name", flag, path)}
		case !st.Mode().IsRegular():
			return usageError{fmt.Errorf("%s %s is not a regular file (%s): want a file name", flag, path, inputfile.Kind(st.Mode()))}
		}
	}
	for _, in := range inputs {
		if in.path == "" {
			continue
		}
		if same(path, in.path) {
			return usageError{fmt.Errorf("%s %s is the input %s %s: writing it would replace what is read; choose another file", flag, path, in.flag, in.path)}
		}
		if in.dataset && within(path, in.path) {
			return usageError{fmt.Errorf("%s %s is inside the input folder %s %s, which is only read; choose another place", flag, path, in.flag, in.path)}
		}
	}
	return checkWritableFolder(flag, path, filepath.Dir(path))
}

// same tells whether a and b are the same file: the same one on disk when
// both exist (hard links and symbolic links included), else the same
// absolute path.
func same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return absolute(a) == absolute(b)
}

// within tells whether path lies inside the folder dir (after resolving
// symbolic links of what exists).
func within(path, dir string) bool {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false
	}
	d, p := resolved(dir), resolved(filepath.Dir(path))
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}

// absolute is path made absolute and clean; on failure, path cleaned.
func absolute(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return filepath.Clean(path)
}

// resolved is path absolute with its symbolic links resolved, where it exists.
func resolved(path string) string {
	a := absolute(path)
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	return a
}
