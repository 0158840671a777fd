package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
)

// mkfifo replaces path (if any) with a FIFO that nothing writes to.
func mkfifo(t *testing.T, path string) string {
	t.Helper()
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A FIFO (or any file that is not regular) where a command reads a file is
// refused at once with one line naming it, status 1; a FIFO named like the
// newest checkpoint is skipped as unreadable, and the run goes on from the
// checkpoint before it. Every one of these used to block forever in
// open(2), waiting for a writer (and pretrain then ignored SIGTERM).
func TestInputsThatAreNotRegularFiles(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 60, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	small := []string{"--hidden", "8", "--layers", "1", "--device", "cpu", "--threads", "1", "--cache", cache}
	run := filepath.Join(dir, "run")
	if code, _, errs := runCLI(t, append([]string{"pretrain", "--data", synth, "--run", run, "--motifs", "4", "--batch-size", "16",
		"--max-steps", "2", "--checkpoint-every", "1"}, small...)...); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	encoder := filepath.Join(dir, "enc.pt")
	if code, _, errs := runCLI(t, "export", "--run", run, "--out", encoder); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	saved := filepath.Join(dir, "model")
	if code, _, errs := runCLI(t, append([]string{"finetune", "--data", synth, "--out", filepath.Join(dir, "ft.json"), "--save", saved,
		"--seeds", "1", "--epochs", "1"}, small...)...); code != 0 {
		t.Fatalf("finetune --save: %s", errs)
	}
	saved = bestMember(t, saved) // the one member of the ensemble
	csv := writeMolecules(t, dir, 30)
	bace := filepath.Join(dir, "bace") // a benchmark's name, for suite
	testenv.CopyTree(t, synth, bace)
	out := func(name string) string { return filepath.Join(dir, "out", name) }
	os.Mkdir(filepath.Join(dir, "out"), 0o755)

	// Copies of the fixtures with one file made a FIFO.
	variant := func(src, name, fifo string) (string, string) {
		dst := filepath.Join(dir, name)
		if st, _ := os.Stat(src); st.IsDir() {
			testenv.CopyTree(t, src, dst)
			return dst, mkfifo(t, filepath.Join(dst, fifo))
		}
		return dst, mkfifo(t, dst)
	}
	description, err := os.ReadFile(model.EncoderInfoPath(encoder))
	if err != nil {
		t.Fatal(err)
	}
	encFIFO := mkfifo(t, filepath.Join(dir, "fifo-enc.pt")) // beside a real description
	if err := os.WriteFile(model.EncoderInfoPath(encFIFO), description, 0o644); err != nil {
		t.Fatal(err)
	}
	encJSON := filepath.Join(dir, "enc2.pt") // real weights, a FIFO for a description
	weights, err := os.ReadFile(encoder)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(encJSON, weights, 0o644); err != nil {
		t.Fatal(err)
	}
	jsonFIFO := mkfifo(t, model.EncoderInfoPath(encJSON))
	modelDir, modelFIFO := variant(saved, "model-fifo", "model.json")
	configRun, configFIFO := variant(run, "run-config", "config.json")
	logRun, logFIFO := variant(run, "run-log", "log.jsonl")
	lockRun, lockFIFO := variant(run, "run-lock", "lock")
	_, resultFIFO := variant(filepath.Join(dir, "ft.json"), "result-fifo.json", "")
	_, suiteFIFO := variant(filepath.Join(dir, "ft.json"), "suite-fifo.json", "")
	_, csvFIFO := variant(csv, "mols-fifo.csv", "")

	isFIFO := func(path string) string { return path + " is a FIFO, not a regular file" }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"embed --encoder", []string{"embed", "--encoder", encFIFO, "--data", csv, "--out", out("e.npy")}, isFIFO(encFIFO)},
		{"embed, its .json", []string{"embed", "--encoder", encJSON, "--data", csv, "--out", out("e.npy")}, isFIFO(jsonFIFO)},
		{"predict, model.json", []string{"predict", "--model", modelDir, "--data", csv, "--out", out("p.csv")}, isFIFO(modelFIFO)},
		{"pretrain --resume, config.json", []string{"pretrain", "--run", configRun, "--resume"}, isFIFO(configFIFO)},
		{"pretrain --resume, its lock", []string{"pretrain", "--run", lockRun, "--resume", "--device", "cpu", "--cache", cache}, isFIFO(lockFIFO)},
		{"plot, log.jsonl", []string{"plot", "--run", logRun, "--out", out("c.svg")}, isFIFO(logFIFO)},
		{"compare", []string{"compare", resultFIFO}, isFIFO(resultFIFO)},
		{"suite --random-from", []string{"suite", "--encoder", encoder, "--datasets", bace, "--out", out("suite"),
			"--random-from", suiteFIFO, "--device", "cpu"}, isFIFO(suiteFIFO)},
		{"diagnose-plot", []string{"diagnose-plot", "--out", out("d.svg"), "a=" + resultFIFO}, isFIFO(resultFIFO)},
		{"finetune --data", append([]string{"finetune", "--data", csvFIFO, "--out", out("f.json")}, small...), isFIFO(csvFIFO)},
	} {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%s: status %d, stderr %q; want status 1 and one line with %q", tc.name, code, errs, tc.want)
		}
	}

	// The newest checkpoint a FIFO: skipped, said, and the one before used.
	ckRun, ckFIFO := variant(run, "run-ck", filepath.Join("checkpoints", "step-000000999.pt"))
	for _, tc := range []struct {
		name string
		args []string
		want string // on stdout
	}{
		{"export --run", []string{"export", "--run", ckRun, "--out", out("e2.pt")}, "(step 2)"},
		{"motifs --run", append([]string{"motifs", "--run", ckRun, "--out", out("m.html")}, "--device", "cpu"), "(step 2)"},
		{"pretrain --resume", []string{"pretrain", "--run", ckRun, "--resume", "--max-steps", "3", "--device", "cpu", "--cache", cache}, "pre-trained 3 steps"},
	} {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != 0 || !strings.Contains(stdoutText, tc.want) {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want status 0 and %q", tc.name, code, stdoutText, errs, tc.want)
		}
	}
	// The FIFO is left alone (unreadable files are never pruned).
	if st, err := os.Stat(ckFIFO); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("%s: %v", ckFIFO, err)
	}
}

