package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// ringScaffolds are rings of different Bemis-Murcko scaffolds, so that a
// scaffold split of molecules built on them has every part.
var ringScaffolds = []string{"c1ccccc1", "c1ccncc1", "c1ccoc1", "c1ccsc1", "C1CCOC1", "C1CCNCC1", "C1CC1", "C1CCC1",
	"C1CCCC1", "C1CCCCC1", "C1CCCCCC1", "c1ccc2ccccc2c1", "c1ccc(-c2ccccc2)cc1", "c1cnccn1", "C1COCCO1", "c1ccc2[nH]ccc2c1"}

// writeRealisticCSV writes name in dir: n molecules (side chains on the
// rings of ringScaffolds) whose SMILES column is canonical_smiles, beside a
// comment column of text holding quotes and commas and a numeric label
// column, active (0 or 1), as real files have.
func writeRealisticCSV(t *testing.T, dir, name string, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("canonical_smiles,comment,active\n")
	for i := range n {
		smiles := strings.Repeat("C", i/len(ringScaffolds)+1) + []string{"O", "N", "S"}[i%3] + ringScaffolds[i%len(ringScaffolds)]
		if i == 0 {
			smiles = "CO" // the first row's SMILES, which the scoring commands' checks read
		}
		fmt.Fprintf(&b, "%s,\"batch %d, \"\"as received\"\", ok\",%d\n", smiles, i, i%2)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// guessed is the line every command says when the default rule takes
// canonical_smiles for the SMILES column.
func guessed(csv string) string {
	return `micrograph: ` + csv + `: SMILES read from column "canonical_smiles", the first whose name contains "smiles"`
}

// Every command that reads a CSV reads the one whose SMILES column is
// canonical_smiles beside a text column of quotes and commas once the
// columns are named, each by another of the three flags: the labels are
// the one task asked for, the results and run record the selection, the
// scoring commands score every row, and the default's choice of
// canonical_smiles is said on stderr (and not when --smiles-columns names
// it).
func TestColumnFlagsInEveryCommand(t *testing.T) {
	dir := t.TempDir()
	csv := writeRealisticCSV(t, dir, "bace.csv", 48) // named as a benchmark for suite
	cache := filepath.Join(dir, "cache")
	encoder := writeTinyEncoder(t)
	ensemble := filepath.Join(dir, "model")
	saveRandomModel(t, ensemble, 3, []infer.Task{{Name: "active", Type: data.Classification}})
	out := func(name string) string { return filepath.Join(dir, name) }
	small := append([]string{"--seeds", "1", "--cache", cache, "--threads", "1"}, tinyEncoderFlags...)

	tests := []struct {
		name  string
		args  []string
		note  bool   // the default's choice is said
		check func() // what the command wrote
	}{
		{"featurize", []string{"featurize", "--csv", csv, "--out", out("folder"), "--ignore-columns", "comment", "--split", "none"}, true, func() {
			d, err := data.ReadOGB(out("folder"))
			if err != nil || !slices.Equal(d.Tasks, []string{"active"}) || d.NumGraphs() != 48 || d.Labels[1] != 1 {
				t.Errorf("featurize: %v, tasks %q", err, d.Tasks)
			}
		}},
		{"linear-eval", append([]string{"linear-eval", "--data", csv, "--out", out("lin.json"), "--target-columns", "active"}, small...), true, func() {
			var res evaluate.LinearEvalResult
			readResult(t, out("lin.json"), &res)
			if !slices.Equal(res.Dataset.Tasks, []string{"active"}) || res.Dataset.Molecules != 48 || !slices.Equal(res.Config.Columns.Targets, []string{"active"}) {
				t.Errorf("linear-eval: dataset %+v, columns %+v", res.Dataset, res.Config.Columns)
			}
		}},
		{"finetune", append([]string{"finetune", "--data", csv, "--out", out("ft.json"), "--ignore-columns", "comment", "--epochs", "1"}, small...), true, func() {
			var res evaluate.FinetuneResult
			readResult(t, out("ft.json"), &res)
			if !slices.Equal(res.Dataset.Tasks, []string{"active"}) || !slices.Equal(res.Config.Columns.Ignore, []string{"comment"}) {
				t.Errorf("finetune: dataset %+v, columns %+v", res.Dataset, res.Config.Columns)
			}
		}},
		{"suite", []string{"suite", "--encoder", encoder, "--datasets", csv, "--out", out("suite"), "--evaluations", "linear",
			"--protocols", "scaffold", "--seeds", "1", "--smiles-columns", "CANONICAL_SMILES", "--target-columns", "active", "--cache", cache, "--threads", "1", "--device", "cpu"}, false, func() {
			res, err := suite.ReadResult(out("suite"))
			if err != nil || len(res.Entries) != 2 || res.Config.Linear.Columns.SMILES != "CANONICAL_SMILES" {
				t.Errorf("suite: %v, %d entries, columns %+v", err, len(res.Entries), res.Config.Linear.Columns)
			}
		}},
		{"pretrain", []string{"pretrain", "--data", csv, "--run", out("run"), "--target-columns", "active", "--hidden", "8", "--layers", "1", "--motifs", "4",
			"--batch-size", "16", "--max-steps", "1", "--device", "cpu", "--threads", "1", "--cache", cache}, true, func() {
			cfg, err := runfolder.ReadConfig(out("run"))
			if err != nil || !slices.Equal(cfg.Columns.Targets, []string{"active"}) {
				t.Errorf("pretrain: %v, columns %+v", err, cfg.Columns)
			}
		}},
		{"embed", []string{"embed", "--encoder", encoder, "--data", csv, "--out", out("e.csv"), "--target-columns", "active"}, true, func() {
			if recs := readCSV(t, out("e.csv")); len(recs) != 49 || recs[1][1] != "CO" || recs[2][1] != "CNc1ccncc1" {
				t.Errorf("embed: %d records, %q", len(recs), recs[:min(3, len(recs))])
			}
		}},
		{"predict", []string{"predict", "--model", ensemble, "--data", csv, "--out", out("p.csv"), "--ignore-columns", "comment,active"}, true, func() {
			if recs := readCSV(t, out("p.csv")); len(recs) != 49 || recs[3][1] != "CSc1ccoc1" || recs[0][2] != "active" {
				t.Errorf("predict: %d records, %q", len(recs), recs[:min(4, len(recs))])
			}
		}},
		{"explain", []string{"explain", "--data", csv, "--out", out("x.csv"), "--smiles-columns", "canonical_smiles", "--threads", "1"}, false, func() {
			if recs := readCSV(t, out("x.csv")); len(recs) != 49 || recs[1][1] != "CO" {
				t.Errorf("explain: %d records", len(recs))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, errs := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("status %d\n%s\n%s", code, stdout, errs)
			}
			if said := strings.Contains(errs, guessed(csv)+"\n"); said != tc.note {
				t.Errorf("the default's choice said: %v, want %v; stderr:\n%s", said, tc.note, errs)
			}
			tc.check()
		})
	}
}

// readResult decodes a result file.
func readResult(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// In every command that reads a CSV, a column the flags name that the file
// lacks is one line naming it and the columns there are, status 2, and
// nothing is written; so is a selection given for a dataset folder, and
// one that contradicts itself. Without the flags, the text column is
// today's line with a hint naming them, status 1, and a file without a
// SMILES column by the default rule names --smiles-columns.
func TestColumnFlagsMisuse(t *testing.T) {
	dir := t.TempDir()
	csv := writeRealisticCSV(t, dir, "bace.csv", 12)
	// Named as benchmarks, for suite.
	noSMILES := filepath.Join(dir, "no-smiles", "bbbp.csv")
	os.Mkdir(filepath.Dir(noSMILES), 0o755)
	os.WriteFile(noSMILES, []byte("name,structure\nethanol,CCO\n"), 0o644)
	folder := filepath.Join(dir, "ogbg_molsider")
	if _, err := synthetic.Write(folder, synthetic.Options{Molecules: 20, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	encoder, saved, outDir := commandInputs(t, dir)
	cache := filepath.Join(dir, "cache")
	o := func(name string) string { return filepath.Join(outDir, name) }
	commands := map[string]func(data string) []string{
		"featurize": func(d string) []string { return []string{"featurize", "--csv", d, "--out", o("f")} },
		"pretrain": func(d string) []string {
			return []string{"pretrain", "--data", d, "--run", o("run"), "--threads", "1", "--cache", cache}
		},
		"embed": func(d string) []string {
			return []string{"embed", "--encoder", encoder, "--data", d, "--out", o("e.csv")}
		},
		"explain": func(d string) []string { return []string{"explain", "--data", d, "--out", o("x.csv")} },
		"predict": func(d string) []string {
			return []string{"predict", "--model", saved, "--data", d, "--out", o("p.csv")}
		},
		"finetune": func(d string) []string {
			return []string{"finetune", "--data", d, "--out", o("f.json"), "--cache", cache}
		},
		"linear-eval": func(d string) []string {
			return []string{"linear-eval", "--data", d, "--out", o("l.json"), "--cache", cache}
		},
		"bench --finetune": func(d string) []string {
			return []string{"bench", "--finetune", "--data", d, "--steps", "1", "--warmup", "0", "--cache", cache}
		},
		"suite": func(d string) []string {
			return []string{"suite", "--encoder", encoder, "--datasets", d, "--out", o("s"), "--protocols", "scaffold", "--cache", cache}
		},
	}
	columns := `its columns are ["canonical_smiles" "comment" "active"]`
	var cases []cliCase
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range commands {
			if !yield(k) {
				return
			}
		}
	}) {
		args := commands[name]
		cases = append(cases,
			cliCase{name + " --target-columns", append(args(csv), "--target-columns", "active,pIC50"), 2, `--target-columns "pIC50" is not a column of ` + csv + ": " + columns},
			cliCase{name + " --ignore-columns", append(args(csv), "--ignore-columns", "Comment"), 2, `--ignore-columns "Comment" is not a column of ` + csv + ": " + columns},
			cliCase{name + " --smiles-columns", append(args(csv), "--smiles-columns", "smiles"), 2, `--smiles-columns "smiles" is not a column of ` + csv + ": " + columns},
			cliCase{name + " both", append(args(csv), "--target-columns", "active", "--ignore-columns", "comment"), 2,
				`--ignore-columns "comment" cannot go with target columns: with the targets named, every other column is left out already`},
			cliCase{name + " no SMILES", args(noSMILES), 1, noSMILES + `:1: no SMILES column: no column is named "smiles" or "mol" or has "smiles" in its name; the columns are ["name" "structure"] (--smiles-columns NAME names it)`},
		)
		if name != "featurize" {
			cases = append(cases, cliCase{name + " folder", append(args(folder), "--target-columns", "p"), 2,
				`--target-columns "p" applies to CSV files only: ` + folder + " is a featurised folder, whose SMILES and tasks are fixed"})
		}
		if !slices.Contains([]string{"embed", "explain", "predict"}, name) {
			cases = append(cases, cliCase{name + " text column", args(csv), 1,
				csv + `:2: column "comment": "batch 0, \"as received\", ok" is not a number (--target-columns A,B names the label columns, or --ignore-columns those that are not)`})
		}
	}
	checkCLI(t, cases)
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("refused commands left %v behind", entries)
	}
}

// Acceptance: linear-eval, finetune and embed read MoleculeNet's esol.csv
// as distributed once its target column is named (the labels in mol/L,
// regression: RMSE), and linear-eval reads freesolv.csv, whose IUPAC names
// hold commas inside quotes, the same way.
func TestColumnFlagsOnMoleculeNetFiles(t *testing.T) {
	dir := t.TempDir()
	moleculenet := testenv.SharedData(t, "moleculenet")
	esol := filepath.Join(moleculenet, "esol.csv")
	const target = "measured log solubility in mols per litre"
	cache := filepath.Join(dir, "cache")
	small := append([]string{"--seeds", "1", "--cache", cache, "--threads", "1"}, tinyEncoderFlags...)
	for _, tc := range []struct {
		name, file, target string
		args               []string
		molecules          int
	}{
		{"linear-eval esol", esol, target, []string{"linear-eval", "--steps", "10"}, 1128},
		{"finetune esol", esol, target, []string{"finetune", "--epochs", "1"}, 1128},
		{"linear-eval freesolv", filepath.Join(moleculenet, "freesolv.csv"), "expt", []string{"linear-eval"}, 642},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			args := append(append(tc.args, "--data", tc.file, "--out", result, "--target-columns", tc.target), small...)
			code, stdout, errs := runCLI(t, args...)
			if code != 0 || !strings.Contains(stdout, "test RMSE") {
				t.Fatalf("status %d\n%s\n%s", code, stdout, errs)
			}
			var res struct {
				Metric  string
				Dataset evaluate.DatasetSummary
			}
			readResult(t, result, &res)
			if res.Metric != evaluate.MetricRMSE || res.Dataset.Molecules != tc.molecules || !slices.Equal(res.Dataset.Tasks, []string{tc.target}) {
				t.Errorf("metric %q, dataset %+v", res.Metric, res.Dataset)
			}
		})
	}
	encoder := writeTinyEncoder(t)
	embeddings := filepath.Join(dir, "esol.npy")
	code, stdout, errs := runCLI(t, "embed", "--encoder", encoder, "--data", esol, "--out", embeddings, "--target-columns", target)
	if code != 0 || !strings.Contains(stdout, "embedded 1128 of 1128 rows") {
		t.Errorf("embed: status %d\n%s\n%s", code, stdout, errs)
	}
	featurized, _ := filepath.Glob(filepath.Join(cache, "featurized", "esol-*"))
	if len(featurized) != 1 {
		t.Errorf("esol.csv featurised into %q, want once for both commands", featurized)
	}
}

