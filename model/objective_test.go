package model_test

import (
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// NodeMotifCosines is, for each objective, the cosine between each node's
// assignment projection and each motif, computed here in float64 from the
// tensors AssignmentTensors names and nothing else: cos(W_h h, M) for the
// paper's, cos(W_2 GELU(W_1 h + b_1), M) for the released projection head.
func TestNodeMotifCosinesFromAssignmentTensors(t *testing.T) {
	ds := synthMolecules(t, 16)
	for _, cfg := range []model.Config{smallSynthConfig(), releasedConfig(model.SamplerSpectral)} {
		t.Run(cfg.Objective(), func(t *testing.T) {
			scope(t)
			torch.ManualSeed(8)
			m, err := model.New(cfg, torch.CPU, torch.Float64)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			tensors := map[string][][]float64{}
			for _, name := range m.Objective.AssignmentTensors() {
				x := m.Store.Get(name)
				if x == nil {
					t.Fatalf("AssignmentTensors names %s, which the model lacks", name)
				}
				if x.Dim() == 1 {
					tensors[name] = [][]float64{vector(x)}
				} else {
					tensors[name] = matrix(x)
				}
			}
			h := m.Encoder.Forward(collate(t, ds, span(0, 6)).Graph(torch.CPU), false)
			project := func(row []float64) []float64 { return linear(tensors["W_h.weight"], nil, row) }
			if cfg.Objective() == model.ObjectiveReleased {
				project = func(row []float64) []float64 {
					z := linear(tensors["projection_head.0.weight"], tensors["projection_head.0.bias"][0], row)
					for i, v := range z {
						z[i] = v * 0.5 * (1 + math.Erf(v/math.Sqrt2))
					}
					return linear(tensors["projection_head.2.weight"], nil, z)
				}
			}
			var want []float64
			for _, row := range matrix(h) {
				z := project(row)
				for _, motif := range tensors["motif_embeddings"] {
					want = append(want, cosine(z, motif))
				}
			}
			got := m.Objective.NodeMotifCosines(h)
			if !slices.Equal(got.Shape(), []int64{h.Size(0), int64(cfg.Motifs)}) {
				t.Fatalf("shape %v, want N×K = %d×%d", got.Shape(), h.Size(0), cfg.Motifs)
			}
			assertClose(t, "cosines", vector(got), want, 1e-12)
		})
	}
}

// linear is w·x + b (b nil: none), w out×in.
func linear(w [][]float64, b, x []float64) []float64 {
	out := make([]float64, len(w))
	for i, row := range w {
		for j, v := range row {
			out[i] += v * x[j]
		}
		if b != nil {
			out[i] += b[i]
		}
	}
	return out
}