// writeExpanded writes what torch.save({'w': torch.zeros(1).expand(2**28)})
// writes in PyTorch 1.13: a 0.7 kB file whose one tensor is a view of a
// 1-element storage with stride 0, 1 GiB once made contiguous.
func writeExpanded(t *testing.T, path string) {
	t.Helper()
	pickle := "\x80\x02}q\x00X\x01\x00\x00\x00wq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00storageq\x03ctorch\nFloatStorage\nq\x04" +
		"X\x01\x00\x00\x000q\x05X\x03\x00\x00\x00cpuq\x06K\x01tq\x07QK\x00J\x00\x00\x00\x10\x85q\x08K\x00\x85q\t\x89ccollections\nOrderedDict\nq\n)Rq\x0btq\x0cRq\rs."
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, r := range []struct{ name, data string }{{"exp/data.pkl", pickle}, {"exp/data/0", "\x00\x00\x00\x00"}, {"exp/version", "3\n"}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: r.name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(r.data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A tensor file that asks for far more memory than it holds (an expanded
// view: 0.7 kB on disk, 1 GiB as a tensor, 2 GiB with libtorch's copy) is
// refused within the reader's cap by every command that reads one, and a
// resume skips it when it is planted as the newest checkpoint.
func TestTensorFileAskingForMoreThanItHolds(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 60, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	small := []string{"--hidden", "8", "--layers", "1", "--device", "cpu", "--threads", "1", "--cache", cache}
	run := filepath.Join(dir, "run")
	if code, _, errs := runCLI(t, append([]string{"pretrain", "--data", synth, "--run", run, "--motifs", "4", "--batch-size", "16",
		"--max-steps", "1"}, small...)...); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	encoder := filepath.Join(dir, "enc.pt")
	if code, _, errs := runCLI(t, "export", "--run", run, "--out", encoder); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	saved := filepath.Join(dir, "model")
	if code, _, errs := runCLI(t, append([]string{"finetune", "--data", synth, "--out", filepath.Join(dir, "ft.json"), "--save", saved,
		"--seeds", "1", "--epochs", "1"}, small...)...); code != 0 {
		t.Fatalf("finetune --save: %s", errs)
	}
	saved = bestMember(t, saved) // the one member of the ensemble
	writeExpanded(t, encoder)
	writeExpanded(t, filepath.Join(saved, "model.pt"))
	planted := filepath.Join(run, "checkpoints", "step-000000999.pt")
	writeExpanded(t, planted)
	const refused = "tensor of shape [268435456] (stride [0]) needs 1073741824 bytes after"
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"embed", []string{"embed", "--encoder", encoder, "--data", synth, "--out", out + ".npy", "--cache", cache}},
		{"linear-eval", []string{"linear-eval", "--encoder", encoder, "--data", synth, "--out", out + ".json", "--seeds", "1", "--device", "cpu", "--cache", cache}},
		{"predict", []string{"predict", "--model", saved, "--data", synth, "--out", out + ".csv", "--cache", cache}},
		{"export", []string{"export", "--checkpoint", planted, "--out", out + ".pt"}},
		{"diagnose", []string{"diagnose", "--checkpoint", planted, "--data", synth, "--out", out + ".json", "--device", "cpu", "--cache", cache}},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != 1 || !strings.Contains(errs, refused) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: status %d, stderr %q; want status 1 and one line with %q", tc.name, code, errs, refused)
		}
	}
	code, stdoutText, errs := runCLI(t, "pretrain", "--run", run, "--resume", "--max-steps", "2", "--device", "cpu", "--cache", cache)
	if code != 0 || !strings.Contains(stdoutText, "pre-trained 2 steps") {
		t.Errorf("resume beside a planted file: status %d, stdout %q, stderr %q", code, stdoutText, errs)
	}
}
