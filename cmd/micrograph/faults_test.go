package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf16"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// writeNaNEncoder exports a tiny encoder whose floating-point weights are
// all NaN, as a diverged pre-training would leave them.
func writeNaNEncoder(t *testing.T) string {
	return writeEncoder(t, func(state []torch.Named) {
		for _, n := range state {
			if n.Tensor.DType() == torch.Float32 {
				n.Tensor.Fill(math.NaN())
			}
		}
	})
}

// A diverged model (NaN weights, or a learning rate that blows the weights
// up) ends linear-eval and finetune with one line naming the encoder or the
// epoch (they used to spin forever in the ROC-AUC's tie loop), and
// pre-training with one line naming the last good checkpoint and the flags
// that resume or skip.
func TestDivergedModelsFailNamingTheCause(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 200, Seed: 1}); err != nil {
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
		{[]string{"pretrain", "--data", synth, "--run", filepath.Join(dir, "run"), "--lr", "1e30", "--checkpoint-every", "1", "--epochs", "1",
			"--batch-size", "32", "--hidden", "16", "--layers", "2", "--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")},
			"step-000000001.pt; --resume continues from the last good checkpoint, and --skip-nonfinite skips such batches"},
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

// Bad CSV files through --data: each gives one line naming the cause, file
// and line, and the rows featurisation rejects are counted with where they
// are listed, by every command that featurises.
func TestBadCSVThroughData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var rows strings.Builder
	rows.WriteString("smiles,label\n")
	// 12 scaffolds, 5 molecules each with both labels, for a scaffold split.
	scaffolds := []string{"c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCOC1", "c1ccc2ccccc2c1", "C1CC1",
		"c1ccsc1", "C1CCNCC1", "c1cnccn1", "C1CCCC1", "c1ccoc1", "C1CCCCCC1"}
	for i := range 60 {
		fmt.Fprintf(&rows, "%s%s,%d\n", strings.Repeat("C", i/12+1), scaffolds[i%12], i/12%2)
	}
	rows.WriteString("C1CC,1\n") // line 62: RDKit rejects it (an unclosed ring)
	good := write("good.csv", rows.String())
	ragged := write("ragged.csv", "smiles,label\nCCO,1\nCCN,0,1\n")
	twice := write("twice.csv", "smiles,smiles,label\nCCO,CCO,1\n")
	binary := write("binary.csv", strings.Replace(strings.TrimSuffix(rows.String(), "C1CC,1\n"), "Cc1ccccc1,0", "Cc1ccccc1,2", 1))
	huge := write("huge.csv", "smiles\n"+strings.Repeat("C", 1_000_000)+"\n")
	spaced := write("spaced.csv", strings.Replace(rows.String(), "C1CC,1\n", "C C,1\n", 1)) // line 62: methane, if read past the space
	tiny := write("tiny.csv", strings.Replace(strings.TrimSuffix(rows.String(), "C1CC,1\n"), "Cc1ccccc1,0", "Cc1ccccc1,1e-400", 1))
	var unlabelled strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(rows.String(), "\nC1CC,1\n"), "\n") {
		smiles, _, _ := strings.Cut(line, ",")
		unlabelled.WriteString(smiles + ",\n")
	}
	noLabels := write("nolabels.csv", strings.Replace(unlabelled.String(), "smiles,\n", "smiles,label\n", 1))
	var wide []byte
	for _, u := range utf16.Encode([]rune("\ufeff" + rows.String())) {
		wide = append(wide, byte(u), byte(u>>8))
	}
	utf16CSV := write("utf16.csv", string(wide))
	cache := filepath.Join(dir, "cache")
	out := filepath.Join(dir, "r.json")
	run := filepath.Join(dir, "run")
	small := []string{"--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu", "--cache", cache}
	lin := func(data string) []string {
		return []string{"linear-eval", "--data", data, "--out", out, "--seeds", "1", "--steps", "5", "--hidden", "8", "--layers", "1",
			"--device", "cpu", "--cache", cache}
	}
	listed := filepath.Join(cache, "featurized")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{append([]string{"pretrain", "--data", ragged, "--run", run}, small...), 1, ragged + ":3: wrong number of fields"},
		{append([]string{"pretrain", "--data", twice, "--run", run}, small...), 1, twice + `:1: the header names column "smiles" twice (columns 1 and 2)`},
		{append([]string{"pretrain", "--data", huge, "--run", run}, small...), 1, "none of the 1 SMILES could be featurised (row 0: SMILES of 1000000 bytes, more than the limit of 8192)"},
		{append([]string{"pretrain", "--data", huge, "--run", run, "--max-smiles-bytes", "0"}, small...), 2, "--max-smiles-bytes 0 must be positive"},
		// A label other than 0 and 1 makes the task a regression task; asked to be a classification task, it is refused.
		{append(lin(binary), "--task-types", "label=classification"), 1, binary + `: task "label": molecule 0 (Cc1ccccc1) has label 2, not 0 or 1, so the task cannot be classification`},
		{append(lin(binary), "--task-types", "label=ordinal"), 2, `--task-types "label=ordinal": task type "ordinal": want classification or regression`},
		{lin(ragged), 1, ragged + ":3: wrong number of fields"},
		{lin(good), 0, "micrograph: " + good + ": 1 rows rejected, left out (listed in " + listed},
		{append([]string{"pretrain", "--data", good, "--run", run}, small...), 0, "micrograph: " + good + ": 1 rows rejected, left out (listed in " + listed},
		{lin(spaced), 0, "micrograph: " + spaced + ": 1 rows rejected, left out (listed in " + listed},
		{lin(tiny), 1, tiny + `:2: column "label": "1e-400" is a number too close to 0 for float32 labels (below 1.4e-45 in magnitude, it would be stored as 0)`},
		{lin(utf16CSV), 1, utf16CSV + ":1: the file is UTF-16 (it starts with a UTF-16 byte order mark): save it as UTF-8"},
		{lin(noLabels), 1, "dataset " + noLabels + ` has no labels: its label column "label" is empty in every row`},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || tc.code != 0 && strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want status %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	lists, _ := filepath.Glob(filepath.Join(listed, "good-*", "rejected.csv"))
	if len(lists) != 1 {
		t.Fatalf("rejection lists %v", lists)
	}
	if b, _ := os.ReadFile(lists[0]); !strings.Contains(string(b), "60,62,C1CC,") {
		t.Errorf("%s:\n%s", lists[0], b)
	}
	lists, _ = filepath.Glob(filepath.Join(listed, "spaced-*", "rejected.csv"))
	if len(lists) != 1 {
		t.Fatalf("rejection lists %v", lists)
	}
	if b, _ := os.ReadFile(lists[0]); !strings.Contains(string(b), `60,62,C C,"a space at offset 1: RDKit would read what follows as a name, not as atoms"`) {
		t.Errorf("%s:\n%s", lists[0], b)
	}
}

