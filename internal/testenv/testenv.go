// Package testenv finds what tests need from the machine: the project's real
// datasets, read-only copies of them, a private user cache folder, and a
// Python that has given modules installed (PyTorch, pandas, scikit-learn) for
// interoperability checks.
package testenv

import (
	"fmt"
	"io/fs"
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
	py  *Interpreter
	err string
}

// Interpreter is a Python that tests run isolated (-I) from /, so that
// neither the working directory (this repository holds a folder named torch),
// PYTHONPATH nor user site-packages decide what it imports: exactly as
// third_party/deps.sh checked it.
type Interpreter struct {
	Path string
}

// Command runs the interpreter with args. Paths among args must be absolute:
// it runs in /.
func (p *Interpreter) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(p.Path, append([]string{"-I"}, args...)...)
	cmd.Dir = "/"
	return cmd
}

func (p *Interpreter) String() string { return p.Path }

// pythonCandidates are the interpreters the tests try, in order: the words of
// $MICROGRAPH_PYTHON when it is set, else python3 and /usr/bin/python3 (where
// Debian's python3-* packages install). third_party/deps.sh checks the same.
func pythonCandidates() []string {
	if env := strings.Fields(os.Getenv("MICROGRAPH_PYTHON")); len(env) > 0 {
		return env
	}
	return []string{"python3", "/usr/bin/python3"}
}

// PythonOptionalEnv, set to 1, makes a test whose Python lacks a module
// skip, saying which, instead of failing: for a machine where `make deps`
// cannot install them, such as the GPU check's (scripts/gpu-check.sh).
const PythonOptionalEnv = "MICROGRAPH_PYTHON_OPTIONAL"

// Python is the first of the candidates (see pythonCandidates) that has every module named as a real
// installed package (third_party/pymodules.py decides). Without one the test
// fails (it does not skip: `make deps` installs what the tests need), unless
// $MICROGRAPH_PYTHON_OPTIONAL is 1.
func Python(tb testing.TB, modules ...string) *Interpreter {
	tb.Helper()
	key := strings.Join(modules, ",")
	r, ok := pythons.Load(key)
	if !ok {
		probe := filepath.Join(ModuleRoot(tb), "third_party", "pymodules.py")
		r, _ = pythons.LoadOrStore(key, findPython(pythonCandidates(), probe, modules))
	}
	res := r.(pythonResult)
	switch {
	case res.py == nil && os.Getenv(PythonOptionalEnv) == "1":
		tb.Skipf("%s (%s=1: skipped)", res.err, PythonOptionalEnv)
	case res.py == nil:
		tb.Fatal(res.err)
	}
	return res.py
}

// findPython runs probe (pymodules.py) in each candidate in turn.
func findPython(candidates []string, probe string, modules []string) pythonResult {
	var tried []string
	seen := map[string]bool{}
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
			continue
		}
		if seen[path] {
			continue
		}
		seen[path] = true
		py := &Interpreter{Path: path}
		out, err := py.Command(append([]string{probe}, modules...)...).CombinedOutput()
		if err == nil {
			return pythonResult{py: py}
		}
		var why []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(line, ": ") {
				why = append(why, line)
			}
		}
		if len(why) == 0 {
			why = append(why, err.Error())
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", path, strings.Join(why, "; ")))
	}
	return pythonResult{err: fmt.Sprintf("no Python has %s as installed packages; tried %s. Run `make deps`, or set MICROGRAPH_PYTHON to Pythons that have them.",
		strings.Join(modules, ", "), strings.Join(tried, ", "))}
}

// RunWithPrivateUserCache runs a test binary's tests (for TestMain) with
// XDG_CACHE_HOME, under which micrograph keeps its caches when no folder is
// named (data.DefaultCacheDir), pointed at a new temporary folder for the
// binary and the processes it starts, so that tests never read or fill the
// user's cache. It removes the folder afterwards and returns m.Run's code.
func RunWithPrivateUserCache(m *testing.M) int {
	dir, err := os.MkdirTemp("", "micrograph-user-cache-")
	if err == nil {
		err = os.Setenv("XDG_CACHE_HOME", dir)
		defer os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "private user cache:", err)
		return 1
	}
	return m.Run()
}

// Listing describes every file and folder under dir (path, mode, size,
// modification time), so that a test can show nothing there changed.
func Listing(tb testing.TB, dir string) string {
	tb.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %d\n", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// ReadOnlyCopy copies the folder src to a new temporary folder, under its own
// name, and makes the copy read-only (MakeReadOnly): a user's shared dataset.
func ReadOnlyCopy(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), filepath.Base(src))
	CopyTree(tb, src, dst)
	MakeReadOnly(tb, dst)
	return dst
}

// MakeReadOnly does chmod -R a-w on dir; the test's end gives the owner write
// permission back, so that temporary folders can be removed. Root writes
// read-only files anyway: tests compare a Listing too.
func MakeReadOnly(tb testing.TB, dir string) {
	tb.Helper()
	chmod := func(clear, set fs.FileMode) error {
		return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			return os.Chmod(p, info.Mode().Perm()&^clear|set)
		})
	}
	if err := chmod(0o222, 0); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := chmod(0, 0o200); err != nil {
			tb.Error(err)
		}
	})
}

// CopyTree copies the folders and regular files under src into dst, writable.
func CopyTree(tb testing.TB, src, dst string) {
	tb.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		tb.Fatal(err)
	}
}
