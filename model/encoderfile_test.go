package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// An exported encoder loads back as saved; a description edited to say
// something the weights were not made for (another pooling, other feature
// vocabularies, other sizes) is refused, naming the file and the field,
// where it used to be ignored. Sizes are compared with the weights' shapes
// before any model is built: "layers": 1000000 or "hidden": 46341 used to
// have the caller build that model (gigabytes, in 15–30 s) before the
// weights were compared with it.
func TestLoadEncoderRefusesAContradictingDescription(t *testing.T) {
	scope(t)
	cfg := model.EncoderConfig{Hidden: 8, Layers: 1, MLPLayers: 1, T: 1}
	m, err := model.New(model.Config{Encoder: cfg, Motifs: 2, Tau: 0.1, SinkhornLambda: 20, SinkhornIters: 1, Eta: 1,
		Alpha: 0.5, LambdaNode: 1, LambdaSub: 1, Sampler: model.SamplerMotif, SubgraphsPerGraph: 1}, testdevice.Get(t), torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	path := filepath.Join(t.TempDir(), "enc.pt")
	if err := model.SaveEncoder(path, cfg, m.EncoderState(), "test", 0); err != nil {
		t.Fatal(err)
	}
	info, state, err := model.LoadEncoder(path)
	if err != nil || info.Encoder != cfg || len(state) == 0 {
		t.Fatalf("the saved encoder: %+v, %d tensors, %v", info.Encoder, len(state), err)
	}
	torch.FreeNamed(state)
	original, err := os.ReadFile(model.EncoderInfoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	edits := []struct {
		field string
		value any
		want  string
	}{
		{"pool", "max", `pool "max": micrograph encoders read out by the mean`},
		{"atom_feature_dims", []int{119, 5, 12, 12, 10, 6, 6, 2, 3}, "atom_feature_dims [119 5 12 12 10 6 6 2 3], but the featurisation's vocabularies are [119 5 12 12 10 6 6 2 2]"},
		{"bond_feature_dims", []int{5, 6}, "bond_feature_dims [5 6], but"},
		{"encoder", map[string]any{"hidden": 46341, "layers": 1, "mlp_layers": 1, "t": 1},
			"enc.json: hidden 46341 differs from the weights, which are 8 wide (atom_encoder.embeddings.0.weight is [119 8]) (the weights: "},
		{"encoder", map[string]any{"hidden": 8, "layers": 1000000, "mlp_layers": 1, "t": 1},
			"enc.json: layers 1000000 differs from the weights, which have 1 (norms.0 … norms.0)"},
		{"encoder", map[string]any{"hidden": 8, "layers": 1, "mlp_layers": 1000, "t": 1},
			"enc.json: mlp_layers 1000 differs from the weights, which have 1 in convs.0"},
		{"encoder", map[string]any{"hidden": 0, "layers": 1, "mlp_layers": 1, "t": 1}, "enc.json: hidden 0 must be positive"},
		{"encoder", map[string]any{"hidden": 8, "layers": 1, "mlp_layers": 1, "t": 1, "learn_t": true},
			"enc.json: learn_t true differs from the weights, which hold no convs.0.t (the weights: "},
		{"encoder", map[string]any{"hidden": 8, "layers": 1, "mlp_layers": 1, "t": 1, "bond_per_layer": true},
			"enc.json: bond_per_layer true differs from the weights, which hold no convs.0.bond_encoder.embeddings.0.weight (the weights: "},
	}
	for _, e := range edits {
		var desc map[string]any
		if err := json.Unmarshal(original, &desc); err != nil {
			t.Fatal(err)
		}
		desc[e.field] = e.value
		b, _ := json.Marshal(desc)
		if err := os.WriteFile(model.EncoderInfoPath(path), b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, state, err := model.LoadEncoder(path)
		torch.FreeNamed(state)
		if err == nil || !strings.Contains(err.Error(), e.want) || !strings.Contains(err.Error(), "enc.json") {
			t.Errorf("%s edited: %v, want %q", e.field, err, e.want)
		}
	}
}
