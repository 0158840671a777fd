package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// --objective picks the formulation and its defaults; settings that belong
// to the other formulation, an unknown objective, and a resume that asks
// for another objective than the run's are misuse: status 2 and one line
// naming the flag.
func TestPretrainObjectiveFlags(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 120, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	small := []string{"--data", synth, "--hidden", "16", "--layers", "1", "--motifs", "4", "--batch-size", "32",
		"--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")}
	misuse := []struct {
		args []string
		want string
	}{
		{[]string{"--objective", "mine"}, `--objective "mine" must be paper or released`},
		{[]string{"--objective", "released", "--alpha", "0.3"}, "--alpha 0.3 belongs to the paper objective"},
		{[]string{"--objective", "released", "--ortho-selected"}, "--ortho-selected true belongs to the paper objective"},
		{[]string{"--objective", "released", "--sampler", "motif"}, `--sampler "motif" must be spectral, random-walk or k-hop`},
		{[]string{"--sampler", "spectral"}, `--sampler "spectral" must be motif, random-walk or k-hop`},
		{[]string{"--objective", "released", "--weight-decay", "-1"}, "--weight-decay -1 must not be negative"},
	}
	for _, c := range misuse {
		args := append(append([]string{"pretrain", "--run", filepath.Join(dir, "never")}, small...), c.args...)
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: status %d, stderr %q; want 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}

	run := filepath.Join(dir, "released")
	code, _, stderr := runCLI(t, append(append([]string{"pretrain", "--run", run}, small...), "--objective", "released", "--max-steps", "2")...)
	if code != 0 {
		t.Fatalf("released run: status %d: %s", code, stderr)
	}
	cfg, err := runfolder.ReadConfig(run)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model.Objective() != model.ObjectiveReleased || cfg.Model.Sampler != "spectral" || cfg.BatchSize != 32 || cfg.WeightDecay != 0.01 || cfg.ClipGradNorm != 0.5 {
		t.Errorf("released run's config: objective %s, sampler %q, batch %d, weight decay %v, clip %v", cfg.Model.Objective(), cfg.Model.Sampler, cfg.BatchSize, cfg.WeightDecay, cfg.ClipGradNorm)
	}
	code, _, stderr = runCLI(t, "pretrain", "--run", run, "--resume", "--objective", "paper", "--max-steps", "3")
	if code != 2 || !strings.Contains(stderr, "trains the released objective") {
		t.Errorf("resume asking for the paper objective: status %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "pretrain", "--run", run, "--resume", "--max-steps", "3")
	if code != 0 {
		t.Errorf("resume: status %d, %q", code, stderr)
	}
	// The export is the encoder alone, as for the paper objective: 16 wide,
	// one layer, nothing of the projection head or the motif table.
	enc := filepath.Join(dir, "released.pt")
	if code, _, stderr := runCLI(t, "export", "--run", run, "--out", enc); code != 0 {
		t.Fatalf("export: status %d, %q", code, stderr)
	}
	info, state, err := model.LoadEncoder(enc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, n := range state {
			n.Tensor.Free()
		}
	}()
	if info.Encoder.Hidden != 16 || info.Encoder.Layers != 1 || len(state) == 0 {
		t.Errorf("exported encoder: %+v with %d tensors", info.Encoder, len(state))
	}
	for _, n := range state {
		if strings.HasPrefix(n.Name, "projection_head") || strings.HasPrefix(n.Name, "motif") || strings.HasPrefix(n.Name, "encoder.") {
			t.Errorf("exported tensor %s is not the encoder's own", n.Name)
		}
	}
}
