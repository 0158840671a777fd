package model_test

import (
	"slices"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// A probe in each mode gives Forward's embeddings for that mode, sees every
// norm's input, and leaves the running statistics as they were.
func TestProbeMatchesForward(t *testing.T) {
	scope(t)
	b := collate(t, bace(t), span(0, 24))
	torch.ManualSeed(3)
	cfg := model.DefaultEncoderConfig()
	cfg.Hidden, cfg.Layers, cfg.Dropout = 16, 3, 0
	m, err := model.New(model.Config{Encoder: cfg, Motifs: 4, Tau: 0.1, SinkhornLambda: 20, Eta: 2, Sampler: model.SamplerMotif}, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	g := b.Graph(testdevice.Get(t))
	// Move the running statistics away from 0 and 1 first.
	m.Encoder.Forward(g, true)
	before := vector(m.Encoder.Norms[1].RunningMean)

	var seen []int
	eval := m.Encoder.Probe(g, model.ForwardProbe{NormInput: func(l int, x *torch.Tensor) {
		if x.Size(0) != g.NumNodes || x.Size(1) != int64(cfg.Hidden) {
			t.Errorf("norm %d input of shape %v", l, x.Shape())
		}
		seen = append(seen, l)
	}})
	batch := m.Encoder.Probe(g, model.ForwardProbe{BatchStats: true})
	if len(seen) != cfg.Layers || seen[0] != 0 || seen[cfg.Layers-1] != cfg.Layers-1 {
		t.Errorf("norm inputs seen for layers %v, want 0…%d", seen, cfg.Layers-1)
	}
	after := vector(m.Encoder.Norms[1].RunningMean)
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("running mean %d moved from %v to %v during probes", i, before[i], after[i])
		}
	}
	compareMatrix(t, "eval probe", matrix(eval), matrix(m.Encoder.Forward(g, false)), 1e-12)
	compareMatrix(t, "batch-statistics probe", matrix(batch), matrix(m.Encoder.Forward(g, true)), 1e-12)
	if d := eval.Sub(batch).Abs().Max().Item(); d < 1e-3 {
		t.Errorf("batch statistics changed the embeddings by only %g", d)
	}
}

// Combinations enumerates feature values with the last varying fastest, and
// Index finds a row's combination; embedding All and looking rows up gives
// the rows' own embeddings.
func TestCombinations(t *testing.T) {
	scope(t)
	c := model.NewCombinations([]int64{2, 3}, testdevice.Get(t))
	defer c.Free()
	if got, want := torch.ToSlice[int64](c.All), []int64{0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2}; !slices.Equal(got, want) || c.All.Size(0) != 6 {
		t.Errorf("All: %v (%v), want %v", got, c.All.Shape(), want)
	}
	x := torch.FromSlice([]int64{1, 2, 0, 1, 1, 0}, 3, 2).To(testdevice.Get(t), false)
	if got, want := torch.ToSlice[int64](c.Index(x)), []int64{5, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("Index: %v, want %v", got, want)
	}
	enc := model.NewFeatureEncoder(nn.NewStore(testdevice.Get(t), torch.Float64).Root(), []int64{2, 3}, 4)
	defer enc.Free()
	direct, looked := matrix(enc.Forward(x)), matrix(enc.Forward(c.All).IndexSelect(0, c.Index(x)))
	for i := range direct {
		if !slices.Equal(direct[i], looked[i]) {
			t.Errorf("row %d: embedded %v, looked up %v", i, direct[i], looked[i])
		}
	}
}
