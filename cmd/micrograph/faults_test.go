package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer"
)

// writeNaNEncoder exports a tiny encoder whose floating-point weights are
// all NaN, as a diverged pre-training would leave them.
func writeNaNEncoder(t *testing.T) string {
	t.Helper()
	arch := model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}
	clf, err := model.NewClassifier(arch, 1, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	state := clf.EncoderState()
	torch.NoGrad(func() {
		for _, n := range state {
			if n.Tensor.DType() == torch.Float32 {
				n.Tensor.Fill(math.NaN())
			}
		}
	})
	path := filepath.Join(t.TempDir(), "nan-encoder.pt")
	if err := trainer.SaveEncoder(path, arch, state, "test", 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// A diverged model (NaN weights, or a learning rate that blows the weights
// up) ends linear-eval and finetune with one line naming the encoder or the
// epoch; they used to spin forever in the ROC-AUC's tie loop.
func TestDivergedModelsFailNamingTheCause(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := data.WriteSynthetic(synth, data.SynthOptions{Molecules: 200, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	nanEncoder := writeNaNEncoder(t)
	out := filepath.Join(dir, "result.json")
	quick := []string{"--data", synth, "--out", out, "--seeds", "1", "--device", "cpu", "--cache", filepath.Join(dir, "cache")}
	tests := []struct {
		args []string
		want string
	}{
		{append([]string{"linear-eval", "--encoder", nanEncoder, "--steps", "5"}, quick...),
			"encoder " + nanEncoder + " on " + synth + ": the encoder's weights give non-finite embeddings: 200 of the 200 molecules"},
		{append([]string{"finetune", "--encoder", nanEncoder, "--epochs", "2"}, quick...),
			"epoch 1: the training loss is NaN: the model diverged (is the learning rate 0.001 too high, or the encoder " + nanEncoder + " damaged?)"},
		{append([]string{"finetune", "--lr", "1e30", "--epochs", "2", "--hidden", "16", "--layers", "2"}, quick...),
			"epoch 1: the training loss is NaN: the model diverged (is the learning rate 1e+30 too high, or the encoder (random) damaged?)"},
	}
	for _, tc := range tests {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%q: status %d, stderr %q; want status 1 and one line with %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q wrote a result", tc.args)
		}
	}
}
