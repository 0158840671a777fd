package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// cliCase is a command line and what it must end with: the exit status and
// the one line on stderr (after "micrograph COMMAND: ").
type cliCase struct {
	name string
	args []string
	code int
	want string
}

// check runs each case and wants exactly one line on stderr, equal to want
// after the command's prefix (with usage's "(see …)" suffix for status 2).
func checkCLI(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		code, _, errs := runCLI(t, tc.args...)
		want := "micrograph " + tc.args[0] + ": " + tc.want
		if tc.code == 2 {
			want += " (see micrograph " + tc.args[0] + " --help)"
		}
		if code != tc.code || errs != want+"\n" {
			t.Errorf("%s: status %d, stderr %q;\nwant status %d, %q", tc.name, code, errs, tc.code, want)
		}
	}
}

// writeMolecules writes a CSV of n small molecules (alcohols labelled 0,
// amines 1, in column p) and returns its path.
func writeMolecules(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("smiles,p\n")
	for i := range n {
		b.WriteString(strings.Repeat("C", i+1) + []string{"O", "N"}[i%2] + "," + []string{"0", "1"}[i%2] + "\n")
	}
	path := filepath.Join(dir, "mols.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A dataset folder without split/ (featurize --split none) under the
// scaffold protocol is one line naming the protocol flag, where finetune,
// linear-eval and suite used to panic on the missing split; suite refuses it
// before any evaluation. Cross-validation draws its own folds and runs.
func TestSplitlessDataset(t *testing.T) {
	dir := t.TempDir()
	csv := writeMolecules(t, dir, 40)
	ds := filepath.Join(dir, "bbbp") // a benchmark's name, for suite
	if code, _, errs := runCLI(t, "featurize", "--csv", csv, "--out", ds, "--split", "none"); code != 0 {
		t.Fatalf("featurize: %d %s", code, errs)
	}
	out := filepath.Join(dir, "out.json")
	small := []string{"--seeds", "1", "--hidden", "16", "--layers", "2", "--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")}
	need := `--protocol "scaffold" needs a split, and dataset bbbp has none (split/ is missing): use cv10 (cross-validation), or featurize it with a scaffold split (micrograph featurize --split scaffold)`
	checkCLI(t, []cliCase{
		{"finetune", append([]string{"finetune", "--data", ds, "--out", out, "--epochs", "1"}, small...), 2, need},
		{"linear-eval", append([]string{"linear-eval", "--data", ds, "--out", out}, small...), 2, need},
		{"suite", []string{"suite", "--encoder", writeTinyEncoder(t), "--datasets", ds, "--out", filepath.Join(dir, "suite"), "--seeds", "1", "--device", "cpu"}, 2,
			`--datasets "` + ds + `" has no split (split/ is missing), which the scaffold protocol needs: leave scaffold out of the protocols, or featurize it with a scaffold split (micrograph featurize --split scaffold)`},
	})
	for _, p := range []string{out, filepath.Join(dir, "suite")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s written by a refused command", p)
		}
	}
	code, stdoutText, errs := runCLI(t, append([]string{"finetune", "--data", ds, "--out", out, "--epochs", "1", "--protocol", "cv2"}, small...)...)
	if code != 0 || !strings.Contains(stdoutText, "finetune bbbp, cv2, random encoder (no pre-training): test ROC-AUC") {
		t.Errorf("cv2 on a split-less folder: status %d, %q, %q", code, stdoutText, errs)
	}
}

// featurize --target-columns naming a column twice is refused: it used to
// make two tasks of one column.
func TestFeaturizeTargetColumnsTwice(t *testing.T) {
	dir := t.TempDir()
	csv := writeMolecules(t, dir, 4)
	out := filepath.Join(dir, "out")
	checkCLI(t, []cliCase{
		{"twice", []string{"featurize", "--csv", csv, "--out", out, "--target-columns", "p,p"}, 2, `--target-columns "p" is named twice`},
	})
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written by a refused command", out)
	}
}

