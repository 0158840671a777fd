package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// readmeSnippet is the PyTorch code of docs/pytorch.md, between its markers.
func readmeSnippet(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "docs", "pytorch.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- pytorch-snippet -->")
	block, _, ok2 := strings.Cut(rest, "<!-- end pytorch-snippet -->")
	if !ok || !ok2 {
		t.Fatal("docs/pytorch.md has no pytorch-snippet markers")
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```python")
	return strings.TrimSuffix(block, "```")
}

// goEmbeddings are the graph embeddings of a batch from an exported encoder,
// computed by micrograph's own model in evaluation mode.
func goEmbeddings(t *testing.T, path string, b *feed.Batch) [][]float64 {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	info, state, err := model.LoadEncoder(path)
	if err != nil {
		t.Fatal(err)
	}
	store := nn.NewStore(torch.CPU, torch.Float32)
	defer store.Free()
	enc := model.NewDeeperGCN(store.Root(), info.Encoder)
	defer enc.Free()
	if err := torch.LoadState(store.State(), state); err != nil {
		t.Fatal(err)
	}
	g := b.Graph(torch.CPU)
	e := ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)
	flat := torch.ToSlice[float32](e)
	d := int(e.Size(1))
	out := make([][]float64, b.NumGraphs())
	for i := range out {
		for _, v := range flat[i*d : (i+1)*d] {
			out[i] = append(out[i], float64(v))
		}
	}
	return out
}

// The PyTorch snippet of docs/pytorch.md, run by the machine's PyTorch on an exported
// encoder, gives the graph embeddings micrograph gives (to 1e-5), for the
// default architecture and for one with every option switched.
func TestReadmeSnippetMatchesGo(t *testing.T) {
	py := testenv.Python(t, "torch")
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 120, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	ds, _, err := data.Load(synth, data.LoadOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var b feed.Batch
	if err := feed.Collate(ds, []int32{0, 1, 2, 3, 4, 5}, &b); err != nil {
		t.Fatal(err)
	}
	inputs, _ := json.Marshal(map[string]any{
		"x": b.X, "src": b.EdgeSrc, "dst": b.EdgeDst, "edge_attr": b.EdgeAttr, "batch": b.NodeGraph,
	})
	harness := `
import sys
inp = json.load(open(sys.argv[2]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
with torch.no_grad():
    e = graph_embeddings(load_encoder(sys.argv[1]), x, edge_index, edge_attr, torch.tensor(inp["batch"]))
print(json.dumps(e.tolist()))
`
	script := filepath.Join(dir, "snippet.py")
	if err := os.WriteFile(script, []byte(readmeSnippet(t)+harness), 0o644); err != nil {
		t.Fatal(err)
	}
	inputPath := filepath.Join(dir, "inputs.json")
	os.WriteFile(inputPath, inputs, 0o644)

	for i, extra := range [][]string{nil, {"--learn-t", "--t", "0.8", "--mlp-layers", "2", "--bond-per-layer"}} {
		run := filepath.Join(dir, "run"+string(rune('a'+i)))
		args := append([]string{"pretrain", "--data", synth, "--run", run, "--hidden", "16", "--layers", "3",
			"--motifs", "6", "--batch-size", "16", "--epochs", "1", "--device", "cpu", "--threads", "1"}, extra...)
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Fatalf("pretrain: %s", errs)
		}
		encoder := filepath.Join(dir, "encoder"+string(rune('a'+i))+".pt")
		if code, out, errs := runCLI(t, "export", "--run", run, "--out", encoder); code != 0 || !strings.Contains(out, encoder) {
			t.Fatalf("export: %s %s", out, errs)
		}
		out, err := py.Command(script, encoder, inputPath).CombinedOutput()
		if err != nil {
			t.Fatalf("the docs/pytorch.md snippet failed: %v\n%s", err, out)
		}
		var theirs [][]float64
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &theirs); err != nil {
			t.Fatalf("snippet output %q: %v", out, err)
		}
		ours := goEmbeddings(t, encoder, &b)
		worst := 0.0
		for g := range ours {
			for j := range ours[g] {
				worst = max(worst, math.Abs(ours[g][j]-theirs[g][j])/math.Max(1, math.Abs(ours[g][j])))
			}
		}
		t.Logf("options %v: largest difference %.2g over %d×%d embeddings", extra, worst, len(ours), len(ours[0]))
		if worst > 1e-5 {
			t.Errorf("options %v: PyTorch and Go embeddings differ by %g", extra, worst)
		}
	}
}

// An exported encoder's description names its tensors ("keys") as its
// weights file holds them, in the file's order, with PyTorch's state_dict
// names (no "encoder." prefix, which a checkpoint's names carry): exported
// from a run and from the shipped model, each read back with torch.Load
// and with model.LoadEncoder, which gives the tensors under those names.
// The shipped model loaded by name describes the same keys as its exported
// file.
func TestExportedEncoderNamesItsTensors(t *testing.T) {
	dir := t.TempDir()
	run, _ := tinyRun(t, dir)
	fromRun, fromModel := filepath.Join(dir, "run-encoder.pt"), filepath.Join(dir, "model-encoder.pt")
	for _, args := range [][]string{{"export", "--run", run, "--out", fromRun}, {"export", "--model", defaultModel, "--out", fromModel}} {
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: status %d, %s", strings.Join(args[:2], " "), code, errs)
		}
	}
	names := func(state []torch.Named) []string {
		var out []string
		for _, n := range state {
			out = append(out, n.Name)
		}
		torch.FreeNamed(state)
		return out
	}
	described := map[string][]string{}
	for _, ref := range []string{fromRun, fromModel, defaultModel} {
		info, state, err := model.LoadEncoder(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		loaded := names(state)
		if len(loaded) == 0 || !slices.Equal(info.Keys, loaded) {
			t.Errorf("%s: described keys %q, loaded tensors %q", ref, info.Keys, loaded)
		}
		for _, k := range info.Keys {
			if strings.HasPrefix(k, "encoder.") {
				t.Errorf("%s: key %q is a checkpoint's name, not the encoder file's", ref, k)
				break
			}
		}
		described[ref] = info.Keys
		if ref == defaultModel {
			continue
		}
		var desc struct {
			Keys []string `json:"keys"`
		}
		b, err := os.ReadFile(model.EncoderInfoPath(ref))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &desc); err != nil {
			t.Fatal(err)
		}
		state, _, err = torch.Load(ref, torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if held := names(state); !slices.Equal(desc.Keys, held) {
			t.Errorf("%s: encoder.json's keys %q, the file's tensors %q", ref, desc.Keys, held)
		}
	}
	if !slices.Equal(described[fromModel], described[defaultModel]) {
		t.Errorf("the shipped model's keys %q, its exported file's %q", described[defaultModel], described[fromModel])
	}
}
