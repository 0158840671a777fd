package model_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// In bf16 (docs/method.md §13) the res+ block's last product is bfloat16
// like every other: the MLP's last Linear, which also adds the residual
// (nn.Linear.ForwardAdd, whose fused kernel computes in the weights' own
// dtype), takes a path of its own, and the tolerance of
// TestBF16KeepsEverythingButTheProductsFloat32 does not tell it apart when
// it alone runs in fp32. Each layer l ≥ 1's output is, bit for
// bit, its GENConv alone in bf16 on ReLU(BN(h_{l−1})) plus h_{l−1}, and
// differs from the same sum with that layer's products in fp32. In
// evaluation mode (running statistics, no dropout), so that each layer is
// recomputed from the one before, whose output the probe hands out; with a
// one-layer MLP (lin) and a two-layer one (its last Linear, mlp.3).
func TestBF16ResidualBlocksLastProduct(t *testing.T) {
	dev := testdevice.Get(t)
	if err := model.BF16.Check(dev); err != nil {
		t.Skipf("no bfloat16 products here: %v", err)
	}
	b := collate(t, synthMolecules(t, 32), span(0, 32))
	for _, mlp := range []int{1, 2} {
		t.Run(fmt.Sprintf("mlp_layers %d", mlp), func(t *testing.T) {
			scope(t)
			torch.ManualSeed(1)
			store := nn.NewStore(dev, torch.Float32)
			defer store.Free()
			enc := model.NewDeeperGCN(store.Root(), model.EncoderConfig{Hidden: 64, Layers: 3, MLPLayers: mlp, T: 1})
			defer enc.Free()
			g := b.Graph(dev)
			if err := model.BF16.Apply(store); err != nil {
				t.Fatal(err)
			}
			var hs []*torch.Tensor // each layer's output
			enc.Probe(g, model.ForwardProbe{NormInput: func(_ int, x *torch.Tensor) { hs = append(hs, x.Detach().Clone().Unscope()) }})
			defer func() {
				for _, h := range hs {
					h.Free()
				}
			}()
			if len(hs) != 3 {
				t.Fatalf("%d layers' outputs, want 3", len(hs))
			}
			torch.NoGrad(func() {
				for l := 1; l < 3; l++ {
					in := enc.Norms[l-1].Forward(hs[l-1], false).Relu()
					bf16 := vector(model.ConvForward(enc, l, in, g).Add(hs[l-1]))
					if err := model.FP32.Apply(store); err != nil {
						t.Fatal(err)
					}
					fp32 := vector(model.ConvForward(enc, l, in, g).Add(hs[l-1]))
					if err := model.BF16.Apply(store); err != nil {
						t.Fatal(err)
					}
					got := vector(hs[l])
					if !slices.Equal(got, bf16) {
						t.Errorf("layer %d: its output is not its GENConv in bf16 plus the residual", l)
					}
					if slices.Equal(got, fp32) {
						t.Errorf("layer %d: its output is its GENConv in fp32 plus the residual", l)
					}
				}
			})
		})
	}
}