// An output that is an input, a folder or a FIFO, or that lies inside an
// input dataset folder, is refused before any work with one line naming both
// flags (export, predict and finetune used to replace their input), and the
// input is unchanged. export checks the description beside the weights too:
// with enc.json a folder it used to leave enc.pt alone and name its
// temporary file.
func TestOutputIsNotAnInput(t *testing.T) {
	dir := t.TempDir()
	csv := writeMolecules(t, dir, 12)
	before, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	ds := filepath.Join(dir, "ds")
	if code, _, errs := runCLI(t, "featurize", "--csv", csv, "--out", ds); code != 0 {
		t.Fatalf("featurize: %d %s", code, errs)
	}
	if err := os.Mkdir(filepath.Join(dir, "enc.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.csv")
	if err := os.Symlink(csv, link); err != nil {
		t.Fatal(err)
	}
	small := []string{"--seeds", "1", "--epochs", "1", "--device", "cpu", "--cache", filepath.Join(dir, "cache")}
	checkCLI(t, []cliCase{
		{"export onto its checkpoint", []string{"export", "--checkpoint", encoder, "--out", encoder}, 2,
			"--out " + encoder + " is the input --checkpoint " + encoder + ": writing it would replace what is read; choose another file"},
		{"export beside a folder", []string{"export", "--checkpoint", encoder, "--out", filepath.Join(dir, "enc.pt")}, 2,
			"--out " + filepath.Join(dir, "enc.pt") + ": its description " + filepath.Join(dir, "enc.json") + " is a folder; want a file name"},
		{"embed onto its data", []string{"embed", "--encoder", encoder, "--data", csv, "--out", csv}, 2,
			"--out " + csv + " is the input --data " + csv + ": writing it would replace what is read; choose another file"},
		{"embed onto its data through a link", []string{"embed", "--encoder", encoder, "--data", csv, "--out", link}, 2,
			"--out " + link + " is the input --data " + csv + ": writing it would replace what is read; choose another file"},
		{"embed into a dataset folder", []string{"embed", "--encoder", encoder, "--data", ds, "--out", filepath.Join(ds, "e.npy")}, 2,
			"--out " + filepath.Join(ds, "e.npy") + " is inside the input folder --data " + ds + ", which is only read; choose another place"},
		{"predict onto its data", []string{"predict", "--model", dir, "--data", csv, "--out", csv}, 2,
			"--out " + csv + " is the input --data " + csv + ": writing it would replace what is read; choose another file"},
		{"predict into a FIFO", []string{"predict", "--model", dir, "--data", csv, "--out", fifo}, 2,
			"--out " + fifo + " is not a regular file (a FIFO): want a file name"},
		{"finetune onto its data", append([]string{"finetune", "--data", csv, "--out", csv}, small...), 2,
			"--out " + csv + " is the input --data " + csv + ": writing it would replace what is read; choose another file"},
		{"finetune onto its encoder", append([]string{"finetune", "--data", csv, "--encoder", encoder, "--out", encoder}, small...), 2,
			"--out " + encoder + " is the input --encoder " + encoder + ": writing it would replace what is read; choose another file"},
	})
	if after, err := os.ReadFile(csv); err != nil || string(after) != string(before) {
		t.Errorf("the input changed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "enc.pt")); err == nil {
		t.Error("export wrote enc.pt without its description")
	}
}

// pretrain's --run and --resume misuse is status 2 with one line naming the
// flag, before anything is made: an empty --run (was status 1, "mkdir : no
// such file or directory"), one too long for the system (left 20 nested
// empty folders), and a resume whose flags contradict the run (was status 1).
func TestPretrainRunMisuse(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	cfg := runfolder.DefaultConfig()
	cfg.Data = filepath.Join(dir, "ds")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runfolder.WriteConfig(run, cfg); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, strings.Repeat(strings.Repeat("a", 200)+"/", 21))
	checkCLI(t, []cliCase{
		{"empty run", []string{"pretrain", "--data", cfg.Data, "--run", ""}, 2, "--run is empty: it names a file, folder or model"},
		{"long run", []string{"pretrain", "--data", cfg.Data, "--run", long}, 2,
			fmt.Sprintf("--run is %d bytes long, more than the 4031 a run folder's path may have", len(long))},
		{"long name", []string{"pretrain", "--data", cfg.Data, "--run", filepath.Join(dir, strings.Repeat("b", 256))}, 2,
			"--run " + (filepath.Join(dir, strings.Repeat("b", 256)))[:40] + "…: a folder name of 256 bytes, more than the 255 a name may have"},
		{"resume, other hidden", []string{"pretrain", "--run", run, "--resume", "--hidden", "64"}, 2,
			"--resume " + run + ": the model's shape differs from the run's: model.encoder.hidden 300 in the run, 64 asked"},
		{"resume, other seed", []string{"pretrain", "--run", run, "--resume", "--seed", "5"}, 2,
			"--resume " + run + ": seed is 0 in the run but 5 was asked; only the run's length and where it runs can change on resume"},
		{"resume, other data", []string{"pretrain", "--run", run, "--resume", "--data", csvOf(dir)}, 2,
			"--resume " + run + ": data is " + cfg.Data + " in the run but " + csvOf(dir) + " was asked; only the run's length and where it runs can change on resume"},
	})
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("%s holds %d entries, want only the run", dir, len(names))
	}
}

