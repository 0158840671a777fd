package model_test

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/model/internal/reference"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// The libtorch path, in float64, agrees with the independent plain-Go
// reference on one real batch of ogbg-molbace at the paper's sizes: every
// intermediate to 1e-6 relative (Sinkhorn's float32 matrix to 1e-5), the
// subgraphs exactly.
func TestMatchesReference(t *testing.T) {
	scope(t)
	ds := bace(t)
	b := collate(t, ds, span(0, 48))
	torch.ManualSeed(11)
	cfg := deterministic(model.DefaultConfig())
	m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	out := m.Forward(b.Graph(testdevice.Get(t)), true)
	ref, err := reference.Forward(referenceWeights(t, m), referenceBatch(b), referenceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	compareMatrix(t, "H", matrix(out.H), ref.H, 1e-6)
	compareMatrix(t, "E", matrix(out.E), ref.E, 1e-6)
	compareMatrix(t, "Q", matrix(out.LogQ.Exp()), ref.Q, 1e-6)
	a := make([][]float64, len(ref.SinkhornA))
	for i, row := range ref.SinkhornA {
		for _, v := range row {
			a[i] = append(a[i], float64(v))
		}
	}
	compareMatrix(t, "Sinkhorn A", matrix(out.Balanced), a, 1e-5)
	motif := torch.ToSlice[int64](out.Motif)
	for l, k := range ref.Motif {
		if motif[l] != int64(k) {
			t.Fatalf("node %d: motif %d, reference %d", l, motif[l], k)
		}
	}
	slots, members := liveSubgraphs(out.Subgraphs)
	if len(slots) != len(ref.Subgraphs) {
		t.Fatalf("%d subgraphs, reference %d", len(slots), len(ref.Subgraphs))
	}
	k := int64(cfg.Motifs)
	for j, s := range ref.Subgraphs {
		if slots[j] != int64(s.Graph)*k+int64(s.Motif) || !slices.Equal(members[j], s.Nodes) {
			t.Errorf("subgraph %d: slot %d members %v, reference graph %d motif %d members %v", j, slots[j], members[j], s.Graph, s.Motif, s.Nodes)
		}
	}
	compareMatrix(t, "S", matrix(out.S), ref.S, 1e-6)
	compareMatrix(t, "P", matrix(out.LogP.Exp()), ref.P, 1e-6)
	for _, part := range []struct {
		name      string
		got, want float64
	}{
		{"node_mot", out.Part("node_mot").Item(), ref.NodeMot},
		{"mot_sub", out.Part("mot_sub").Item(), ref.MotSub},
		{"reg", out.Part("reg").Item(), ref.Reg},
		{"contra", out.Part("contra").Item(), ref.Contra},
		{"total", out.Total.Item(), ref.Total},
	} {
		if !closeRel(part.got, part.want, 1e-6) {
			t.Errorf("%s = %.12g, reference %.12g", part.name, part.got, part.want)
		}
	}
	if n := out.Subgraphs.Count().ItemInt(); n != int64(len(ref.Subgraphs)) || n == 0 {
		t.Errorf("Count = %d, reference %d", n, len(ref.Subgraphs))
	}
	t.Logf("%d atoms, %d subgraphs; losses node_mot %.6f mot_sub %.6f reg %.6f contra %.6f total %.6f",
		b.NumAtoms(), len(ref.Subgraphs), ref.NodeMot, ref.MotSub, ref.Reg, ref.Contra, ref.Total)
}

// pinStops records every stop-gradient value on the first pass and replays
// it afterwards, so that finite differences see the cut values as constants,
// exactly as autograd does.
func pinStops(t *testing.T, m *model.MicroGraph) (replay func()) {
	pins := map[string]*torch.Tensor{}
	t.Cleanup(func() {
		for _, p := range pins {
			p.Free()
		}
	})
	recording := true
	model.SetStopGradient(m, func(name string, x *torch.Tensor) *torch.Tensor {
		if recording {
			// Owned by the test: the model frees its layers' temporaries early.
			pins[name] = x.Detach().Clone().Unscope()
			return x.Detach()
		}
		return pins[name]
	})
	return func() { recording = false }
}

// The gradient of the total loss agrees with float64 central differences for
// samples of every parameter tensor, honouring the cuts of §2–§3.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	ds := bace(t)
	b := collate(t, ds, span(100, 106))
	small := deterministic(model.DefaultConfig())
	small.Encoder.Hidden, small.Encoder.Layers, small.Motifs, small.Eta = 8, 2, 4, 2
	variant := small
	variant.Encoder.LearnT, variant.Encoder.MLPLayers, variant.Encoder.BondPerLayer, variant.OrthoSelected = true, 2, true, true
	variant.Encoder.T = 0.7
	for _, tc := range []struct {
		name string
		cfg  model.Config
	}{{"fixed t", small}, {"learned t, deeper MLP, bond encoder per layer, selected ortho", variant}} {
		t.Run(tc.name, func(t *testing.T) {
			checkGradients(t, tc.cfg, b.Graph(testdevice.Get(t)), 5, rand.New(rand.NewPCG(1, 9)))
		})
	}
}

