package main

import (
	"strings"
	"testing"
)

// Misuse of diagnose and diagnose-plot is a usage error (status 2) naming the flag.
func TestDiagnoseMisuse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose", "--data", "d", "--out", "x.json"}, "want exactly one of --checkpoint, --encoder and --random"},
		{[]string{"diagnose", "--random", "--encoder", "e.pt", "--data", "d", "--out", "x.json"}, "want exactly one of"},
		{[]string{"diagnose", "--checkpoint", "c.pt", "--hidden", "8", "--data", "d", "--out", "x.json"}, "--hidden: only --random takes the model from flags"},
		{[]string{"diagnose", "--random", "--tau", "0", "--data", "d", "--out", "x.json"}, "--tau 0 must be positive"},
		{[]string{"diagnose", "--random", "--molecules", "1", "--data", "d", "--out", "x.json"}, "--molecules 1 must be at least 2"},
		{[]string{"diagnose", "--random", "--probe-seeds", "0", "--data", "d", "--out", "x.json"}, "--probe-seeds 0 must be positive"},
		{[]string{"diagnose", "--random", "--device", "tpu", "--data", "d", "--out", "x.json"}, `--device "tpu" must be cpu, cuda, cuda:N or auto`},
		{[]string{"diagnose", "--random", "--max-atoms", "0", "--data", "d", "--out", "x.json"}, "--max-atoms 0 must be positive"},
		{[]string{"diagnose", "--random", "--data", "d"}, "missing --out"},
		{[]string{"diagnose-plot", "--out", "x.svg"}, "no NAME=diag.json"},
		{[]string{"diagnose-plot", "a=b.json"}, "missing --out"},
		{[]string{"diagnose-plot", "--out", "x.png", "a=b.json"}, "want an .svg file"},
		{[]string{"diagnose-plot", "--out", "x.svg", "b.json"}, `"b.json": want NAME=diag.json`},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
