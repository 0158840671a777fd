package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// Messages point at the thing at fault.

// A fine-tuning that diverges names the step sizes it was given: the
// encoder's learning rate and the weight decay when set, not only the
// learning rate of the head.
func TestDivergenceNamesEveryStepSize(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 200, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	quick := []string{"finetune", "--data", synth, "--out", filepath.Join(dir, "r.json"), "--seeds", "1", "--epochs", "2", "--hidden", "16", "--layers", "2",
		"--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--encoder-lr", "1e300"}, "the model diverged (is the learning rate 0.001 or the encoder's learning rate 1e+300 too high, or the encoder (random) damaged?)"},
		{[]string{"--weight-decay", "1e300"}, "the model diverged (is the learning rate 0.001 or the weight decay 1e+300 too high, or the encoder (random) damaged?)"},
		{[]string{"--encoder-lr", "1e300", "--weight-decay", "1e-2"},
			"the model diverged (is the learning rate 0.001, the encoder's learning rate 1e+300 or the weight decay 0.01 too high, or the encoder (random) damaged?)"},
	} {
		code, _, errs := runCLI(t, append(quick, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want 1 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// A kept suite run whose result was replaced by {} or null (its identity
// intact) makes the restart fail with one line naming the file and what
// it holds, and how to go on; removing the file makes the run again.
func TestKeptRunWithoutAResultNamesItsFile(t *testing.T) {
	suiteOf, out := oneRunSuite(t)
	args := suiteOf(writeTinyEncoder(t))
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatalf("suite: status %d, %s", code, errs)
	}
	files, _ := filepath.Glob(filepath.Join(out, suite.RunsFolder, "*.json"))
	if len(files) != 2 {
		t.Fatalf("kept runs %q, want 2 (pre-trained and random)", files)
	}
	kept := files[0]
	original, _ := os.ReadFile(kept)
	for _, result := range []string{"{}", "null"} {
		var f map[string]json.RawMessage
		if err := json.Unmarshal(original, &f); err != nil {
			t.Fatal(err)
		}
		f["result"] = json.RawMessage(result)
		b, _ := json.Marshal(f)
		os.WriteFile(kept, b, 0o644)
		code, _, errs := runCLI(t, args...)
		want := "micrograph suite: " + kept + ": its result, " + result + ", is not a fine-tuning run's: it was edited or is another program's; remove it, and the run is made again\n"
		if code != 1 || errs != want {
			t.Errorf("result %s: status %d, stderr %q; want 1 and %q", result, code, errs, want)
		}
	}
	os.Remove(kept)
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Errorf("with the file removed: status %d, %s", code, errs)
	}
}

// featurize's former flags --smiles-col and --label-cols still work, in
// every command that reads a CSV, each with a note naming its new name.
func TestRenamedColumnFlagsNameTheirNewNames(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "m.csv")
	var b strings.Builder
	b.WriteString("name,structure,p,q\n")
	for i := range 40 {
		b.WriteString("m," + strings.Repeat("C", i%8+1) + []string{"O", "N"}[i%2] + "," + []string{"0", "1"}[i%2] + ",x\n")
	}
	os.WriteFile(csv, []byte(b.String()), 0o644)
	out := filepath.Join(dir, "f")
	code, _, errs := runCLI(t, "featurize", "--csv", csv, "--out", out, "--smiles-col", "structure", "--label-cols", "p", "--split", "random")
	for _, want := range []string{
		"micrograph: --smiles-col is now --smiles-columns (the old name is read for a while)\n",
		"micrograph: --label-cols is now --target-columns (the old name is read for a while)\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	if code != 0 {
		t.Fatalf("status %d, stderr %q", code, errs)
	}
	if d, err := data.ReadOGB(out); err != nil || !slices.Equal(d.Tasks, []string{"p"}) || d.NumGraphs() != 40 {
		t.Errorf("featurize: %v; want the one task --label-cols named, p, of 40 molecules", err)
	}
	// An error about the field names the flag's new name.
	code, _, errs = runCLI(t, "featurize", "--csv", csv, "--out", filepath.Join(dir, "g"), "--smiles-col", "nope")
	if want := "micrograph: --smiles-col is now --smiles-columns (the old name is read for a while)\n" +
		`micrograph featurize: --smiles-columns "nope" is not a column of ` + csv; code != 2 || !strings.HasPrefix(errs, want) {
		t.Errorf("status %d, stderr %q; want 2 and %q", code, errs, want)
	}
}
