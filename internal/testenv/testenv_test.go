package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// anyPython is a Python to run the checks with; the machine needs one for the
// other tests anyway.
func anyPython(t *testing.T) string {
	t.Helper()
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Fatal("no python3 on this machine")
	return ""
}

// pythonWithoutSite writes a Python that has the standard library only (-S:
// no site-packages, so no torch, numpy, pandas or sklearn), as a new user's
// python3 might be.
func pythonWithoutSite(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bare-python3")
	script := "#!/bin/sh\nexec '" + anyPython(t) + "' -S \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// The repository holds a folder named torch: run from its root, a plain
// `python3 -c 'import torch'` succeeds with no PyTorch installed. These tests
// run there to show that nothing is fooled by it.
func chdirToRootWithTorchFolder(t *testing.T) string {
	t.Helper()
	root := ModuleRoot(t)
	if info, err := os.Stat(filepath.Join(root, "torch")); err != nil || !info.IsDir() {
		t.Fatalf("the repository's torch folder: %v", err)
	}
	t.Chdir(root)
	return root
}

// pymodules.py accepts a module only as an installed package: a file and a
// version. Each case puts a module on sys.path from a folder of its own.
func TestPymodulesAcceptsOnlyInstalledPackages(t *testing.T) {
	probe := filepath.Join(ModuleRoot(t), "third_party", "pymodules.py")
	tests := []struct {
		name   string
		files  map[string]string // under the folder put on sys.path
		module string
		ok     bool
		output string // regexp; {dir} is the folder
	}{
		{"installed package", map[string]string{"goodpkg/__init__.py": "__version__ = '1.2.3'\n"}, "goodpkg", true,
			`^goodpkg 1\.2\.3 {dir}/goodpkg/__init__\.py\n$`},
		// As this repository's torch/ where no real torch is installed (an
		// installed package would take precedence over a namespace folder).
		{"folder without __init__ (namespace package)", map[string]string{"nstorch/shim/ops.cpp": "int x;\n"}, "nstorch", false,
			`^nstorch: .*is not an installed package \(no __file__`},
		{"no version", map[string]string{"plainpkg/__init__.py": "\n"}, "plainpkg", false,
			`^plainpkg: {dir}/plainpkg/__init__\.py has no __version__\n$`},
		{"import fails", map[string]string{"brokenpkg/__init__.py": "raise RuntimeError('half installed')\n"}, "brokenpkg", false,
			`^brokenpkg: cannot be imported: RuntimeError: half installed\n$`},
		{"absent", nil, "nosuchmodule", false,
			`^nosuchmodule: cannot be imported: ModuleNotFoundError: No module named 'nosuchmodule'\n$`},
	}
	py := anyPython(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run := "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
			cmd := exec.Command(py, "-I", "-c", run, dir, probe, tc.module)
			cmd.Dir = "/"
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if (err == nil) != tc.ok {
				t.Fatalf("exit %v, want success %v; stdout %q, stderr %q", err, tc.ok, stdout.String(), stderr.String())
			}
			got := stdout.String()
			if !tc.ok {
				got = stderr.String()
			}
			re := regexp.MustCompile(strings.ReplaceAll(tc.output, "{dir}", regexp.QuoteMeta(dir)))
			if !re.MatchString(got) {
				t.Errorf("output %q, want %s", got, re)
			}
		})
	}
}

// The tests' search for a Python is not fooled by the torch folder in the
// working directory, goes on to the next candidate, and says why each failed.
func TestFindPythonIgnoresTheTorchFolder(t *testing.T) {
	root := chdirToRootWithTorchFolder(t)
	probe := filepath.Join(root, "third_party", "pymodules.py")
	bare := pythonWithoutSite(t)

	res := findPython([]string{"no-such-python-3", bare}, probe, []string{"torch"})
	if res.py != nil {
		t.Fatalf("%s, which has no site-packages, passed for a Python with torch", res.py)
	}
	for _, want := range []string{"no-such-python-3 (", bare + " (torch: cannot be imported", "Run `make deps`"} {
		if !strings.Contains(res.err, want) {
			t.Errorf("error %q does not say %q", res.err, want)
		}
	}

	// csv is a standard module with a file and a version: found in the second candidate.
	res = findPython([]string{"no-such-python-3", bare}, probe, []string{"csv"})
	if res.py == nil || res.py.Path != bare {
		t.Fatalf("found %v (%s), want %s", res.py, res.err, bare)
	}
}

// deps.sh, run in the repository root with only Pythons that lack torch,
// pandas and scikit-learn, would install their Debian packages. (Before it
// ran Python isolated from /, the torch folder there passed for PyTorch and
// python3-torch was never installed.) A fake apt-get guards the machine.
func TestDepsWantsPythonPackagesItCannotImport(t *testing.T) {
	root := chdirToRootWithTorchFolder(t)
	bare := pythonWithoutSite(t)
	fakeBin := t.TempDir()
	for _, name := range []string{"apt-get", "sudo"} {
		guard := "#!/bin/sh\necho \"" + name + " must not run in this test\" >&2\nexit 97\n"
		if err := os.WriteFile(filepath.Join(fakeBin, name), []byte(guard), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "third_party/deps.sh", "--dry-run")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+fakeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"MICROGRAPH_PYTHON="+bare, "PYTHON="+bare)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deps.sh --dry-run: %v\n%s", err, out)
	}
	for _, pkg := range []string{"python3-torch", "python3-pandas", "python3-sklearn"} {
		want := "need " + pkg + ": no Python imports "
		if !strings.Contains(string(out), want) {
			t.Errorf("deps.sh --dry-run does not say %q:\n%s", want, out)
		}
	}
	if !strings.Contains(string(out), bare+": torch: cannot be imported") {
		t.Errorf("deps.sh --dry-run does not say why %s fails:\n%s", bare, out)
	}
}

// With MICROGRAPH_PYTHON_OPTIONAL=1 a test whose Python lacks a module skips
// instead of failing (the GPU check's machine cannot install modules).
func TestPythonOptionalSkips(t *testing.T) {
	t.Setenv(PythonOptionalEnv, "1")
	reached := false
	if !t.Run("lacking a module", func(t *testing.T) {
		defer func() {
			if !t.Skipped() {
				t.Error("the test did not skip")
			}
		}()
		Python(t, "micrograph_no_such_module")
		reached = true
	}) || reached {
		t.Errorf("a Python without the module was returned, or the test failed (reached: %v)", reached)
	}
}

// Two ports held at once are distinct, lie outside the kernel's ephemeral
// range, and are free to listen on; a second process cannot take a held one
// (its lock is refused).
func TestFreePort(t *testing.T) {
	lo, hi := ephemeralRange()
	a, b := FreePort(t), FreePort(t)
	if a == b {
		t.Fatalf("two held ports are both %d", a)
	}
	for _, p := range []int{a, b} {
		if p >= lo && p <= hi {
			t.Errorf("port %d lies in the ephemeral range %d–%d", p, lo, hi)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "micrograph-test-port-"+strconv.Itoa(a)+".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	// flock locks belong to the open file: another open of it is refused
	// as another process's would be.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Errorf("the lock of held port %d was granted again", a)
	}
}
