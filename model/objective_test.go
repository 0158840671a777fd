package model_test

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Each objective's assignment head, which a motif model keeps and an
// explanation applies, registers exactly the tensors a pre-training
// checkpoint holds for it, under their names, and projects as the method
// says, computed here in float64 from those tensors alone: W_h h for the
// paper's (§3), W_2 GELU(W_1 h + b_1) for the released projection head
// (§12.2).
func TestAssignmentHeadFromItsTensors(t *testing.T) {
	for _, tc := range []struct {
		cfg   model.Config
		names []string
	}{
		{smallSynthConfig(), []string{"W_h.weight"}},
		{releasedConfig(model.SamplerSpectral), []string{"projection_head.0.bias", "projection_head.0.weight", "projection_head.2.weight"}},
	} {
		t.Run(tc.cfg.Objective(), func(t *testing.T) {
			scope(t)
			torch.ManualSeed(8)
			reader, err := model.AsMotifReader(tc.cfg.NewObjective())
			if err != nil {
				t.Fatal(err)
			}
			store := nn.NewStore(torch.CPU, torch.Float64)
			defer store.Free()
			head := reader.AssignmentHead(store.Root())
			tensors := map[string][][]float64{}
			for _, n := range store.State() {
				nn.Normal(n.Tensor, 0, 0.3) // a bias starts at 0, which would hide it
				if n.Tensor.Dim() == 1 {
					tensors[n.Name] = [][]float64{vector(n.Tensor)}
				} else {
					tensors[n.Name] = matrix(n.Tensor)
				}
			}
			if names := slices.Sorted(maps.Keys(tensors)); !slices.Equal(names, tc.names) {
				t.Fatalf("the head's tensors are %v, want %v", names, tc.names)
			}
			project := func(row []float64) []float64 { return linear(tensors["W_h.weight"], nil, row) }
			if tc.cfg.Objective() == model.ObjectiveReleased {
				project = func(row []float64) []float64 {
					z := linear(tensors["projection_head.0.weight"], tensors["projection_head.0.bias"][0], row)
					for i, v := range z {
						z[i] = v * 0.5 * (1 + math.Erf(v/math.Sqrt2))
					}
					return linear(tensors["projection_head.2.weight"], nil, z)
				}
			}
			d := int64(tc.cfg.Encoder.Hidden)
			h := torch.Empty([]int64{7, d}, torch.Options{DType: torch.Float64, Device: torch.CPU})
			nn.Normal(h, 0, 1)
			var want []float64
			for _, row := range matrix(h) {
				want = append(want, project(row)...)
			}
			got := head.Forward(h)
			if !slices.Equal(got.Shape(), []int64{7, d}) {
				t.Fatalf("shape %v, want 7×%d", got.Shape(), d)
			}
			assertClose(t, "projection", vector(got), want, 1e-12)
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
