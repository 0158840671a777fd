package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
)

// A pre-training checkpoint (in its run or copied elsewhere under another
// name) or a run folder given as --encoder to finetune, linear-eval, suite,
// embed or diagnose, or as --model to explain or export, is refused as
// misuse in one line that says what it is and how to export the encoder or
// the motif model (issue #28: "open …/step-000000001.json: no such file"),
// and nothing is written.
func TestEncoderFlagGivenACheckpoint(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if code, _, errs := runCLI(t, "pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu"); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	paths, _ := filepath.Glob(filepath.Join(run, "checkpoints", "step-*.pt"))
	if len(paths) == 0 {
		t.Fatal("pretrain wrote no checkpoint")
	}
	ckpt := paths[len(paths)-1]
	blob, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "model.pt")
	os.WriteFile(copied, blob, 0o644)
	outDir := filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	out := filepath.Join(outDir, "r.json")

	isCkpt := func(p string) string {
		return "--encoder " + p + " is a pre-training checkpoint, not an exported encoder: export its encoder first (micrograph export --checkpoint " + p + " --out enc.pt)"
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"finetune", "--data", synth, "--out", out, "--encoder", ckpt}, isCkpt(ckpt)},
		{[]string{"finetune", "--data", synth, "--out", out, "--encoder", copied}, isCkpt(copied)},
		{[]string{"linear-eval", "--data", synth, "--out", out, "--encoder", ckpt}, isCkpt(ckpt)},
		{[]string{"suite", "--encoder", ckpt, "--datasets", filepath.Join(dir, "ogbg_molbace"), "--out", filepath.Join(outDir, "suite")}, isCkpt(ckpt)},
		{[]string{"embed", "--encoder", ckpt, "--data", synth, "--out", filepath.Join(outDir, "e.npy")}, isCkpt(ckpt)},
		{[]string{"diagnose", "--encoder", copied, "--data", synth, "--out", out}, isCkpt(copied)},
		{[]string{"finetune", "--data", synth, "--out", out, "--encoder", run}, "--encoder " + run + " is a pre-training run folder, not an exported encoder: export its encoder first (micrograph export --run " + run + " --out enc.pt)"},
		{[]string{"explain", "--model", copied, "--data", synth, "--out", filepath.Join(outDir, "x.csv")},
			"--model " + copied + " is a pre-training checkpoint, not a motif model: export its motif model first (micrograph export --checkpoint " + copied + " --motifs --out motifs.pt)"},
		{[]string{"export", "--model", run, "--out", filepath.Join(outDir, "x.pt")},
			"--model " + run + " is a pre-training run folder, not an exported encoder: export its encoder first (micrograph export --run " + run + " --out enc.pt)"},
	}
	for _, tc := range tests {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%q: status %d, stderr %q; want status 2 and one line with %q", tc.args, code, errs, tc.want)
		}
		if left, _ := os.ReadDir(outDir); len(left) > 0 {
			t.Errorf("%q left %s behind", tc.args, left[0].Name())
		}
	}
	// The advice works: the exported encoder is taken.
	enc := filepath.Join(dir, "enc.pt")
	if code, _, errs := runCLI(t, "export", "--checkpoint", ckpt, "--out", enc); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	if _, _, err := modelRef("--encoder", enc, false); err != nil {
		t.Errorf("the exported encoder: %v", err)
	}
}

// A pre-training corpus given as --data to a command other than pretrain is
// misuse too, refused in one line before any work (it was status 1, while
// the same mistake with --encoder was 2), and nothing is written.
func TestDataFlagGivenACorpus(t *testing.T) {
	dir := t.TempDir()
	table := synthetic.Table(synthetic.Options{Molecules: 20, Seed: 1})
	csv := filepath.Join(dir, "mols.csv")
	if err := os.WriteFile(csv, []byte("smiles\n"+strings.Join(table.SMILES, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "corpus")
	if code, _, errs := runCLI(t, "featurize", "--csv", csv, "--out", corpus, "--shard-rows", "10"); code != 0 {
		t.Fatalf("featurize: %s", errs)
	}
	outDir := filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	out := filepath.Join(outDir, "r.json")
	want := "--data " + corpus + " is a pre-training corpus (featurize --shard-rows), which only pretrain reads"
	for _, args := range [][]string{
		{"finetune", "--data", corpus, "--out", out},
		{"linear-eval", "--data", corpus, "--out", out},
		{"embed", "--encoder", filepath.Join(dir, "enc.pt"), "--data", corpus, "--out", filepath.Join(outDir, "e.npy")},
		{"predict", "--model", filepath.Join(dir, "model"), "--data", corpus, "--out", filepath.Join(outDir, "p.csv")},
		{"diagnose", "--random", "--data", corpus, "--out", out},
	} {
		code, stdoutText, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%q: status %d, stderr %q; want status 2 and one line with %q", args, code, errs, want)
		}
		if left, _ := os.ReadDir(outDir); len(left) > 0 {
			t.Errorf("%q left %s behind", args, left[0].Name())
		}
	}
}