// csvOf is a CSV path in dir, for flags that are only compared.
func csvOf(dir string) string { return filepath.Join(dir, "other.csv") }

// editConfig rewrites run's config.json with edit applied to it as JSON.
func editConfig(t *testing.T, run string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(runfolder.ConfigPath(run))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runfolder.ConfigPath(run), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A resumed run's settings are its config.json's: one that cannot work, a
// key that is no setting ("objective" written by hand) and a file that
// says otherwise than the checkpoint it resumes are each one line naming
// config.json, status 1. They used to be blamed on a flag nobody gave
// (`--sampler "nonsense"`, status 2), be ignored ("objective"), or be
// reported as "asked". A flag that contradicts the run stays misuse, its
// value named even when the run's is an omitted zero (was "<nil> was
// asked"); a model too large for memory names the setting and the file.
func TestResumeBlamesConfigJSONNotAFlag(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 60, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	newRun := func(name string, args ...string) string {
		run := filepath.Join(dir, name)
		all := append([]string{"pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4",
			"--batch-size", "16", "--max-steps", "1", "--device", "cpu", "--threads", "1", "--cache", cache}, args...)
		if code, _, errs := runCLI(t, all...); code != 0 {
			t.Fatalf("pretrain %s: %s", name, errs)
		}
		return run
	}
	resume := func(run string, args ...string) []string {
		return append([]string{"pretrain", "--run", run, "--resume", "--max-steps", "2", "--device", "cpu", "--cache", cache}, args...)
	}
	paper, released := newRun("paper"), newRun("released", "--objective", "released", "--sampler", "random-walk")
	config := runfolder.ConfigPath(paper)
	setting := func(keys ...string) func(map[string]any) { // keys..., value
		return func(c map[string]any) {
			m := c
			for _, k := range keys[:len(keys)-2] {
				m = m[k].(map[string]any)
			}
			m[keys[len(keys)-2]] = keys[len(keys)-1]
		}
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		run  string
		args []string
		code int
		want string
	}{
		{"a sampler that cannot work", setting("model", "sampler", "nonsense"), paper, nil, 1,
			config + `: model.sampler "nonsense" must be motif, random-walk or k-hop`},
		{"an objective written by hand", setting("model", "objective", "released"), paper, nil, 1,
			config + `: unknown key "objective": config.json holds the run's settings, and this is none (the objective, for one, follows from the model's "released" block)`},
		{"a sampler the checkpoint was not made with", setting("model", "sampler", "k-hop"), paper, nil, 1,
			"resume: " + config + " says model.sampler is k-hop, but the run's newest checkpoint " +
				filepath.Join(paper, "checkpoints", "step-000000001.pt") + " was made with motif: that file was edited (put it back)"},
		{"a weight decay of 0 asked of an AdamW run", nil, released, []string{"--weight-decay", "0"}, 2,
			"--resume " + released + ": weight_decay is 0.01 in the run but 0 was asked; only the run's length and where it runs can change on resume"},
	}
	original, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if tc.edit != nil {
			editConfig(t, tc.run, tc.edit)
		}
		code, _, errs := runCLI(t, resume(tc.run, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: status %d, stderr %q; want status %d and one line with %q", tc.name, code, errs, tc.code, tc.want)
		}
		if err := os.WriteFile(config, original, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A run without a checkpoint yet whose config.json asks for a model
	// too large for memory.
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runfolder.ConfigPath(empty), original, 0o644); err != nil {
		t.Fatal(err)
	}
	editConfig(t, empty, func(c map[string]any) { c["model"].(map[string]any)["encoder"].(map[string]any)["hidden"] = 1 << 40 })
	code, _, errs := runCLI(t, resume(empty)...)
	want := runfolder.ConfigPath(empty) + ": model.encoder.hidden 1099511627776 makes weights that do not fit in memory ("
	if code != 1 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("a huge hidden size in config.json: status %d, stderr %q; want status 1 and %q", code, errs, want)
	}
}
