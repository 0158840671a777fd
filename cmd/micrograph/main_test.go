package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/runpool"
)

// asMainEnv makes the test binary micrograph itself, for the processes that
// `pretrain --nproc` starts by re-executing its own binary.
const asMainEnv = "MICROGRAPH_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	runpool.ServeIfWorker(evaluate.Runs)
	if os.Getenv(asMainEnv) != "" {
		os.Exit(run(os.Args[1:], os.Stderr))
	}
	os.Exit(testenv.RunWithPrivateUserCache(m))
}

// runCLI runs the command line args and returns the exit status, stdout and
// stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	savedOut, savedNotes := stdout, notes
	stdout, notes = &out, &errs
	defer func() { stdout, notes = savedOut, savedNotes }()
	code := run(args, &errs)
	return code, out.String(), errs.String()
}

// Misuse of the command line gives one line on stderr and status 2; --help
// prints the usage and succeeds.
func TestDispatcher(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		stdout  string
		stderr  string
		oneLine bool
	}{
		{nil, 2, "", "usage: micrograph COMMAND", false},
		{[]string{"--help"}, 0, "featurize", "", false},
		{[]string{"train-everything"}, 2, "", `micrograph: unknown command "train-everything" (see micrograph --help)`, true},
		{[]string{"featurize", "--help"}, 0, "usage: micrograph featurize --csv FILE --out DIR", "", false},
		{[]string{"synth", "-h"}, 0, "usage: micrograph synth --out DIR", "", false},
		{[]string{"featurize", "--csv", "x.csv"}, 2, "", "micrograph featurize: missing --out (see micrograph featurize --help)", true},
		{[]string{"featurize", "--bogus"}, 2, "", "micrograph featurize: unknown flag: --bogus", true},
		{[]string{"featurize", "--csv", "a", "--out", "b", "extra"}, 2, "", `unexpected argument "extra"`, true},
		{[]string{"featurize", "--csv", "a", "--out", "b", "--split", "stratified"}, 2, "", `--split "stratified"`, true},
		{[]string{"featurize", "--csv", "a", "--out", "b", "--shard-rows", "100", "--split", "random"}, 2, "", "--split: a corpus (--shard-rows) has no labels and no split", true},
		{[]string{"featurize", "--csv", "a", "--out", "b", "--shard-rows", "0"}, 2, "", "--shard-rows 0: want at least 1", true},
		{[]string{"featurize", "--csv", "a", "--out", "b", "--rdkit-workers", "-2"}, 2, "", "--rdkit-workers -2", true},
		{[]string{"synth", "--out", "x", "--molecules", "many"}, 2, "", `invalid argument "many" for "--molecules"`, true},
		{[]string{"featurize", "--csv", "/nonexistent.csv", "--out", "/nonexistent-out"}, 1, "", "micrograph featurize: open /nonexistent.csv", true},
	}
	for _, tc := range tests {
		code, out, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errs, tc.stderr) {
			t.Errorf("%q: status %d, stdout %q, stderr %q", tc.args, code, out, errs)
		}
		if tc.oneLine && strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: stderr is not one line: %q", tc.args, errs)
		}
	}
}

func TestFeaturizeCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	content := "smiles,\"active, really\",other,mol_id\nCCO,1,0,m1\nC1CC,0,1,m2\nc1ccccc1O,,1,m3\n"
	if err := os.WriteFile(in, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdoutText, errs := runCLI(t, "featurize", "--csv", in, "--out", out, "--target-columns", `"active, really"`, "--split", "none")
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	for _, want := range []string{"in.csv: 2 of 3 rows featurised into " + out, "1 rows rejected", `row 1 (line 3) "C1CC": SMILES Parse Error: unclosed ring`} {
		if !strings.Contains(stdoutText, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdoutText)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "raw", "node-feat.csv.gz")); err != nil {
		t.Error(err)
	}
	// The output folder exists now, so a second run fails and changes nothing.
	if code, _, errs := runCLI(t, "featurize", "--csv", in, "--out", out); code != 1 || !strings.Contains(errs, "already exists") {
		t.Errorf("second run: status %d, %q", code, errs)
	}
}

