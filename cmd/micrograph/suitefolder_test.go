package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// A suite's --out folder is one suite's: another suite writing into it is
// refused while the first holds its lock (status 1, nothing made), and a
// suite of other settings is refused rather than replace suite.json (status
// 2, naming the setting and the file); more --seeds complete the suite.
func TestSuiteFolderIsOneSuites(t *testing.T) {
	suiteOf, out := oneRunSuite(t)
	args := suiteOf(writeTinyEncoder(t))

	os.Mkdir(out, 0o755)
	held, err := runfolder.TakeLock(out) // another suite at work
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, args...)
	want := "micrograph suite: --out " + out + ": another suite writes into it: run folder " + out + " is in use by process "
	if code != 1 || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("a held folder: status %d, stderr %q; want 1 and %q", code, errs, want)
	}
	if runs, _ := os.ReadDir(filepath.Join(out, "runs")); len(runs) != 0 {
		t.Errorf("the refused suite kept runs: %v", runs)
	}
	held.Release()

	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatalf("suite: status %d, %s", code, errs)
	}
	before, _ := os.ReadFile(filepath.Join(out, "suite.json"))
	code, _, errs = runCLI(t, append(args, "--epochs", "2")...)
	want = "micrograph suite: --epochs 2 differs from the suite in " + filepath.Join(out, "suite.json") + " (1 there), which this one would replace: choose another folder, or remove that file (see micrograph suite --help)\n"
	if code != 2 || errs != want {
		t.Errorf("other settings: status %d, stderr %q; want 2 and %q", code, errs, want)
	}
	if after, _ := os.ReadFile(filepath.Join(out, "suite.json")); string(after) != string(before) {
		t.Error("the refused suite replaced suite.json")
	}
	if code, _, errs := runCLI(t, append(args, "--seeds", "2")...); code != 0 {
		t.Errorf("more seeds: status %d, %s", code, errs)
	}
}

// A kept run is keyed by the encoder's content: the same suite with an
// encoder whose weights differ (suite.json removed, runs/ kept) takes the
// run without pre-training, which depends only on the architecture, and
// makes the pre-trained one again; the first encoder's run is not reused.
func TestKeptRunOfAnotherEncoderIsNotReused(t *testing.T) {
	args, out := oneRunSuite(t)
	first := writeTinyEncoder(t)
	second := scaledEncoder(t, 1.5)
	if code, _, errs := runCLI(t, args(first)...); code != 0 {
		t.Fatalf("suite: status %d, %s", code, errs)
	}
	os.Remove(filepath.Join(out, "suite.json"))
	if code, _, errs := runCLI(t, args(second)...); code != 0 {
		t.Fatalf("another encoder: status %d, %s", code, errs)
	}
	pre, _ := filepath.Glob(filepath.Join(out, "runs", "*-pretrained-*.json"))
	random, _ := filepath.Glob(filepath.Join(out, "runs", "*-random-*.json"))
	if len(pre) != 2 || len(random) != 1 {
		t.Errorf("kept runs: pre-trained %q, random %q; want one pre-trained run per encoder and the random one shared", pre, random)
	}
}

// A kept run is keyed by its own encoder, encoder i for the runs of
// replicate i (seeds --seed+i·S …): the same suite of two encoders whose
// second is replaced by a third (suite.json removed, runs/ kept) takes the
// first encoder's pre-trained run and both random ones, and makes the new
// second encoder's pre-trained run, rather than take the one of the encoder
// it replaced.
func TestKeptRunIsKeyedByItsOwnEncoder(t *testing.T) {
	suiteOf, out := oneRunSuite(t)
	args := func(encoders ...string) []string { return suiteOf(strings.Join(encoders, ",")) }
	first, second, third := writeTinyEncoder(t), scaledEncoder(t, 1.5), scaledEncoder(t, 0.5)
	kept := func(side string) []string {
		files, _ := filepath.Glob(filepath.Join(out, "runs", "*-"+side+"-*.json"))
		return files
	}
	if code, _, errs := runCLI(t, args(first, second)...); code != 0 {
		t.Fatalf("suite: status %d, %s", code, errs)
	}
	if pre, random := kept("pretrained"), kept("random"); len(pre) != 2 || len(random) != 2 {
		t.Fatalf("kept runs: pre-trained %q, random %q; want two of each", pre, random)
	}
	os.Remove(filepath.Join(out, "suite.json"))
	if code, _, errs := runCLI(t, args(first, third)...); code != 0 {
		t.Fatalf("the second encoder replaced: status %d, %s", code, errs)
	}
	pre, random := kept("pretrained"), kept("random")
	if len(pre) != 3 || len(random) != 2 {
		t.Errorf("kept runs: pre-trained %q, random %q; want the replaced encoder's pre-trained run made (3) and the random ones taken (2)", pre, random)
	}
	var seed1 int
	for _, f := range pre {
		if strings.Contains(filepath.Base(f), "-seed1-") {
			seed1++
		}
	}
	if seed1 != 2 {
		t.Errorf("pre-trained runs of seed 1 (encoder 2's): %d, want one for each second encoder", seed1)
	}
}

// oneRunSuite writes 80 synthetic molecules into a folder named like
// ogbg-molbace and gives the arguments of a suite of one fine-tuning run of
// an encoder on them (one seed, one epoch, one process of one thread), and
// the suite's --out folder, not made yet.
func oneRunSuite(t *testing.T) (args func(encoder string) []string, out string) {
	t.Helper()
	dir := t.TempDir()
	bace := filepath.Join(dir, "ogbg_molbace")
	if _, err := synthetic.Write(bace, synthetic.Options{Molecules: 80, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	return func(encoder string) []string {
		return []string{"suite", "--encoder", encoder, "--datasets", bace, "--out", out, "--evaluations", "finetune", "--protocols", "scaffold",
			"--seeds", "1", "--epochs", "1", "--jobs", "1", "--threads", "1", "--device", "cpu", "--cache", filepath.Join(dir, "cache")}
	}, out
}

// scaledEncoder is the tiny encoder's file with its float weights scaled
// by a factor: another encoder of the same architecture.
func scaledEncoder(t *testing.T, by float64) string {
	t.Helper()
	return writeEncoder(t, func(state []torch.Named) {
		for _, n := range state {
			if n.Tensor.DType() == torch.Float32 {
				n.Tensor.CopyFrom(n.Tensor.MulScalar(by), false)
			}
		}
	})
}
