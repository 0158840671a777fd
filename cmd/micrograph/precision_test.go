package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
)

// A precision the hardware lacks (bf16 on a CPU without avx512_bf16 or AMX,
// simulated by torch.NoBFloat16Env; tf32 on any CPU) or an unknown one is
// refused by every command that computes with a model: status 2, one line
// naming --precision and why, nothing written.
func TestPrecisionRefusals(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	encoder := testenv.SharedData(t, "../runs/cpu-10ep-2026-11-24/seed-1/encoder.pt")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	small := []string{"--hidden", "16", "--layers", "1", "--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")}
	commands := map[string][]string{
		"pretrain":    append([]string{"pretrain", "--data", bace, "--run", out, "--max-steps", "1"}, small...),
		"bench":       append([]string{"bench", "--data", bace, "--steps", "1"}, small...),
		"finetune":    append([]string{"finetune", "--data", bace, "--out", out, "--seeds", "1", "--epochs", "1"}, small...),
		"linear-eval": append([]string{"linear-eval", "--data", bace, "--out", out, "--seeds", "1"}, small...),
		"suite": {"suite", "--encoder", encoder, "--datasets", bace, "--evaluations", "linear", "--protocols", "scaffold",
			"--seeds", "1", "--out", out, "--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")},
		"embed": {"embed", "--data", bace, "--encoder", encoder, "--out", out + ".npy", "--device", "cpu"},
	}
	cases := []struct {
		precision, noBF16, want string
	}{
		{"bf16", "1", "lack bfloat16 instructions"},
		{"tf32", "", "TF32 is a GPU number format"},
		{"fp16", "", "must be fp32, bf16 or tf32"},
	}
	for name, args := range commands {
		for _, c := range cases {
			t.Run(name+"/"+c.precision, func(t *testing.T) {
				t.Setenv(torch.NoBFloat16Env, c.noBF16)
				code, stdout, errs := runCLI(t, append(args, "--precision", c.precision)...)
				if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--precision") || !strings.Contains(errs, c.want) || stdout != "" {
					t.Errorf("status %d, stdout %q, stderr %q; want status 2 and one line naming --precision and %q", code, stdout, errs, c.want)
				}
				if left, _ := filepath.Glob(out + "*"); len(left) > 0 {
					t.Errorf("the refused command left %v", left)
					for _, p := range left {
						os.RemoveAll(p)
					}
				}
			})
		}
	}
}