// The cuts of §3: M learns nothing from L_node-mot; the encoder and W_h (and
// W_e) learn nothing from L_mot-sub.
func TestLossPartsReachOnlyTheirParameters(t *testing.T) {
	scope(t)
	ds := bace(t)
	b := collate(t, ds, span(0, 16))
	cfg := deterministic(model.DefaultConfig())
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Eta = 16, 2, 2
	m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	g := b.Graph(testdevice.Get(t))
	gradNorm := func(name string) float64 {
		gt := m.Store.Get(name).Grad()
		if gt == nil {
			return 0
		}
		return gt.Abs().Sum().Item()
	}
	params := m.Store.Parameters()

	torch.ZeroGrad(params)
	m.Forward(g, true).Part("node_mot").Backward()
	if n := gradNorm("motif_embeddings"); n != 0 {
		t.Errorf("L_node-mot reached M: |grad| = %g", n)
	}
	if gradNorm("W_h.weight") == 0 || gradNorm("encoder.convs.0.lin.weight") == 0 {
		t.Error("L_node-mot did not reach W_h and the encoder")
	}

	torch.ZeroGrad(params)
	m.Forward(g, true).Part("mot_sub").Backward()
	for _, v := range m.Store.Trainable() {
		n := gradNorm(v.Name)
		learns := v.Name == "motif_embeddings" || v.Name == "W_s.weight"
		if learns && n == 0 {
			t.Errorf("L_mot-sub did not reach %s", v.Name)
		}
		if !learns && n != 0 {
			t.Errorf("L_mot-sub reached %s: |grad| = %g", v.Name, n)
		}
	}
}

// With ContrastDetached, L_contra trains the encoder through the graph
// embeddings only: its gradients equal those of the contrast recomputed here
// against a constant copy of the subgraph embeddings, and differ from the
// default's, where the gradient also flows through the subgraphs.
func TestContrastDetachedCutsSubgraphs(t *testing.T) {
	scope(t)
	ds := bace(t)
	b := collate(t, ds, span(0, 16))
	cfg := deterministic(model.DefaultConfig())
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Eta = 16, 2, 2
	contraGrads := func(detached, byHand bool) []float64 {
		c := cfg
		c.ContrastDetached = detached
		torch.ManualSeed(3)
		m, err := model.New(c, testdevice.Get(t), torch.Float64)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		g := b.Graph(testdevice.Get(t))
		out := m.Forward(g, true)
		loss := out.Part("contra")
		if byHand {
			loss = ops.GraphSubgraphContrast(m.Objective.(*model.PaperObjective).We.Forward(out.E), out.S.Detach(), out.Subgraphs, c.Tau, nil)
		}
		loss.Backward()
		var grads []float64
		for _, v := range m.Store.Trainable() {
			if strings.HasPrefix(v.Name, "encoder.") && v.Tensor.Grad() != nil {
				grads = append(grads, vector(v.Tensor.Grad())...)
			}
		}
		return grads
	}
	detached, byHand, flowing := contraGrads(true, false), contraGrads(false, true), contraGrads(false, false)
	if len(detached) == 0 || len(detached) != len(byHand) || len(detached) != len(flowing) {
		t.Fatalf("gradient sizes %d, %d, %d", len(detached), len(byHand), len(flowing))
	}
	differs := false
	for i := range detached {
		if !closeRel(detached[i], byHand[i], 1e-12) {
			t.Fatalf("encoder gradient %d: detached %g, by hand %g", i, detached[i], byHand[i])
		}
		differs = differs || !closeRel(detached[i], flowing[i], 1e-6)
	}
	if !differs {
		t.Error("cutting the subgraph embeddings changed no encoder gradient")
	}
}

