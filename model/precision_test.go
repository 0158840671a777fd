package model_test

import (
	"math"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// With bfloat16 products (docs/method.md §13) everything of the step but the
// products stays float32: the node embeddings, the motif probabilities,
// Sinkhorn's matrix, the graph and subgraph embeddings, every loss, every
// gradient and the batch-norm statistics, under both objectives. The node
// embeddings of the same weights differ from float32's (the products really
// are bfloat16) by less than 2⁻⁵ of their norm. The losses are not compared:
// they go through discrete choices (Sinkhorn's targets, the subgraphs) that
// rounding may flip.
func TestBF16KeepsEverythingButTheProductsFloat32(t *testing.T) {
	if err := model.BF16.Check(testdevice.Get(t)); err != nil {
		t.Skipf("no bfloat16 products here: %v", err)
	}
	b := collate(t, bace(t), span(0, 64))
	for _, cfg := range []model.Config{model.DefaultConfig(), model.ReleasedModelConfig()} {
		t.Run(cfg.Objective(), func(t *testing.T) {
			scope(t)
			cfg = deterministic(cfg)
			cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 64, 2, 8
			torch.ManualSeed(1)
			m, err := model.New(cfg, testdevice.Get(t), torch.Float32)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			g := b.Graph(testdevice.Get(t))
			if err := model.FP32.Apply(m.Store); err != nil {
				t.Fatal(err)
			}
			want := m.Forward(g, false).H
			if err := model.BF16.Apply(m.Store); err != nil {
				t.Fatal(err)
			}
			out := m.Forward(g, false)
			named := map[string]*torch.Tensor{"H": out.H, "LogQ": out.LogQ, "Q": out.Q, "Sinkhorn": out.Balanced,
				"E": out.E, "S": out.S, "LogP": out.LogP, "total": out.Total}
			for _, p := range out.Parts {
				named[p.Name] = p.Tensor
			}
			for name, x := range named {
				if x != nil && x.DType() != torch.Float32 {
					t.Errorf("%s is %v in the bf16 step, want float32", name, x.DType())
				}
			}
			torch.ZeroGrad(m.Store.Parameters())
			out.Total.Backward()
			for _, v := range m.Store.Vars() {
				x := v.Tensor
				if v.Trainable {
					x = x.Grad()
				}
				if x != nil && x.DType() != torch.Float32 && x.DType() != torch.Int64 {
					t.Errorf("%s (or its gradient) is %v, want float32", v.Name, x.DType())
				}
			}
			rel := out.H.Sub(want).NormDim(2, 1, false).Sum().Item() / want.NormDim(2, 1, false).Sum().Item()
			t.Logf("relative difference of the node embeddings: %.3g", rel)
			if !(rel > 1e-5 && rel < 1.0/32) {
				t.Errorf("node embeddings in bf16 differ from float32's by %.3g of their norm, want (1e-5, 2⁻⁵)", rel)
			}
			if math.IsNaN(out.Total.Item()) {
				t.Error("the bf16 loss is NaN")
			}
		})
	}
}
