package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
)

// saveRandomModel saves, in the new folder dir, a randomly initialised
// model (seeded seed) of the tiny architecture with tasks, as finetune
// --save lays one out.
func saveRandomModel(t *testing.T, dir string, seed uint64, tasks []infer.Task) {
	t.Helper()
	arch := model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}
	torch.ManualSeed(seed)
	clf, err := model.NewClassifier(arch, len(tasks), torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	m, err := infer.NewSavedModel(arch, tasks, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := infer.SaveModel(dir, m, clf.Store.State()); err != nil {
		t.Fatal(err)
	}
}

// predict on a hand-made ensemble of two members writes, per task, the mean
// and the standard deviation that numpy (numpy.mean, numpy.std) computes
// from the two members' own predict outputs (to 1e-12), and that the
// docs/pytorch.md snippet's load_ensemble and predict_ensemble give in
// PyTorch (to 1e-5): probabilities for a classification task, values in
// the label's units, after each member's own standardisation, for a
// regression one.
func TestPredictEnsembleMatchesNumPyAndSnippet(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	ens := filepath.Join(dir, "ens")
	for i, stats := range [][2]float64{{-2.5, 1.5}, {-1, 0.75}} {
		saveRandomModel(t, filepath.Join(ens, []string{"seed-1", "seed-2"}[i]), uint64(21+i), []infer.Task{
			{Name: "active", Type: data.Classification}, {Name: "log solubility", Type: data.Regression, Mean: stats[0], Std: stats[1]}})
	}
	manifest := `{"format": "micrograph-ensemble", "version": 1, "selection": "every seed", "metric": "roc_auc", "members": [
		{"dir": "seed-1", "seed": 1, "split": "scaffold", "epoch": 3, "valid": 0.7, "test": 0.6},
		{"dir": "seed-2", "seed": 2, "split": "scaffold", "epoch": 5, "valid": 0.8, "test": 0.5}]}`
	if err := os.WriteFile(filepath.Join(ens, infer.EnsembleFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, m := range []string{ens, filepath.Join(ens, "seed-1"), filepath.Join(ens, "seed-2")} {
		out := filepath.Join(dir, "p"+string(rune('0'+len(outs)))+".csv")
		code, stdout, errs := runCLI(t, "predict", "--model", m, "--data", in, "--out", out, "--threads", "1")
		if code != 0 {
			t.Fatalf("predict --model %s: status %d\n%s\n%s", m, code, stdout, errs)
		}
		want := "(one model)"
		if m == ens {
			want = "(an ensemble of 2)"
		}
		if !strings.Contains(stdout, "predicted 2 tasks "+want) {
			t.Errorf("predict --model %s: %q, want %q", m, stdout, want)
		}
		outs = append(outs, out)
	}
	recs := readCSV(t, outs[0])
	if want := []string{"row", "smiles", "active", "log solubility", "active_std", "log solubility_std", "members"}; !slices.Equal(recs[0], want) {
		t.Fatalf("header %q, want %q", recs[0], want)
	}
	inputs := pygInputs(t, dir, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"})
	const harness = `
import csv, sys
import numpy as np
def columns(path, names):
    rows = list(csv.DictReader(open(path)))
    return np.array([[float(r[n]) for n in names] for r in rows])
tasks = ["active", "log solubility"]
valid = [0, 2, 3]
members = np.stack([columns(p, tasks) for p in sys.argv[3:5]])
numpy_mean, numpy_std = members.mean(0), members.std(0)
inp = json.load(open(sys.argv[5]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
with torch.no_grad():
    mean, std = predict_ensemble(load_ensemble(sys.argv[1]), x, edge_index, edge_attr, torch.tensor(inp["batch"]))
m, s = columns(sys.argv[2], tasks), columns(sys.argv[2], [t + "_std" for t in tasks])
count = columns(sys.argv[2], ["members"])[:, 0]
print(json.dumps({
    "numpy": float(max(np.abs(m - numpy_mean)[valid].max(), np.abs(s - numpy_std)[valid].max())),
    "snippet": float(max(np.abs(m[valid] - mean.numpy()).max(), np.abs(s[valid] - std.numpy()).max())),
    "smallest_std": float(s[valid].min()),
    "members": [None if np.isnan(c) else c for c in count],
    "nan_row": bool(np.isnan(m[1]).all() and np.isnan(s[1]).all() and np.isnan(count[1]))}))
`
	var got struct {
		NumPy, Snippet float64
		SmallestStd    float64 `json:"smallest_std"`
		Members        []*float64
		NaNRow         bool `json:"nan_row"`
	}
	runSnippet(t, dir, harness, &got, ens, outs[0], outs[1], outs[2], inputs)
	t.Logf("largest difference from numpy %.2g, from the docs/pytorch.md snippet %.2g; smallest deviation %.3g", got.NumPy, got.Snippet, got.SmallestStd)
	if got.NumPy > 1e-12 || got.Snippet > 1e-5 || !(got.SmallestStd > 1e-6) || !got.NaNRow {
		t.Errorf("differences %g (numpy) and %g (snippet), smallest deviation %g, the invalid row NaN: %v", got.NumPy, got.Snippet, got.SmallestStd, got.NaNRow)
	}
	if len(got.Members) != 4 || got.Members[1] != nil || slices.ContainsFunc(slices.Delete(slices.Clone(got.Members), 1, 2), func(c *float64) bool { return c == nil || *c != 2 }) {
		t.Errorf("members column %v, want 2, NaN, 2, 2", got.Members)
	}
}

// predict refuses an ensemble whose members disagree with one line naming
// the member, status 1, and writes nothing.
func TestPredictRefusesDisagreeingMembers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	ens := filepath.Join(dir, "ens")
	saveRandomModel(t, filepath.Join(ens, "a"), 1, []infer.Task{{Name: "p", Type: data.Classification}})
	saveRandomModel(t, filepath.Join(ens, "b"), 2, []infer.Task{{Name: "q", Type: data.Classification}})
	b, _ := json.Marshal(infer.EnsembleManifest{Format: infer.EnsembleFormat, Version: infer.EnsembleVersion, Metric: infer.MetricROCAUC,
		Members: []infer.EnsembleMember{{Dir: "a"}, {Dir: "b"}}})
	os.WriteFile(filepath.Join(ens, infer.EnsembleFile), b, 0o644)
	out := filepath.Join(dir, "p.csv")
	code, _, errs := runCLI(t, "predict", "--model", ens, "--data", in, "--out", out)
	want := `micrograph predict: ensemble ` + ens + `: member b has the tasks ["q" (classification)], but member a has ["p" (classification)]` + "\n"
	if code != 1 || errs != want {
		t.Errorf("status %d, stderr %q; want 1 and %q", code, errs, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused prediction wrote its output")
	}
}