// export refuses a checkpoint whose tensors contradict its configuration
// (it used to write an encoder that cannot be loaded, with status 0) and
// leaves nothing behind.
func TestExportChecksShapes(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if code, _, errs := runCLI(t, "pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4",
		"--batch-size", "8", "--epochs", "1", "--device", "cpu"); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	paths, _ := filepath.Glob(filepath.Join(run, "checkpoints", "step-*.pt"))
	state, meta, err := torch.Load(paths[0], torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(state)
	meta["meta.config"] = strings.Replace(meta["meta.config"], `"hidden":8`, `"hidden":16`, 1)
	forged := filepath.Join(dir, "forged.pt")
	if err := torch.Save(forged, state, meta); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e.pt")
	code, _, errs := runCLI(t, "export", "--checkpoint", forged, "--out", out)
	if code != 1 || !strings.Contains(errs, forged+": meta.config: encoder.hidden 16 differs from the weights, which are 8 wide") || strings.Count(errs, "\n") != 1 {
		t.Errorf("status %d, stderr %q", code, errs)
	}
	for _, p := range []string{out, model.EncoderInfoPath(out)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if code, _, errs := runCLI(t, "export", "--checkpoint", paths[0], "--out", out); code != 0 {
		t.Errorf("the real checkpoint: status %d, %s", code, errs)
	}
}

// hugeHidden is an encoder width whose first weight matrix needs more bytes
// than a 64-bit address space maps (2^40 × 119 atom types × 4 bytes), so
// that libtorch's allocator fails at once on any machine, as CUDA does when
// out of memory, without touching memory.
const hugeHidden = 1 << 40

// A tensor op that fails inside libtorch (here an allocation far beyond any
// memory) ends pre-training with one line naming the setting at fault
// (it used to be libtorch's message alone), not a stack trace, and a new
// run's folder is not left behind. A checkpoint that describes a huge
// encoder is refused before anything is built from it.
func TestLibtorchFailureIsOneLine(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 80, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	pretrainArgs := func(run string, hidden int) []string {
		return []string{"pretrain", "--data", synth, "--run", run, "--hidden", fmt.Sprint(hidden), "--layers", "1",
			"--batch-size", "16", "--max-steps", "1", "--device", "cpu", "--threads", "1", "--cache", filepath.Join(dir, "cache")}
	}
	want := fmt.Sprintf("--hidden %d makes weights that do not fit in memory (", hugeHidden)

	huge := filepath.Join(dir, "huge")
	code, out, errs := runCLI(t, pretrainArgs(huge, hugeHidden)...)
	if code != 2 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 || out != "" {
		t.Errorf("pretrain: status %d, stdout %q, stderr %q; want status 2 and one line with %q", code, out, errs, want)
	}
	if _, err := os.Stat(huge); !os.IsNotExist(err) {
		t.Errorf("the failed new run left %s behind (%v)", huge, err)
	}

	// A checkpoint that describes a huge encoder.
	small := filepath.Join(dir, "small")
	if code, _, errs := runCLI(t, pretrainArgs(small, 8)...); code != 0 {
		t.Fatalf("small pre-training: status %d: %s", code, errs)
	}
	state, meta, err := torch.Load(filepath.Join(small, "checkpoints", "step-000000001.pt"), torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(state)
	meta["meta.config"] = strings.Replace(meta["meta.config"], `"hidden":8,`, fmt.Sprintf(`"hidden":%d,`, hugeHidden), 1)
	if !strings.Contains(meta["meta.config"], fmt.Sprint(hugeHidden)) {
		t.Fatalf("config %s has no hidden width to change", meta["meta.config"])
	}
	forged := filepath.Join(dir, "forged.pt")
	if err := torch.Save(forged, state, meta); err != nil {
		t.Fatal(err)
	}
	encoder := filepath.Join(dir, "encoder.pt")
	code, out, errs = runCLI(t, "export", "--checkpoint", forged, "--out", encoder)
	want = fmt.Sprintf("meta.config: encoder.hidden %d differs from the weights, which are 8 wide", hugeHidden)
	if code != 1 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 || out != "" {
		t.Errorf("export: status %d, stdout %q, stderr %q; want status 1 and one line with %q", code, out, errs, want)
	}
	if _, err := os.Stat(encoder); !os.IsNotExist(err) {
		t.Errorf("the failed export wrote %s (%v)", encoder, err)
	}
}

// embed and predict killed by SIGKILL (here at the failpoint before the
// output's rename) leave their temporary file beside --out, as nothing can
// run on SIGKILL; the next command writing there removes it, and the output
// is whole. Such files used to stay forever (1 MB each, hidden).
func TestKilledScoringLeavesNoTemporaryBehind(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 60, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	saved := filepath.Join(dir, "model")
	if code, _, errs := runCLI(t, "finetune", "--data", synth, "--out", filepath.Join(dir, "ft.json"), "--save", saved, "--seeds", "1",
		"--epochs", "1", "--hidden", "8", "--layers", "1", "--device", "cpu", "--threads", "1", "--cache", cache); code != 0 {
		t.Fatalf("finetune --save: %s", errs)
	}
	saved = bestMember(t, saved) // the one member of the ensemble
	outs := filepath.Join(dir, "outs")
	if err := os.Mkdir(outs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, out, model string }{
		{"embed", filepath.Join(outs, "e.npy"), writeTinyEncoder(t)},
		{"predict", filepath.Join(outs, "p.csv"), saved},
	} {
		args := []string{tc.name, "--data", synth, "--out", tc.out, "--device", "cpu", "--threads", "1", "--cache", cache}
		if tc.name == "embed" {
			args = append(args, "--encoder", tc.model)
		} else {
			args = append(args, "--model", tc.model)
		}
		killed := exec.Command(os.Args[0], args...)
		killed.Env = append(os.Environ(), asMainEnv+"=1", failpoint.Env+"=before rename "+filepath.Base(tc.out))
		if err := killed.Run(); !killedBySIGKILL(err) {
			t.Fatalf("%s: the failpoint did not kill it: %v", tc.name, err)
		}
		left, _ := filepath.Glob(filepath.Join(outs, "."+filepath.Base(tc.out)+".tmp-*"))
		if len(left) != 1 {
			t.Fatalf("%s: killed, it left %q, want its one temporary file", tc.name, left)
		}
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Fatalf("%s again: status %d: %s", tc.name, code, errs)
		}
		names, _ := os.ReadDir(outs)
		var got []string
		for _, n := range names {
			got = append(got, n.Name())
		}
		if !slices.Contains(got, filepath.Base(tc.out)) || slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, ".tmp-") }) {
			t.Errorf("%s: after a second run the folder holds %q; want %s and no temporary", tc.name, got, filepath.Base(tc.out))
		}
	}
}

