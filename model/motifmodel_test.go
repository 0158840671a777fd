package model_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// A motif model loaded from a pre-training model's state assigns atoms as
// that model does (docs/method.md §14): under the paper's objective,
// softmax_k(cos(W_h h, M_k)/τ) of its cosines is the training objective's
// Q in evaluation mode; under the released one, its cosines are
// cos(projection_head(h), M) computed from the model's own modules. The
// check is in float64 against values the pre-training model computes.
func TestMotifModelAssignsAsThePretrainingModel(t *testing.T) {
	ds := synthDataset(t, 40)
	for _, objective := range []string{model.ObjectivePaper, model.ObjectiveReleased} {
		t.Run(objective, func(t *testing.T) {
			scope(t)
			cfg := model.DefaultConfig()
			if objective == model.ObjectiveReleased {
				cfg = model.ReleasedModelConfig()
			}
			cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 24, 2, 6
			torch.ManualSeed(11)
			pre, err := model.New(cfg, torch.CPU, torch.Float32)
			if err != nil {
				t.Fatal(err)
			}
			defer pre.Free()
			mm, err := model.NewMotifModel(cfg, torch.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Free()
			if err := mm.Load(pre.Store.State()); err != nil {
				t.Fatal(err)
			}
			g := collate(t, ds, span(0, 30)).Graph(torch.CPU)
			var got, want []float64
			torch.NoGrad(func() {
				cos := mm.Cosines(g)
				if objective == model.ObjectivePaper {
					got = vector(cos.DivScalar(cfg.Tau).Softmax(1))
					want = vector(pre.Objective.(*model.PaperObjective).Assign(g, false).Q)
					return
				}
				got = vector(cos)
				h := pre.Encoder.Forward(g, false)
				want = cosines(matrix(pre.Objective.(*model.ReleasedObjective).Head.Forward(h)), matrix(pre.Motifs))
			})
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 2e-6 {
					t.Fatalf("value %d: %v, the pre-training model's %v", i, got[i], want[i])
				}
			}
		})
	}
}

// cosines is the matrix of cosines between the rows of a and b, in float64.
func cosines(a, b [][]float64) []float64 {
	norm := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x * x
		}
		return max(math.Sqrt(s), 1e-12)
	}
	var out []float64
	for _, x := range a {
		for _, y := range b {
			var dot float64
			for i := range x {
				dot += x[i] * y[i]
			}
			out = append(out, dot/norm(x)/norm(y))
		}
	}
	return out
}

// A motif model file holds exactly the motif model's tensors under the
// pre-training model's names, reads back bit for bit with its description
// (legend included), and serves as an encoder file: LoadEncoder gives its
// encoder's tensors without the prefix. Names that are no shipped model's
// are refused, naming the known ones.
func TestMotifModelFile(t *testing.T) {
	scope(t)
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 16, 2, 4
	torch.ManualSeed(5)
	pre, err := model.New(cfg, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Free()
	mm, err := model.NewMotifModel(cfg, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Free()
	if err := mm.Load(pre.Store.State()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.pt")
	legend := []model.MotifUsage{{Motif: 0, Atoms: 12, Fragments: []model.FragmentCount{{SMILES: "c1ccccc1", Count: 2}}}}
	if err := model.SaveMotifModel(path, mm, model.MotifModelInfo{Name: "test-v0", Source: "here", Step: 7, Data: "synth", Legend: legend}); err != nil {
		t.Fatal(err)
	}
	back, info, err := model.LoadMotifModel(path, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Free()
	var keys []string
	for _, n := range back.Store.State() {
		keys = append(keys, n.Name)
	}
	if slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "W_s") || strings.HasPrefix(k, "W_e") }) ||
		!slices.Contains(keys, "W_h.weight") || !slices.Contains(keys, "motif_embeddings") || !slices.Equal(keys, info.Keys) {
		t.Errorf("keys %v (description %v): want the encoder, motif_embeddings and W_h.weight only", keys, info.Keys)
	}
	if info.Name != "test-v0" || info.Step != 7 || info.Model.Motifs != 4 || len(info.Legend) != 1 || info.Legend[0].Fragments[0].SMILES != "c1ccccc1" {
		t.Errorf("description %+v", info)
	}
	want := map[string][]float64{}
	for _, n := range pre.Store.State() {
		want[n.Name] = vector(n.Tensor)
	}
	for _, n := range back.Store.State() {
		if !slices.Equal(vector(n.Tensor), want[n.Name]) {
			t.Errorf("%s differs after the round trip", n.Name)
		}
	}
	encInfo, enc, err := model.LoadEncoder(path)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(enc)
	if encInfo.Encoder != cfg.Encoder {
		t.Errorf("encoder configuration %+v, want %+v", encInfo.Encoder, cfg.Encoder)
	}
	for _, n := range enc {
		if !slices.Equal(vector(n.Tensor), want["encoder."+n.Name]) {
			t.Errorf("encoder tensor %s differs from the model's", n.Name)
		}
	}
	if len(enc) != len(model.EncoderTensors(pre.Store.State())) {
		t.Errorf("%d encoder tensors, want %d", len(enc), len(model.EncoderTensors(pre.Store.State())))
	}
	for _, ref := range []string{"micrograph-nonesuch-v9", "molhiv"} {
		_, _, err := model.LoadEncoder(ref)
		var unknown *model.UnknownModelError
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), strings.Join(model.ShippedModels(), ", ")) {
			t.Errorf("LoadEncoder(%q): %v, want an unknown-model error listing the known ones", ref, err)
		}
	}
}
