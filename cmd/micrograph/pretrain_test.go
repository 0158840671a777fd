package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
)

// Misuse of pretrain, export, bench, motifs and plot exits non-zero with one
// line on stderr and leaves nothing behind: status 2 and the flag's name for
// a setting that cannot work (NaN and infinities too, and settings that
// leave the dataset no batch), 1 for what the command finds wrong.
func TestTrainingCommandsMisuse(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	run := filepath.Join(dir, "run")
	small := []string{"--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu"}
	if code, _, errs := runCLI(t, append([]string{"pretrain", "--data", synth, "--run", run}, small...)...); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	fresh := filepath.Join(dir, "fresh") // must never appear
	pre := func(extra ...string) []string {
		return append([]string{"pretrain", "--data", synth, "--run", fresh, "--device", "cpu", "--batch-size", "8"}, extra...)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pretrain", "--run", fresh}, 2, "missing --data"},
		{[]string{"pretrain", "--data", synth}, 2, "missing --run"},
		{pre("--device", "gpu7"), 2, `--device "gpu7" must be cpu, cuda, cuda:N or auto`},
		{pre("--device", "tpu"), 2, `--device "tpu" must be cpu, cuda, cuda:N or auto`},
		{pre("--device", "cuda:3"), 1, `device "cuda:3"`},
		{[]string{"pretrain", "--data", filepath.Join(dir, "absent"), "--run", fresh}, 1, "dataset " + filepath.Join(dir, "absent") + ": no such file or directory"},
		{pre("--hidden", "0"), 2, "--hidden 0 must be positive"},
		{pre("--layers", "0"), 2, "--layers 0 must be positive"},
		{pre("--mlp-layers", "0"), 2, "--mlp-layers 0 must be positive"},
		{pre("--motifs", "0"), 2, "--motifs 0 must be positive"},
		{pre("--batch-size", "0"), 2, "--batch-size 0 must be positive"},
		{pre("--batch-size", "-1"), 2, "--batch-size -1 must be positive"},
		{pre("--lr", "nan"), 2, "--lr NaN must be a finite number"},
		{pre("--lr", "0"), 2, "--lr 0 must be positive"},
		{pre("--tau", "0"), 2, "--tau 0 must be positive"},
		{pre("--tau", "inf"), 2, "--tau +Inf must be a finite number"},
		{pre("--alpha", "nan"), 2, "--alpha NaN must be a finite number"},
		{pre("--alpha", "1.5"), 2, "--alpha 1.5 must be in [0, 1]"},
		{pre("--p-drop", "1.5"), 2, "--p-drop 1.5 must be in [0, 1]"},
		{pre("--threads", "-1"), 2, "--threads -1 must not be negative"},
		{pre("--workers", "0"), 2, "--workers 0 must be positive"},
		{pre("--dropout", "2"), 2, "--dropout 2 must be in [0, 1)"},
		{pre("--t", "-1"), 2, "--t -1 must be positive"},
		{pre("--sinkhorn-lambda", "100"), 2, "--sinkhorn-lambda 100 must be in (0, 80]"},
		{pre("--sinkhorn-iters", "-1"), 2, "--sinkhorn-iters -1 must not be negative"},
		{pre("--lambda-reg", "-1"), 2, "--lambda-reg -1 must not be negative"},
		{pre("--clip-grad-norm", "-inf"), 2, "--clip-grad-norm -Inf must be a finite number"},
		{pre("--epochs", "0"), 2, "--epochs 0 must be positive"},
		{pre("--keep", "0"), 2, "--keep 0 must be positive"},
		{pre("--checkpoint-every", "0"), 2, "--checkpoint-every 0 must be positive"},
		{pre("--sampler", "bfs"), 2, `--sampler "bfs" must be motif, random-walk or k-hop`},
		{pre("--eta", "1000"), 2, "--eta 1000 leaves none of the 40 molecules of " + synth},
		{pre("--batch-size", "64"), 2, "--batch-size 64 is more than the 40 molecules of " + synth},
		{[]string{"pretrain", "--data", synth, "--run", file}, 2, "--run " + strconv.Quote(file) + " is a file, not a folder"},
		{append([]string{"pretrain", "--data", synth, "--run", run}, small...), 1, "already holds a run"},
		{[]string{"pretrain", "--run", fresh, "--resume"}, 1, "config.json"},
		{[]string{"pretrain", "--run", run, "--resume", "--hidden", "16"}, 2, "shape differs"}, // misuse (issue #28)
		{[]string{"pretrain", "--run", run, "--resume", "--keep", "0"}, 2, "--keep 0 must be positive"},
		{[]string{"export", "--out", filepath.Join(dir, "e.pt")}, 2, "exactly one of --run, --checkpoint and --model"},
		{[]string{"export", "--run", run, "--checkpoint", "x.pt", "--out", filepath.Join(dir, "e.pt")}, 2, "exactly one"},
		{[]string{"export", "--run", run, "--out", filepath.Join(dir, "e.txt")}, 2, "want a .pt file"},
		{[]string{"export", "--run", run, "--out", filepath.Join(dir, "absent", "e.pt")}, 2, "folder " + filepath.Join(dir, "absent") + " does not exist"},
		{[]string{"export", "--run", fresh, "--out", filepath.Join(dir, "e.pt")}, 1, "no checkpoints"},
		{[]string{"export", "--checkpoint", file, "--out", filepath.Join(dir, "e.pt")}, 1, "file"},
		{[]string{"bench", "--device", "cpu"}, 2, "missing --data"},
		{[]string{"bench", "--data", synth, "--device", "tpu"}, 2, `--device "tpu" must be cpu, cuda, cuda:N or auto`},
		{[]string{"bench", "--data", synth, "--device", "cpu", "--batch-size", "8", "--steps", "0"}, 2, "--steps 0 must be positive"},
		{[]string{"bench", "--data", synth, "--device", "cpu", "--batch-size", "8", "--warmup", "-1"}, 2, "--warmup -1 must not be negative"},
		{[]string{"bench", "--data", synth, "--device", "cpu", "--eta", "1000"}, 2, "--eta 1000 leaves none"},
		{[]string{"bench", "--data", synth, "--lr", "nan"}, 2, "--lr NaN must be a finite number"},
		{[]string{"motifs", "--run", run, "--out", filepath.Join(dir, "m.html"), "--device", "tpu"}, 2, `--device "tpu" must be`},
		{[]string{"plot", "--run", fresh, "--out", filepath.Join(dir, "c.svg")}, 1, "log.jsonl"},
		{[]string{"motifs", "--run", fresh, "--out", filepath.Join(dir, "m.html")}, 1, "no checkpoints"},
		{[]string{"version", "extra"}, 2, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want status %d and one line with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	for _, p := range []string{fresh, filepath.Join(dir, "e.pt"), filepath.Join(dir, "e.json"), filepath.Join(dir, "c.svg"), filepath.Join(dir, "m.html")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was left behind", p)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Error("a failed run changed the file given as --run")
	}
}

// SIGINT while the first pretrain on a new CSV featurises it ends the
// featurisation at once: status 0 as an interrupted run, one line saying
// so, no run folder and nothing of the CSV in the cache, not even a
// temporary folder (issue #28: the signal acted only once the whole CSV was
// featurised and published). The signal comes half a second after the
// process has loaded RDKit's shim, which it does just before featurising
// (an earlier signal could come before the process handles it); the CSV
// takes far longer than that (one CPU: GOMAXPROCS=1, one RDKit worker). The
// test asserts that the cache was never published, not how fast the stop
// was; a process that goes on until the test's deadline is reported.
func TestPretrainInterruptedWhileFeaturising(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
	dir := t.TempDir()
	table := synthetic.Table(synthetic.Options{Molecules: 2000, Seed: 7})
	var b strings.Builder
	b.WriteString("smiles\n")
	for range 50 { // 100,000 rows: RDKit featurises each repeat again
		for _, s := range table.SMILES {
			b.WriteString(s + "\n")
		}
	}
	csv := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cache, run := filepath.Join(dir, "cache"), filepath.Join(dir, "run")
	c := exec.Command(os.Args[0], "pretrain", "--data", csv, "--run", run, "--cache", cache, "--hidden", "8", "--layers", "1",
		"--motifs", "4", "--batch-size", "8", "--max-steps", "1", "--device", "cpu", "--threads", "1")
	c.Env = append(os.Environ(), asMainEnv+"=1", "GOMAXPROCS=1")
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	maps := fmt.Sprintf("/proc/%d/maps", c.Process.Pid)
	hang := testenv.HangReport(t) // the waits are for events; this only reports a hang
	for ; ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(maps); err == nil && strings.Contains(string(b), "libmgchem") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("pretrain ended before featurising: %v, stderr %q", err, stderr.String())
		default:
		}
		select {
		case <-hang:
			c.Process.Kill()
			<-done
			t.Fatalf("pretrain did not load RDKit; stderr %q", stderr.String())
		default:
		}
	}
	time.Sleep(500 * time.Millisecond)
	c.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-hang:
		c.Process.Kill()
		<-done
		t.Fatalf("pretrain went on after SIGINT; stderr %q", stderr.String())
	}
	want := "micrograph: stopped while featurising " + csv + " into the cache: nothing was written; the same command starts again\n"
	if err != nil || stderr.String() != want || stdout.String() != "" {
		t.Errorf("%v, stdout %q, stderr %q; want status 0 and %q", err, stdout.String(), stderr.String(), want)
	}
	if _, err := os.Stat(run); err == nil {
		t.Errorf("the interrupted pretrain made %s", run)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "featurized")); len(entries) != 0 {
		t.Errorf("the interrupted featurisation left %v in the cache", entries)
	}
}
