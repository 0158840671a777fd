package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CSV whose label columns include one without a name (a comma at the end
// of each line, or pandas' unnamed index column) is refused when its header
// is read, before any training: status 1, one line naming the file and the
// column, with the flag that names the labels; finetune --save neither
// trains nor leaves anything. With the labels named, the same file trains.
func TestUnnamedLabelColumnRefusedBeforeTraining(t *testing.T) {
	dir := t.TempDir()
	var trailing, indexed strings.Builder
	trailing.WriteString("smiles,p,\n")
	indexed.WriteString(",smiles,p\n")
	for i := range 64 {
		smiles := strings.Repeat("C", i/len(ringScaffolds)+1) + []string{"O", "N", "S"}[i%3] + ringScaffolds[i%len(ringScaffolds)]
		fmt.Fprintf(&trailing, "%s,%d,\n", smiles, i%2)
		fmt.Fprintf(&indexed, "%d,%s,%d\n", i, smiles, i%2)
	}
	for _, tc := range []struct {
		name, content string
		column        int
	}{{"trailing.csv", trailing.String(), 3}, {"indexed.csv", indexed.String(), 1}} {
		csv := filepath.Join(dir, tc.name)
		os.WriteFile(csv, []byte(tc.content), 0o644)
		out, save := filepath.Join(dir, "r.json"), filepath.Join(dir, "saved")
		args := []string{"finetune", "--data", csv, "--out", out, "--save", save, "--seeds", "2", "--epochs", "2", "--hidden", "16", "--layers", "2",
			"--device", "cpu", "--threads", "1", "--jobs", "1", "--cache", filepath.Join(dir, "cache")}
		code, stdout, errs := runCLI(t, args...)
		want := fmt.Sprintf("micrograph finetune: %s:1: column %d has no name (a comma at the end of each line, or a table's unnamed index column), and every column but the SMILES one is a label unless the label columns are named (--target-columns A,B names the label columns)\n", csv, tc.column)
		if code != 1 || errs != want || strings.Contains(stdout, "epoch") {
			t.Errorf("%s: status %d, stderr %q; want 1 and %q, no epoch trained", tc.name, code, errs, want)
		}
		for _, p := range []string{out, save} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s: the refused command made %s", tc.name, p)
			}
		}
		code, _, errs = runCLI(t, append(args, "--target-columns", "p")...)
		if code != 0 {
			t.Errorf("%s --target-columns p: status %d, stderr %q", tc.name, code, errs)
		}
		os.RemoveAll(out)
		os.RemoveAll(save)
	}
}