// A training step reads nothing back from the device.
func TestStepMakesNoHostReads(t *testing.T) {
	scope(t)
	ds := bace(t)
	b := collate(t, ds, span(0, 64))
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden = 32
	for _, sampler := range []string{model.SamplerMotif, model.SamplerRandomWalk, model.SamplerKHop} {
		cfg.Sampler = sampler
		m, err := model.New(cfg, testdevice.Get(t), torch.Float32)
		if err != nil {
			t.Fatal(err)
		}
		g := b.Graph(testdevice.Get(t))
		before := torch.HostReads()
		out := m.Forward(g, true)
		torch.ZeroGrad(m.Store.Parameters())
		out.Total.Backward()
		if n := torch.HostReads() - before; n != 0 {
			t.Errorf("%s: the step read the device %d times", sampler, n)
		}
		m.Free()
	}
}

// tiny builds an in-memory dataset of hand-made molecules (atom features all
// carbon-like, bonds single).
func tiny(atoms []int, bonds [][][2]int32) *data.Dataset {
	d := &data.Dataset{Name: "tiny", NodePtr: []int64{0}, BondPtr: []int64{0}}
	for g, n := range atoms {
		for range n {
			d.AtomFeat = append(d.AtomFeat, 5, 0, 2, 5, 1, 0, 2, 0, 0)
		}
		for _, bd := range bonds[g] {
			d.BondAtoms = append(d.BondAtoms, bd[0], bd[1])
			d.BondFeat = append(d.BondFeat, 0, 0, 0)
		}
		d.NodePtr = append(d.NodePtr, d.NodePtr[g]+int64(n))
		d.BondPtr = append(d.BondPtr, d.BondPtr[g]+int64(len(bonds[g])))
	}
	return d
}

// Degenerate batches give finite losses and gradients.
func TestDegenerateBatchesStayFinite(t *testing.T) {
	chain := [][2]int32{{0, 1}, {1, 2}, {2, 3}, {3, 4}}
	tests := []struct {
		name  string
		ds    *data.Dataset
		tweak func(*model.Config)
	}{
		{"one atom", tiny([]int{1}, [][][2]int32{nil}), nil},
		{"no bonds", tiny([]int{3, 2}, [][][2]int32{nil, nil}), nil},
		{"no slot reaches eta", tiny([]int{5, 1}, [][][2]int32{chain, nil}), func(c *model.Config) { c.Eta = 100 }},
		{"every atom one motif", tiny([]int{5, 5}, [][][2]int32{chain, chain}), func(c *model.Config) { c.Motifs = 1 }},
		{"more motifs than atoms", tiny([]int{5, 2}, [][][2]int32{chain, {{0, 1}}}), func(c *model.Config) { c.Motifs = 50 }},
		{"one atom, random walks", tiny([]int{1, 2}, [][][2]int32{nil, {{0, 1}}}), func(c *model.Config) { c.Sampler = model.SamplerRandomWalk }},
		{"no bonds, k-hop", tiny([]int{1, 2}, [][][2]int32{nil, nil}), func(c *model.Config) { c.Sampler = model.SamplerKHop }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scope(t)
			cfg := model.DefaultConfig()
			cfg.Encoder.Hidden = 16
			if tc.tweak != nil {
				tc.tweak(&cfg)
			}
			m, err := model.New(cfg, testdevice.Get(t), torch.Float32)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			b := collate(t, tc.ds, tc.ds.All())
			for _, train := range []bool{true, false} {
				out := m.Forward(b.Graph(testdevice.Get(t)), train)
				for _, n := range out.Losses.Named() {
					if v := n.Tensor.Item(); math.IsNaN(v) || math.IsInf(v, 0) {
						t.Errorf("train=%v: %s = %v", train, n.Name, v)
					}
				}
				if train {
					torch.ZeroGrad(m.Store.Parameters())
					out.Total.Backward()
					for _, v := range m.Store.Trainable() {
						if gt := v.Tensor.Grad(); gt != nil && gt.IsFinite().All().ItemInt() != 1 {
							t.Errorf("%s has a non-finite gradient", v.Name)
						}
					}
				}
			}
		})
	}
}