// A column selection names columns of a CSV file; a featurised dataset
// folder, or a corpus folder, has its SMILES and tasks fixed, so each of the
// three flags given with one is refused by every command that takes it
// (status 2, one line naming the flag and the folder) and nothing is
// written, rather than being dropped while the command runs on the folder.
// The commands are given small sizes, so that one that ran anyway would end
// soon and fail the test by its status.
func TestColumnFlagsOnAFolder(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "ogbg_molsider") // named as a benchmark, for suite
	if _, err := synthetic.Write(folder, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "corpus")
	if code, _, errs := runCLI(t, "featurize", "--csv", writeRealisticCSV(t, dir, "corpus.csv", 24), "--out", corpus,
		"--shard-rows", "10", "--smiles-columns", "canonical_smiles"); code != 0 {
		t.Fatalf("featurize --shard-rows: status %d: %s", code, errs)
	}
	encoder, saved, outDir := commandInputs(t, dir)
	o := func(name string) string { return filepath.Join(outDir, name) }
	small := []string{"--cache", filepath.Join(dir, "cache"), "--threads", "1", "--device", "cpu"}
	tiny := append([]string{"--seeds", "1"}, small...)
	commands := []struct {
		name string
		args func(data string) []string
	}{
		{"pretrain", func(d string) []string {
			return append([]string{"pretrain", "--data", d, "--run", o("run"), "--max-steps", "1", "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8"}, small...)
		}},
		{"embed", func(d string) []string {
			return []string{"embed", "--encoder", encoder, "--data", d, "--out", o("e.csv")}
		}},
		{"explain", func(d string) []string { return []string{"explain", "--data", d, "--out", o("x.csv")} }},
		{"predict", func(d string) []string {
			return []string{"predict", "--model", saved, "--data", d, "--out", o("p.csv")}
		}},
		{"finetune", func(d string) []string {
			return append([]string{"finetune", "--data", d, "--out", o("f.json"), "--epochs", "1", "--encoder", encoder}, tiny...)
		}},
		{"linear-eval", func(d string) []string {
			return append([]string{"linear-eval", "--data", d, "--out", o("l.json"), "--steps", "1", "--encoder", encoder}, tiny...)
		}},
		{"bench --finetune", func(d string) []string {
			return append([]string{"bench", "--finetune", "--data", d, "--steps", "1", "--warmup", "0"}, append(small, tinyEncoderFlags[:4]...)...)
		}},
		{"suite", func(d string) []string {
			return append([]string{"suite", "--encoder", encoder, "--datasets", d, "--out", o("s"), "--protocols", "scaffold",
				"--evaluations", "linear", "--linear-steps", "1", "--jobs", "1"}, tiny...)
		}},
	}
	flags := []struct{ flag, value string }{{"--smiles-columns", "smiles"}, {"--target-columns", "p"}, {"--ignore-columns", "comment"}}
	var cases []cliCase
	for _, c := range commands {
		for _, f := range flags {
			cases = append(cases, cliCase{c.name + " " + f.flag, append(c.args(folder), f.flag, f.value), 2,
				f.flag + ` "` + f.value + `" applies to CSV files only: ` + folder + " is a featurised folder, whose SMILES and tasks are fixed"})
		}
	}
	for _, f := range flags {
		cases = append(cases, cliCase{"pretrain on a corpus " + f.flag, append(commands[0].args(corpus), f.flag, f.value), 2,
			f.flag + ` "` + f.value + `" applies to CSV files only: ` + corpus + " is a featurised folder, whose SMILES and tasks are fixed"})
	}
	checkCLI(t, cases)
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("refused commands left %v behind", entries)
	}
}

// commandInputs makes, in dir, what the commands a test runs take besides
// their data: a tiny encoder file, a saved one-task classifier and an empty
// folder for outputs that must stay empty.
func commandInputs(t *testing.T, dir string) (encoder, saved, outDir string) {
	t.Helper()
	encoder = writeTinyEncoder(t)
	saved = filepath.Join(dir, "model")
	saveRandomModel(t, saved, 3, []infer.Task{{Name: "active", Type: data.Classification}})
	outDir = filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return encoder, saved, outDir
}
