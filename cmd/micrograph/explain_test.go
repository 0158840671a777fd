package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
)

// tinyRun pre-trains a tiny model of the objective on 40 synthetic
// molecules for one epoch and returns the run folder and the dataset.
func tinyRun(t *testing.T, dir string, objective ...string) (run, synth string) {
	t.Helper()
	synth = filepath.Join(dir, "synth")
	if _, err := os.Stat(synth); err != nil {
		if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	run = filepath.Join(dir, "run"+strings.Join(objective, ""))
	args := append([]string{"pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4",
		"--batch-size", "8", "--epochs", "1", "--device", "cpu"}, objective...)
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatalf("pretrain: %s", errs)
	}
	return run, synth
}

// readExplanations decodes a .jsonl file of explanations.
func readExplanations(t *testing.T, path string) []infer.Explanation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []infer.Explanation
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e infer.Explanation
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// A run's motif model, exported with --motifs, explains molecules as the run
// folder itself does, for both objectives: one line per input row in order,
// the row RDKit rejects kept with its reason and listed on stderr by line;
// its description names the motifs by their pieces in the run's data; the
// page draws the molecules. As an encoder it embeds exactly as the run's
// exported encoder does.
func TestExplainCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, objective := range [][]string{nil, {"--objective", "released"}} {
		run, synth := tinyRun(t, dir, objective...)
		name := strings.Join(append([]string{"paper"}, objective...), "")
		motifs := filepath.Join(dir, name+"-motifs.pt")
		if code, _, errs := runCLI(t, "export", "--run", run, "--motifs", "--name", "tiny-v0", "--out", motifs, "--device", "cpu"); code != 0 {
			t.Fatalf("%s: export --motifs: %s", name, errs)
		}
		b, err := os.ReadFile(model.MotifModelInfoPath(motifs))
		if err != nil {
			t.Fatal(err)
		}
		var info model.MotifModelInfo
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, u := range info.Legend {
			named += len(u.Fragments)
		}
		if info.Name != "tiny-v0" || info.Data != filepath.Base(synth) || len(info.Legend) != 4 || named == 0 {
			t.Errorf("%s: description name %q data %q, %d legend entries with %d fragments", name, info.Name, info.Data, len(info.Legend), named)
		}

		fromFile, fromRun := filepath.Join(dir, name+"-file.jsonl"), filepath.Join(dir, name+"-run.jsonl")
		page := filepath.Join(dir, name+".html")
		code, out, errs := runCLI(t, "explain", "--model", motifs, "--data", in, "--out", fromFile, "--page", page, "--device", "cpu")
		if code != 0 || !strings.Contains(out, "explained 3 of 4 rows") || !strings.Contains(errs, "in.csv:3 (row 1)") {
			t.Fatalf("%s: explain: status %d, stdout %q, stderr %q", name, code, out, errs)
		}
		if code, _, errs := runCLI(t, "explain", "--run", run, "--data", in, "--out", fromRun, "--device", "cpu"); code != 0 {
			t.Fatalf("%s: explain --run: %s", name, errs)
		}
		a, _ := os.ReadFile(fromFile)
		b, _ = os.ReadFile(fromRun)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the motif model file and the run folder explain differently", name)
		}
		got := readExplanations(t, fromFile)
		if len(got) != 4 || got[1].Error == "" || got[1].Motifs != nil || got[3].SMILES != "CC(=O)Nc1ccccc1" || len(got[3].Motifs) != 10 {
			t.Errorf("%s: explanations %+v", name, got)
		}
		html, err := os.ReadFile(page)
		if err != nil || strings.Count(string(html), "<figure>") != 4 || !strings.Contains(string(html), "<svg") {
			t.Errorf("%s: page: %v, %d figures", name, err, strings.Count(string(html), "<figure>"))
		}

		enc := filepath.Join(dir, name+"-encoder.pt")
		if code, _, errs := runCLI(t, "export", "--run", run, "--out", enc); code != 0 {
			t.Fatalf("%s: export: %s", name, errs)
		}
		e1, e2 := filepath.Join(dir, name+"-1.npy"), filepath.Join(dir, name+"-2.npy")
		for _, c := range [][2]string{{enc, e1}, {motifs, e2}} {
			if code, _, errs := runCLI(t, "embed", "--encoder", c[0], "--data", in, "--out", c[1], "--device", "cpu"); code != 0 {
				t.Fatalf("%s: embed --encoder %s: %s", name, c[0], errs)
			}
		}
		a, _ = os.ReadFile(e1)
		b, _ = os.ReadFile(e2)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: a motif model embeds differently from its run's encoder", name)
		}
	}
}

// Misuse of explain and export is one line and status 2, with nothing
// written; an unknown model's name lists the shipped ones.
func TestExplainMisuse(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e.jsonl")
	known := strings.Join(model.ShippedModels(), ", ")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"explain", "--model", "micrograph-nonesuch-v9", "--data", in, "--out", out}, "--model micrograph-nonesuch-v9 is not a shipped model (known: " + known + ")"},
		{[]string{"explain", "--model", "x.pt", "--run", dir, "--data", in, "--out", out}, "give at most one of --model and --run"},
		{[]string{"explain", "--data", in, "--out", filepath.Join(dir, "e.txt")}, "want a .csv or .jsonl file"},
		{[]string{"explain", "--data", in, "--out", out, "--page", filepath.Join(dir, "p.svg")}, "--page " + filepath.Join(dir, "p.svg") + ": want an .html file"},
		{[]string{"embed", "--encoder", "molhiv", "--data", in, "--out", filepath.Join(dir, "e.npy")}, "--encoder molhiv is not a shipped model (known: " + known + ")"},
		{[]string{"finetune", "--encoder", "nonesuch", "--data", in, "--out", filepath.Join(dir, "f.json")}, "--encoder nonesuch is not a shipped model"},
		{[]string{"export", "--model", "nonesuch", "--out", filepath.Join(dir, "x.pt")}, "--model nonesuch is not a shipped model"},
		{[]string{"export", "--run", dir, "--model", "nonesuch", "--out", filepath.Join(dir, "x.pt")}, "give exactly one of --run, --checkpoint and --model"},
		{[]string{"export", "--run", dir, "--name", "x", "--out", filepath.Join(dir, "x.pt")}, "--name and --data belong to --motifs"},
	}
	for _, tc := range tests {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%q: status %d, stderr %q; want status 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if !slices.Equal(left, []string{in}) {
		t.Errorf("misuse left %v", left)
	}
}