// featurize --shard-rows writes a corpus, one line per shard, and run again
// on the complete corpus keeps every shard.
func TestFeaturizeCorpusCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("smiles\nCCO\nC1CC\nc1ccccc1O\nCCN\nCCCC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "corpus")
	for run, want := range []string{"(3 shards, 0 kept from an earlier run)", "(3 shards, 3 kept from an earlier run)"} {
		code, stdoutText, errs := runCLI(t, "featurize", "--csv", in, "--out", out, "--shard-rows", "2", "--rdkit-workers", "2")
		if code != 0 {
			t.Fatalf("run %d: status %d: %s", run, code, errs)
		}
		lines := []string{"in.csv: 4 of 5 rows featurised into " + out, want, "1 rows rejected"}
		if run == 0 {
			lines = append(lines, "shard-00000.bin: rows 0..1: 1 molecules, 1 rejected", "shard-00002.bin: rows 4..4: 1 molecules, 0 rejected")
		}
		for _, line := range lines {
			if !strings.Contains(stdoutText, line) {
				t.Errorf("run %d: the summary lacks %q:\n%s", run, line, stdoutText)
			}
		}
	}
}

func TestSynthCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth")
	code, stdoutText, errs := runCLI(t, "synth", "--out", out, "--molecules", "40", "--seed", "3")
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	if !strings.Contains(stdoutText, "40 of 40 rows featurised") || !strings.Contains(stdoutText, "scaffold split: 32 train, 4 valid, 4 test") {
		t.Errorf("summary:\n%s", stdoutText)
	}
	if _, err := os.Stat(filepath.Join(out, "raw", "node_group.csv.gz")); err != nil {
		t.Error(err)
	}
}

// A corpus shard damaged after featurisation (issue #28: a bond index out of
// range made collation fail without naming the shard; a zeroed shard was
// trained on) stops pretrain with one line naming the shard, status 1,
// before the run folder is made; featurize run again names the shard and
// redoes it, and pretrain then trains.
func TestDamagedCorpusShard(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	table := synthetic.Table(synthetic.Options{Molecules: 60, Seed: 3})
	if err := os.WriteFile(in, []byte("smiles\n"+strings.Join(table.SMILES, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "corpus")
	featurize := []string{"featurize", "--csv", in, "--out", corpus, "--shard-rows", "20"}
	if code, _, errs := runCLI(t, featurize...); code != 0 {
		t.Fatalf("featurize: status %d: %s", code, errs)
	}
	shard := filepath.Join(corpus, "shard-00001.bin")
	blob, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(blob); i += 97 { // flip bits all through the sections
		blob[i] ^= 0x10
	}
	os.WriteFile(shard, blob, 0o644)
	run := filepath.Join(dir, "run")
	pretrain := []string{"pretrain", "--data", corpus, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu"}
	code, _, errs := runCLI(t, pretrain...)
	want := "corpus " + corpus + ": shard-00001.bin is damaged: its CRC-32C is"
	if code != 1 || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("pretrain on a damaged shard: status %d, stderr %q; want 1 and one line containing %q", code, errs, want)
	}
	if _, err := os.Stat(run); err == nil {
		t.Error("pretrain on a damaged corpus left a run folder")
	}
	code, out, errs := runCLI(t, featurize...)
	if code != 0 || !strings.Contains(out, "shard-00001.bin is damaged: its CRC-32C is") || !strings.Contains(out, "featurised again from that shard on") || !strings.Contains(out, "(3 shards, 1 kept from an earlier run)") {
		t.Errorf("featurize again: status %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, pretrain...); code != 0 {
		t.Errorf("pretrain on the redone corpus: status %d: %s", code, errs)
	}
}
