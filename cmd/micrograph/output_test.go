package main

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// treeState is every file and folder under a root: its kind and size,
// modification time and content hash.
type treeState map[string]string

// snapshot reads the state of every file and folder under root.
func snapshot(t *testing.T, root string) treeState {
	t.Helper()
	s := treeState{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		// A folder's time changes with the probe of whether it takes new
		// files (checkWritableFolder), which leaves nothing: its entries
		// are compared instead.
		state := info.Mode().String()
		if info.Mode().IsRegular() {
			state += " " + info.ModTime().String()
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			state += " " + hashOf(b)
		}
		s[path] = state
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hashOf is b's SHA-256 in hex.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 2*len(sum))
	for _, c := range sum {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

// changes lists what differs between two states of a tree.
func (s treeState) changes(after treeState) []string {
	var out []string
	for p, was := range s {
		if now, ok := after[p]; !ok {
			out = append(out, p+" removed")
		} else if now != was {
			out = append(out, p+" changed")
		}
	}
	for p := range after {
		if _, ok := s[p]; !ok {
			out = append(out, p+" added")
		}
	}
	slices.Sort(out)
	return out
}

// outputWriter is one way a command writes: its command line with the
// output out, the endings that output takes ("/" for a folder, "/new" for a
// folder that must not exist yet), and the files and folders it reads.
type outputWriter struct {
	name    string
	endings []string
	args    func(out string) []string
	inputs  []string
}

// takes tells whether w's output may be named path by its ending and
// kind alone (a file output is no existing folder, a folder output no
// existing file, a new folder nothing that exists).
func (w outputWriter) takes(path string) bool {
	st, err := os.Stat(path)
	for _, e := range w.endings {
		switch {
		case e == "/new":
			return err != nil
		case e == "/":
			return err != nil || st.IsDir()
		case strings.HasSuffix(path, e) && (err != nil || !st.IsDir()):
			return true
		}
	}
	return false
}

// The outputs' rule (issue 40), as a property: every output of every
// command that writes, named in turn at every file of a real run folder (and
// new files inside its checkpoints folder) and at every input of the same
// command line (inside an input dataset folder too), is refused with status
// 2 and one line before any work: nothing anywhere under the test's folder
// changes, and the run resumes afterwards. Where the name fits the output
// (its ending), the line says which rule refused it; elsewhere the ending
// alone may. explain --out R/log.jsonl, export --out R/config.pt and export
// --out R/checkpoints/<newest>.pt used to replace the run's files with
// status 0.
func TestNoOutputLandsOnARunOrAnInput(t *testing.T) {
	dir := t.TempDir()
	run, synth := tinyRun(t, dir)
	cache := filepath.Join(dir, "cache")
	csv := writeMolecules(t, dir, 12)
	enc := filepath.Join(dir, "enc.pt")
	motifs := filepath.Join(dir, "motifs.pt")
	saved := filepath.Join(dir, "saved")
	for _, args := range [][]string{
		{"export", "--run", run, "--out", enc},
		{"export", "--run", run, "--motifs", "--out", motifs, "--cache", cache},
		{"finetune", "--encoder", enc, "--data", synth, "--out", filepath.Join(dir, "ft.json"), "--save", saved,
			"--seeds", "1", "--epochs", "1", "--device", "cpu", "--cache", cache},
	} {
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: status %d: %s", args, code, errs)
		}
	}
	// suite tells benchmarks by their names.
	bace := filepath.Join(dir, "ogbg_molbace")
	if err := os.Symlink(synth, bace); err != nil {
		t.Fatal(err)
	}
	diag := filepath.Join(dir, "diag.json")
	earlier := filepath.Join(dir, "earlier")
	for path, content := range map[string]string{diag: "{}\n", filepath.Join(earlier, "suite.json"): "{}\n"} {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkpoints, err := runfolder.ListCheckpoints(run)
	if err != nil || len(checkpoints) == 0 {
		t.Fatalf("the run has no checkpoint: %v", err)
	}
	newest := checkpoints[0].Path
	records, err := runfolder.ReadLog(run)
	if err != nil || len(records) == 0 {
		t.Fatalf("the run's log: %v", err)
	}

	cpu := []string{"--device", "cpu", "--cache", cache}
	small := append([]string{"--seeds", "1", "--epochs", "1"}, cpu...)
	matrix := []string{".npy", ".csv"}
	writers := []outputWriter{
		{"export --run", []string{".pt"}, func(o string) []string { return []string{"export", "--run", run, "--out", o} }, nil},
		{"export --checkpoint", []string{".pt"}, func(o string) []string { return []string{"export", "--checkpoint", newest, "--out", o} }, []string{newest}},
		{"export --motifs", []string{".pt"}, func(o string) []string {
			return append([]string{"export", "--run", run, "--motifs", "--data", synth, "--out", o}, cpu...)
		}, []string{synth}},
		{"export --model", []string{".pt"}, func(o string) []string { return []string{"export", "--model", defaultModel, "--out", o} }, nil},
		{"motifs", []string{".html"}, func(o string) []string {
			return append([]string{"motifs", "--run", run, "--data", synth, "--out", o}, cpu...)
		}, []string{synth}},
		{"explain --out", []string{".csv", ".jsonl"}, func(o string) []string {
			return append([]string{"explain", "--model", motifs, "--data", csv, "--out", o}, cpu...)
		}, []string{motifs, model.EncoderInfoPath(motifs), csv}},
		{"explain --run --out", []string{".csv", ".jsonl"}, func(o string) []string {
			return append([]string{"explain", "--run", run, "--data", synth, "--out", o}, cpu...)
		}, []string{synth}},
		{"explain --page", []string{".html"}, func(o string) []string {
			return append([]string{"explain", "--model", motifs, "--data", csv, "--out", filepath.Join(dir, "x.csv"), "--page", o}, cpu...)
		}, []string{motifs, model.EncoderInfoPath(motifs), csv}},
		{"diagnose", []string{""}, func(o string) []string {
			return append([]string{"diagnose", "--checkpoint", newest, "--data", synth, "--probe", synth, "--out", o}, cpu...)
		}, []string{newest, synth}},
		{"diagnose --encoder", []string{""}, func(o string) []string {
			return append([]string{"diagnose", "--encoder", enc, "--data", csv, "--out", o}, cpu...)
		}, []string{enc, model.EncoderInfoPath(enc), csv}},
		{"diagnose-plot", []string{".svg"}, func(o string) []string { return []string{"diagnose-plot", "--out", o, "a=" + diag} }, []string{diag}},
		{"plot", []string{".svg"}, func(o string) []string { return []string{"plot", "--run", run, "--out", o} }, nil},
		{"embed", matrix, func(o string) []string {
			return append([]string{"embed", "--encoder", enc, "--data", csv, "--out", o}, cpu...)
		}, []string{enc, model.EncoderInfoPath(enc), csv}},
		{"embed --data DIR", matrix, func(o string) []string {
			return append([]string{"embed", "--encoder", motifs, "--data", synth, "--out", o}, cpu...)
		}, []string{motifs, model.EncoderInfoPath(motifs), synth}},
		{"predict", matrix, func(o string) []string {
			return append([]string{"predict", "--model", saved, "--data", csv, "--out", o}, cpu...)
		}, []string{filepath.Join(saved, "model.pt"), filepath.Join(saved, "model.json"), csv}},
		{"finetune", []string{""}, func(o string) []string {
			return append([]string{"finetune", "--encoder", enc, "--data", csv, "--out", o}, small...)
		}, []string{enc, model.EncoderInfoPath(enc), csv}},
		{"finetune --save", []string{"/new"}, func(o string) []string {
			return append([]string{"finetune", "--encoder", enc, "--data", synth, "--out", filepath.Join(dir, "x.json"), "--save", o}, small...)
		}, []string{enc, model.EncoderInfoPath(enc), synth}},
		{"linear-eval", []string{""}, func(o string) []string {
			return append([]string{"linear-eval", "--encoder", enc, "--data", synth, "--out", o, "--seeds", "1"}, cpu...)
		}, []string{enc, model.EncoderInfoPath(enc), synth}},
		{"suite", []string{"/"}, func(o string) []string {
			return append([]string{"suite", "--encoder", enc, "--datasets", bace, "--random-from", earlier, "--out", o, "--seeds", "1", "--epochs", "1"}, cpu...)
		}, []string{enc, model.EncoderInfoPath(enc), bace, filepath.Join(earlier, "suite.json")}},
		{"featurize", []string{"/new"}, func(o string) []string { return []string{"featurize", "--csv", csv, "--out", o} }, []string{csv}},
		{"synth", []string{"/new"}, func(o string) []string { return []string{"synth", "--out", o, "--molecules", "10"} }, nil},
		{"pretrain --run", []string{"/"}, func(o string) []string {
			return []string{"pretrain", "--data", csv, "--run", o, "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "4", "--epochs", "1", "--device", "cpu", "--cache", cache}
		}, []string{csv}},
		{"pretrain --cache", []string{"/"}, func(o string) []string {
			return []string{"pretrain", "--data", csv, "--run", filepath.Join(dir, "other-run"), "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "4", "--epochs", "1", "--device", "cpu", "--cache", o}
		}, []string{csv}},
		{"embed --cache", []string{"/"}, func(o string) []string {
			return []string{"embed", "--encoder", enc, "--data", csv, "--out", filepath.Join(dir, "x.npy"), "--device", "cpu", "--cache", o}
		}, []string{enc, model.EncoderInfoPath(enc), csv}},
	}

	// The run's own files, and new names inside its checkpoints folder.
	runFiles := []string{runfolder.ConfigPath(run), runfolder.LogPath(run), runfolder.LockPath(run), runfolder.CheckpointDir(run)}
	for _, c := range checkpoints {
		runFiles = append(runFiles, c.Path)
	}
	before := snapshot(t, dir)
	refused := 0
	for _, w := range writers {
		targets := slices.Clone(runFiles)
		for _, e := range w.endings {
			targets = append(targets, filepath.Join(runfolder.CheckpointDir(run), "new"+strings.TrimPrefix(e, "/")))
		}
		if w.endings[0] == ".pt" {
			targets = append(targets, filepath.Join(run, "config.pt")) // its description: config.json
		}
		for _, in := range w.inputs {
			if st, err := os.Stat(in); err == nil && st.IsDir() {
				// An input folder is only read: a file in it, and new ones.
				targets = append(targets, filepath.Join(in, "raw", "edge.csv.gz"), filepath.Join(in, "new"+strings.TrimPrefix(w.endings[0], "/")), filepath.Join(in, "raw"))
				continue
			}
			targets = append(targets, in)
			if strings.HasSuffix(in, ".json") && w.endings[0] == ".pt" {
				targets = append(targets, strings.TrimSuffix(in, ".json")+".pt")
			}
		}
		for _, target := range targets {
			args := w.args(target)
			code, out, errs := runCLI(t, args...)
			fits := w.takes(target)
			if code != 2 || strings.Count(errs, "\n") != 1 {
				t.Errorf("%s at %s: status %d, stdout %q, stderr %q; want 2 and one line", w.name, target, code, out, errs)
			} else if fits && !strings.Contains(errs, "which only pretrain writes") && !strings.Contains(errs, "is the input") &&
				!strings.Contains(errs, "inside the input folder") && !strings.Contains(errs, "which the run writes") {
				t.Errorf("%s at %s: refused for another reason: %s", w.name, target, errs)
			} else if fits {
				refused++
			}
			if ch := before.changes(snapshot(t, dir)); len(ch) > 0 {
				t.Fatalf("%s at %s (status %d, %q) changed %v", w.name, target, code, errs, ch)
			}
		}
	}
	t.Logf("%d outputs refused by the rule", refused)
	if refused < 80 {
		t.Errorf("only %d outputs were refused by the rule", refused)
	}

	// The run still resumes, from its newest checkpoint, with its log intact.
	if code, _, errs := runCLI(t, "pretrain", "--run", run, "--resume", "--epochs", "2", "--device", "cpu"); code != 0 {
		t.Fatalf("resume: status %d: %s", code, errs)
	}
	after, err := runfolder.ReadLog(run)
	if err != nil || len(after) <= len(records) {
		t.Fatalf("the resumed log has %d records (%v), the run had %d", len(after), err, len(records))
	}
	for i, r := range records {
		if after[i].Step != r.Step || after[i].Loss != r.Loss {
			t.Errorf("log record %d became %+v, was %+v", i, after[i], r)
		}
	}
}