// killedBySIGKILL tells whether a command's error says SIGKILL ended it.
func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// A report that cannot be written (stdout a full device) fails the command
// with one line and status 1; compare used to end with status 0 and nothing
// written. (A stdout closed before the program starts cannot be seen: Go's
// runtime reopens it on /dev/null first; docs/commands.md says so.)
func TestReportWriteErrors(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "lin.json")
	if err := os.WriteFile(result, []byte(`{"evaluation": "linear", "protocol": "scaffold", "test": {"mean": 0.7, "std": 0, "n": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	cmd := exec.Command(os.Args[0], "compare", result)
	cmd.Stdout = full
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	want := "micrograph compare: the report could not be written: write /dev/stdout: no space left on device\n"
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || stderr.String() != want {
		t.Errorf("%v, stderr %q; want status 1 and %q", err, stderr.String(), want)
	}
	// In the process, any command whose report fails.
	savedOut := stdout
	stdout = failingWriter{}
	defer func() { stdout = savedOut }()
	var errs strings.Builder
	if code := run([]string{"version"}, &errs); code != 1 || errs.String() != "micrograph version: the report could not be written: "+errFailingWriter.Error()+"\n" {
		t.Errorf("version into a failing stdout: status %d, stderr %q", code, errs.String())
	}
}

var errFailingWriter = errors.New("write failed")

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errFailingWriter }

// embed lists a SMILES with a space inside as invalid, naming its row, and
// writes a NaN row for it: RDKit reads what follows a space as a name, and
// "C C" used to be embedded as methane.
func TestEmbedRefusesASpaceInsideASMILES(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csv, []byte("smiles\nC\nC C\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e.csv")
	code, _, errs := runCLI(t, "embed", "--encoder", writeTinyEncoder(t), "--data", csv, "--out", out, "--device", "cpu")
	want := "micrograph: " + csv + `:3 (row 1) "C C": a space at offset 1: RDKit would read what follows as a name, not as atoms` + "\n"
	if code != 0 || errs != want {
		t.Fatalf("status %d, stderr %q; want %q", code, errs, want)
	}
	rows := readCSV(t, out)
	if len(rows) != 3 || rows[1][2] == "NaN" || rows[2][1] != "C C" || rows[2][2] != "NaN" {
		t.Errorf("rows %q: want methane's embedding, then a NaN row for \"C C\"", rows)
	}
}
