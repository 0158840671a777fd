package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
)

// Misuse of pretrain, export, bench, motifs and plot exits non-zero with one
// line on stderr and leaves nothing behind.
func TestTrainingCommandsMisuse(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := data.WriteSynthetic(synth, data.SynthOptions{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	run := filepath.Join(dir, "run")
	small := []string{"--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu"}
	if code, _, errs := runCLI(t, append([]string{"pretrain", "--data", synth, "--run", run}, small...)...); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	fresh := filepath.Join(dir, "fresh") // must never appear
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pretrain", "--run", fresh}, 2, "missing --data"},
		{[]string{"pretrain", "--data", synth}, 2, "missing --run"},
		{[]string{"pretrain", "--data", synth, "--run", fresh, "--device", "gpu7"}, 1, `unknown device "gpu7"`},
		{[]string{"pretrain", "--data", synth, "--run", fresh, "--device", "cuda:3"}, 1, "--device"},
		{[]string{"pretrain", "--data", filepath.Join(dir, "absent"), "--run", fresh}, 1, "--data"},
		{[]string{"pretrain", "--data", synth, "--run", fresh, "--hidden", "0"}, 1, "hidden width 0"},
		{[]string{"pretrain", "--data", synth, "--run", fresh, "--sampler", "bfs"}, 1, `unknown sampler "bfs"`},
		{[]string{"pretrain", "--data", synth, "--run", fresh, "--batch-size", "-1"}, 1, "--batch-size -1"},
		{[]string{"pretrain", "--data", synth, "--run", file}, 1, "is a file"},
		{[]string{"pretrain", "--data", synth, "--run", run}, 1, "already holds a run"},
		{[]string{"pretrain", "--run", fresh, "--resume"}, 1, "config.json"},
		{[]string{"pretrain", "--run", run, "--resume", "--hidden", "16"}, 1, "shape differs"},
		{[]string{"export", "--out", filepath.Join(dir, "e.pt")}, 2, "exactly one of --run and --checkpoint"},
		{[]string{"export", "--run", run, "--checkpoint", "x.pt", "--out", filepath.Join(dir, "e.pt")}, 2, "exactly one"},
		{[]string{"export", "--run", run, "--out", filepath.Join(dir, "e.txt")}, 2, "want a .pt file"},
		{[]string{"export", "--run", fresh, "--out", filepath.Join(dir, "e.pt")}, 1, "no checkpoints"},
		{[]string{"export", "--checkpoint", file, "--out", filepath.Join(dir, "e.pt")}, 1, "file"},
		{[]string{"bench", "--device", "cpu"}, 2, "missing --data"},
		{[]string{"bench", "--data", synth, "--device", "tpu"}, 1, `unknown device "tpu"`},
		{[]string{"plot", "--run", fresh, "--out", filepath.Join(dir, "c.svg")}, 1, "log.jsonl"},
		{[]string{"motifs", "--run", fresh, "--out", filepath.Join(dir, "m.html")}, 1, "no checkpoints"},
		{[]string{"version", "extra"}, 2, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want status %d and one line with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	for _, p := range []string{fresh, filepath.Join(dir, "e.pt"), filepath.Join(dir, "e.json"), filepath.Join(dir, "c.svg"), filepath.Join(dir, "m.html")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was left behind", p)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Error("a failed run changed the file given as --run")
	}
}
