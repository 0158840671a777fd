package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
)

// A setting that depends on the protocol is checked under every protocol a
// suite runs, as finetune checks it under its one: --patience needs a valid
// part, so cross-validation refuses it (status 2, naming the flag and the
// protocol) rather than stopping each fold's run at epoch --patience.
func TestSuiteChecksSettingsUnderEveryProtocol(t *testing.T) {
	dir := t.TempDir()
	bace := filepath.Join(dir, "ogbg_molbace")
	if _, err := synthetic.Write(bace, synthetic.Options{Molecules: 60, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	out := filepath.Join(dir, "out")
	base := []string{"suite", "--encoder", encoder, "--datasets", bace, "--out", out, "--device", "cpu", "--cache", filepath.Join(dir, "cache")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocols", "scaffold,cv5", "--patience", "2", "--epochs", "6"},
			"micrograph suite: --patience 2 needs a valid part to stop on: protocol scaffold (cross-validation chooses the epoch on test across folds); the suite runs finetune under protocol cv5 (see micrograph suite --help)\n"},
		{[]string{"--patience", "10"}, // the default protocols, scaffold and cv10
			"micrograph suite: --patience 10 needs a valid part to stop on: protocol scaffold (cross-validation chooses the epoch on test across folds); the suite runs finetune under protocol cv10 (see micrograph suite --help)\n"},
		{[]string{"--protocols", "cv5", "--patience", "2"},
			"micrograph suite: --patience 2 needs a valid part to stop on: protocol scaffold (cross-validation chooses the epoch on test across folds) (see micrograph suite --help)\n"},
	} {
		code, _, errs := runCLI(t, append(base, tc.args...)...)
		if code != 2 || errs != tc.want {
			t.Errorf("%q: status %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: the refused suite made %s", tc.args, out)
			os.RemoveAll(out)
		}
	}
	// finetune refuses the same setting with the same words.
	code, _, errs := runCLI(t, "finetune", "--encoder", encoder, "--data", bace, "--out", filepath.Join(dir, "r.json"), "--protocol", "cv5", "--patience", "2")
	if want := "micrograph finetune: --patience 2 needs a valid part to stop on: protocol scaffold"; code != 2 || !strings.HasPrefix(errs, want) {
		t.Errorf("finetune: status %d, stderr %q; want 2 and %q", code, errs, want)
	}
}
