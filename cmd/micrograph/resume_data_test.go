package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// writeSMILESFile writes a CSV of n synthetic molecules drawn with seed.
func writeSMILESFile(t *testing.T, path string, n int, seed uint64) {
	t.Helper()
	table := synthetic.Table(synthetic.Options{Molecules: n, Seed: seed})
	if err := os.WriteFile(path, []byte("smiles\n"+strings.Join(table.SMILES, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// forgetDataKey makes run as a run from before data keys: config.json and
// every checkpoint without data_key.
func forgetDataKey(t *testing.T, run string) {
	t.Helper()
	strip := regexp.MustCompile(`,?\s*"data_key":\s*"[^"]*"`)
	blob, err := os.ReadFile(runfolder.ConfigPath(run))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(runfolder.ConfigPath(run), strip.ReplaceAll(blob, nil), 0o644)
	paths, _ := filepath.Glob(filepath.Join(run, "checkpoints", "step-*.pt"))
	for _, p := range paths {
		state, meta, err := torch.Load(p, torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		meta["meta.config"] = strip.ReplaceAllString(meta["meta.config"], "")
		err = torch.Save(p, state, meta)
		torch.FreeNamed(state)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A run records its data's absolute path and content (issue #28: a run made
// with a relative --data could not be resumed from another folder, and one
// whose CSV was replaced by other molecules resumed silently on them): the
// resume from elsewhere continues, the resume on changed data is refused in
// one line (status 1) leaving the run as it was, and a run from before data
// keys still resumes.
func TestResumeFindsAndChecksTheRunsData(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--device", "cpu"}
	pretrainIn := func(cwd string, args ...string) (int, string) {
		t.Chdir(cwd)
		code, _, errs := runCLI(t, append(append([]string{"pretrain"}, args...), small...)...)
		return code, errs
	}
	writeSMILESFile(t, filepath.Join(dir, "mols.csv"), 40, 1)
	other := filepath.Join(dir, "elsewhere")
	os.Mkdir(other, 0o755)

	tests := []struct {
		name    string
		old     bool // a run from before data keys
		replace bool // the CSV is replaced by other molecules before the resume
		code    int
		stderr  string
	}{
		{"unchanged, from another folder", false, false, 0, ""},
		{"replaced", false, true, 1, "micrograph pretrain: resume: the data " + filepath.Join(dir, "mols.csv") + " has changed since the run began (content csv:"},
		{"replaced, a run from before data keys", true, true, 0, ""},
	}
	for _, tc := range tests {
		writeSMILESFile(t, filepath.Join(dir, "mols.csv"), 40, 1)
		run := filepath.Join(dir, strings.NewReplacer(" ", "-", ",", "").Replace(tc.name))
		if code, errs := pretrainIn(dir, "--data", "mols.csv", "--run", run, "--epochs", "1"); code != 0 {
			t.Fatalf("%s: pretrain: status %d: %s", tc.name, code, errs)
		}
		cfg, err := runfolder.ReadConfig(run)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Data != filepath.Join(dir, "mols.csv") || !strings.HasPrefix(cfg.DataKey, "csv:") || len(cfg.DataKey) != 4+64 {
			t.Errorf("%s: the run records data %q, key %q; want the absolute path and a csv: SHA-256", tc.name, cfg.Data, cfg.DataKey)
		}
		if tc.old {
			forgetDataKey(t, run)
		}
		if tc.replace {
			writeSMILESFile(t, filepath.Join(dir, "mols.csv"), 40, 2)
		}
		before, _ := os.ReadFile(runfolder.LogPath(run))
		code, errs := pretrainIn(other, "--run", run, "--resume", "--epochs", "2")
		if code != tc.code || !strings.Contains(errs, tc.stderr) || (tc.code != 0 && strings.Count(errs, "\n") != 1) {
			t.Errorf("%s: the resume: status %d, stderr %q; want %d and %q", tc.name, code, errs, tc.code, tc.stderr)
		}
		after, _ := os.ReadFile(runfolder.LogPath(run))
		grew := len(after) > len(before) && slices.Equal(after[:len(before)], before)
		if grew != (tc.code == 0) {
			t.Errorf("%s: the log grew %v after the resume", tc.name, grew)
		}
		var saved map[string]any
		blob, _ := os.ReadFile(runfolder.ConfigPath(run))
		json.Unmarshal(blob, &saved)
		if _, has := saved["data_key"]; has == tc.old {
			t.Errorf("%s: after the resume config.json has data_key %v", tc.name, has)
		}
	}
}
