// Package testenv finds what tests need from the machine: the project's real
// datasets and a Python that can import given modules (PyTorch, RDKit,
// scikit-learn) for interoperability checks.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// SharedEnv names the folder with the project's real datasets; CI sets it to
// ../shared, relative to the repository root.
const SharedEnv = "MICROGRAPH_SHARED"

// SharedData is $MICROGRAPH_SHARED/data/sub, a relative value taken from the
// repository root. It skips the test when the variable is unset, and fails it
// when the folder is missing.
func SharedData(tb testing.TB, sub string) string {
	tb.Helper()
	root := os.Getenv(SharedEnv)
	if root == "" {
		tb.Skipf("%s is unset: skipping the test on the real datasets (CI sets it to ../shared)", SharedEnv)
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(ModuleRoot(tb), root)
	}
	dir := filepath.Join(root, "data", sub)
	if _, err := os.Stat(dir); err != nil {
		tb.Fatalf("%s=%s: %v", SharedEnv, os.Getenv(SharedEnv), err)
	}
	return dir
}

// ModuleRoot is the folder holding go.mod, above the working directory.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

var pythons sync.Map // modules (comma-joined) → pythonResult

type pythonResult struct {
	path, err string
}

// Python is the first of $MICROGRAPH_PYTHON, python3 and /usr/bin/python3
// that can import every module named. Without one the test fails (it does not
// skip: `make deps` installs what the tests need).
func Python(tb testing.TB, modules ...string) string {
	tb.Helper()
	key := strings.Join(modules, ",")
	r, ok := pythons.Load(key)
	if !ok {
		r, _ = pythons.LoadOrStore(key, findPython(modules))
	}
	res := r.(pythonResult)
	if res.path == "" {
		tb.Fatal(res.err)
	}
	return res.path
}

func findPython(modules []string) pythonResult {
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("MICROGRAPH_PYTHON"); p != "" {
		candidates = append([]string{p}, candidates...)
	}
	script := "import " + strings.Join(modules, ", ")
	var tried []string
	for _, p := range candidates {
		out, err := exec.Command(p, "-c", script).CombinedOutput()
		if err == nil {
			return pythonResult{path: p}
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, fmt.Sprintf("%s (%v: %s)", p, err, lines[len(lines)-1]))
	}
	return pythonResult{err: fmt.Sprintf("no Python can import %s; tried %s. Run `make deps` or set MICROGRAPH_PYTHON.",
		strings.Join(modules, ", "), strings.Join(tried, ", "))}
}