// Tensor names follow PyTorch conventions (docs/run-folder.md lists them).
func TestParameterNames(t *testing.T) {
	scope(t)
	cfg := model.DefaultConfig()
	cfg.Encoder.Layers = 2
	m, err := model.New(cfg, testdevice.Get(t), torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	var got []string
	for _, v := range m.Store.Vars() {
		got = append(got, v.Name)
	}
	var want []string
	for f := range 9 {
		want = append(want, "encoder.atom_encoder.embeddings."+string(rune('0'+f))+".weight")
	}
	for f := range 3 {
		want = append(want, "encoder.bond_encoder.embeddings."+string(rune('0'+f))+".weight")
	}
	for l := range 2 {
		want = append(want, "encoder.convs."+string(rune('0'+l))+".lin.weight", "encoder.convs."+string(rune('0'+l))+".lin.bias")
	}
	for l := range 2 {
		p := "encoder.norms." + string(rune('0'+l)) + "."
		want = append(want, p+"weight", p+"bias", p+"running_mean", p+"running_var", p+"num_batches_tracked")
	}
	want = append(want, "motif_embeddings", "W_h.weight", "W_s.weight", "W_e.weight")
	if !slices.Equal(got, want) {
		t.Errorf("names:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	enc := m.EncoderState()
	if enc[0].Name != "atom_encoder.embeddings.0.weight" || len(enc) != len(want)-4 {
		t.Errorf("encoder state starts %q, has %d entries", enc[0].Name, len(enc))
	}
}

// rss is the process's resident set size in kB.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Training the real model — every fused kernel and custom backward — holds
// no memory across steps: handles constant, RSS flat after warm-up. (A
// custom function that keeps its own output alive leaks the whole graph.)
func TestTrainingStepsHoldNoMemory(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ds := tiny([]int{6, 5, 7, 4}, [][][2]int32{
		{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 0}}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}},
		{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}, {{0, 1}, {1, 2}, {2, 3}},
	})
	b := collate(t, ds, ds.All())
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs, cfg.Eta = 16, 2, 4, 2
	cfg.Encoder.LearnT, cfg.OrthoSelected = true, true
	m, err := model.New(cfg, testdevice.Get(t), torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	adam := optim.NewAdam(m.Store.Trainable(), 1e-3)
	defer adam.Free()
	step := func() {
		s := torch.NewScope()
		defer s.Close()
		out := m.Forward(b.Graph(testdevice.Get(t)), true)
		adam.ZeroGrad()
		out.Total.Backward()
		adam.Step()
	}
	for range 300 {
		step()
	}
	live, before := torch.LiveTensors(), rss(t)
	for range 2000 {
		step()
	}
	after := rss(t)
	t.Logf("RSS %d → %d kB over 2000 steps; %d live handles", before, after, live)
	if torch.LiveTensors() != live {
		t.Errorf("live handles went from %d to %d", live, torch.LiveTensors())
	}
	if float64(after) > 1.05*float64(before) {
		t.Errorf("RSS grew from %d to %d kB", before, after)
	}
}

// GradientOrder lists every trainable tensor once, in the order a backward
// pass reaches them: what follows the encoder, then its norms and
// convolutions from the last layer down, then the feature encoders; ties
// keep the store's order.
func TestGradientOrder(t *testing.T) {
	scope(t)
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 8, 2, 3
	m, err := model.New(cfg, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	name := map[*torch.Tensor]string{}
	for _, v := range m.Store.Trainable() {
		name[v.Tensor] = v.Name
	}
	var got []string
	for _, p := range m.GradientOrder() {
		got = append(got, name[p])
	}
	want := []string{"motif_embeddings", "W_h.weight", "W_s.weight", "W_e.weight",
		"encoder.norms.1.weight", "encoder.norms.1.bias", "encoder.convs.1.lin.weight", "encoder.convs.1.lin.bias",
		"encoder.norms.0.weight", "encoder.norms.0.bias", "encoder.convs.0.lin.weight", "encoder.convs.0.lin.bias"}
	for i := range 9 {
		want = append(want, "encoder.atom_encoder.embeddings."+strconv.Itoa(i)+".weight")
	}
	for i := range 3 {
		want = append(want, "encoder.bond_encoder.embeddings."+strconv.Itoa(i)+".weight")
	}
	if !slices.Equal(got, want) {
		t.Errorf("GradientOrder:\n%v\nwant\n%v", got, want)
	}
}