// The shipped model serves by name: embed without --encoder uses it, and its
// encoder exported as encoder.pt + encoder.json gives in PyTorch (the
// docs/pytorch.md snippet, weights_only=True) the embeddings embed gives, to
// float32 rounding; explain without --model names its pieces and its page
// carries the legend of its pre-training data.
func TestShippedModelInPyTorchAndExplain(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	npy := filepath.Join(dir, "e.npy")
	if code, out, errs := runCLI(t, "embed", "--data", in, "--out", npy, "--threads", "1"); code != 0 || !strings.Contains(out, "embedded 3 of 4 rows") {
		t.Fatalf("embed with the shipped model: status %d\n%s\n%s", code, out, errs)
	}
	enc := filepath.Join(dir, "enc.pt")
	if code, _, errs := runCLI(t, "export", "--model", defaultModel, "--out", enc); code != 0 {
		t.Fatalf("export --model: %s", errs)
	}
	inputs := pygInputs(t, dir, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"})
	const harness = `
import sys
import numpy as np
a = np.load(sys.argv[2])
inp = json.load(open(sys.argv[3]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
with torch.no_grad():
    e = graph_embeddings(load_encoder(sys.argv[1]), x, edge_index, edge_attr, torch.tensor(inp["batch"])).numpy()
print(json.dumps({"shape": list(a.shape), "diff": float(np.max(np.abs(a[[0, 2, 3]] - e) / np.maximum(1, np.abs(e))))}))
`
	var got struct {
		Shape []int
		Diff  float64
	}
	runSnippet(t, dir, harness, &got, enc, npy, inputs)
	if !slices.Equal(got.Shape, []int{4, 300}) || got.Diff > 1e-5 {
		t.Errorf("PyTorch on the exported shipped model: shape %v, largest difference from embed %g", got.Shape, got.Diff)
	}
	jsonl, page := filepath.Join(dir, "x.jsonl"), filepath.Join(dir, "x.html")
	if code, _, errs := runCLI(t, "explain", "--data", in, "--out", jsonl, "--page", page, "--threads", "1"); code != 0 {
		t.Fatalf("explain with the shipped model: %s", errs)
	}
	ex := readExplanations(t, jsonl)
	if len(ex) != 4 || len(ex[2].Motifs) != 7 || len(ex[2].Profile) != 20 || ex[2].Pieces[0].Fragment == "" {
		t.Errorf("explanations %+v", ex)
	}
	html, _ := os.ReadFile(page)
	if !strings.Contains(string(html), "commonest pieces in ogbg_molhiv (pre-training data)") {
		t.Error("the page has no legend from the pre-training data")
	}
}

// A shipped model exported with its motifs is the shipped model in a file:
// its weights bit for bit, its description's name, provenance, data and
// legend as shipped (export --model --motifs used to be run by no test),
// and explain with the file says, row for row, what explain with the name
// says.
func TestShippedModelExportedWithItsMotifs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.pt")
	if code, _, errs := runCLI(t, "export", "--model", defaultModel, "--motifs", "--out", out); code != 0 {
		t.Fatalf("export --model --motifs: %s", errs)
	}
	shipped := filepath.Join("..", "..", "model", "zoo", defaultModel)
	var want, got model.MotifModelInfo
	readJSON(t, shipped+".json", &want)
	readJSON(t, model.MotifModelInfoPath(out), &got)
	if want.Name != defaultModel || len(want.Legend) == 0 {
		t.Fatalf("the shipped description: %+v", want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the exported description differs from the shipped one:\n%+v\nwant\n%+v", got, want)
	}
	a, _, err := torch.Load(shipped+".pt", torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(a)
	b, _, err := torch.Load(out, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(b)
	if len(a) != len(b) {
		t.Fatalf("%d tensors exported, %d shipped", len(b), len(a))
	}
	for i := range a {
		x, y := torch.ToSlice[float32](a[i].Tensor.ToDType(torch.Float32)), torch.ToSlice[float32](b[i].Tensor.ToDType(torch.Float32))
		if a[i].Name != b[i].Name || !slices.Equal(x, y) {
			t.Errorf("tensor %d: exported %s differs from the shipped %s", i, b[i].Name, a[i].Name)
		}
	}
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	byName, byFile := filepath.Join(dir, "name.jsonl"), filepath.Join(dir, "file.jsonl")
	for _, c := range [][]string{{defaultModel, byName}, {out, byFile}} {
		if code, _, errs := runCLI(t, "explain", "--model", c[0], "--data", in, "--out", c[1], "--threads", "1"); code != 0 {
			t.Fatalf("explain --model %s: %s", c[0], errs)
		}
	}
	x, _ := os.ReadFile(byName)
	y, _ := os.ReadFile(byFile)
	if len(x) == 0 || string(x) != string(y) {
		t.Errorf("explain with the exported file differs from explain with the name:\n%s\n%s", y, x)
	}
}
