package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/model/internal/reference"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

func scope(t testing.TB) {
	s := torch.NewScope()
	t.Cleanup(s.Close)
}

// bace is ogbg-molbace from the shared datasets (the test skips without them).
func bace(t testing.TB) *data.Dataset {
	t.Helper()
	ds, _, err := data.Load(testenv.SharedData(t, "ogb/ogbg_molbace"), data.LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// collate makes a host batch of the given molecules.
func collate(t testing.TB, ds *data.Dataset, graphs []int32) *feed.Batch {
	t.Helper()
	var b feed.Batch
	if err := feed.Collate(ds, graphs, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func span(lo, hi int32) []int32 {
	var out []int32
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// matrix reads a 2-d tensor as float64 rows.
func matrix(x *torch.Tensor) [][]float64 {
	v := torch.ToSlice[float64](x.ToDType(torch.Float64))
	rows, cols := x.Size(0), x.Size(1)
	out := make([][]float64, rows)
	for i := range out {
		out[i] = v[int64(i)*cols : int64(i+1)*cols]
	}
	return out
}

func vector(x *torch.Tensor) []float64 { return torch.ToSlice[float64](x.ToDType(torch.Float64)) }

// referenceWeights reads the model's parameters into the reference's layout.
func referenceWeights(t testing.TB, m *model.MicroGraph) reference.Weights {
	t.Helper()
	get := func(name string) *torch.Tensor {
		x := m.Store.Get(name)
		if x == nil {
			t.Fatalf("no parameter %s", name)
		}
		return x
	}
	var w reference.Weights
	for f := range w.AtomEmb {
		w.AtomEmb[f] = matrix(get(fmt.Sprintf("encoder.atom_encoder.embeddings.%d.weight", f)))
	}
	for f := range w.BondEmb {
		w.BondEmb[f] = matrix(get(fmt.Sprintf("encoder.bond_encoder.embeddings.%d.weight", f)))
	}
	for l := range m.Config.Encoder.Layers {
		w.Convs = append(w.Convs, reference.Conv{
			W: matrix(get(fmt.Sprintf("encoder.convs.%d.lin.weight", l))),
			B: vector(get(fmt.Sprintf("encoder.convs.%d.lin.bias", l))),
			T: m.Config.Encoder.T,
		})
		w.Norms = append(w.Norms, reference.Norm{
			Gamma: vector(get(fmt.Sprintf("encoder.norms.%d.weight", l))),
			Beta:  vector(get(fmt.Sprintf("encoder.norms.%d.bias", l))),
		})
	}
	w.Motifs = matrix(get("motif_embeddings"))
	w.Wh, w.Ws, w.We = matrix(get("W_h.weight")), matrix(get("W_s.weight")), matrix(get("W_e.weight"))
	return w
}

func referenceBatch(b *feed.Batch) reference.Batch {
	var r reference.Batch
	for i := range b.NumAtoms() {
		var row [9]int64
		copy(row[:], b.X[9*i:9*i+9])
		r.X = append(r.X, row)
		r.NodeGraph = append(r.NodeGraph, int(b.NodeGraph[i]))
	}
	for e := range b.NumEdges() {
		var row [3]int64
		copy(row[:], b.EdgeAttr[3*e:3*e+3])
		r.EdgeAttr = append(r.EdgeAttr, row)
		r.Src = append(r.Src, int(b.EdgeSrc[e]))
		r.Dst = append(r.Dst, int(b.EdgeDst[e]))
	}
	r.NumGraphs = b.NumGraphs()
	return r
}

func referenceConfig(c model.Config) reference.Config {
	return reference.Config{
		Layers: c.Encoder.Layers, Hidden: c.Encoder.Hidden, Motifs: c.Motifs,
		Tau: c.Tau, SinkhornLambda: c.SinkhornLambda, SinkhornIters: c.SinkhornIters, Eta: c.Eta,
		Alpha: c.Alpha, LambdaNode: c.LambdaNode, LambdaSub: c.LambdaSub, LambdaReg: c.LambdaReg,
		OrthoSelected: c.OrthoSelected,
	}
}

// deterministic makes a configuration's training forward pass a function of
// the parameters alone: no dropout, no subgraph perturbation.
func deterministic(c model.Config) model.Config {
	c.Encoder.Dropout, c.PDrop, c.PAdd = 0, 0, 0
	return c
}

// closeRel reports whether got is within tol of want, relative to max(1, |want|).
func closeRel(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want)) && !math.IsNaN(got)
}

func compareMatrix(t testing.TB, name string, got, want [][]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", name, len(got), len(want))
		return
	}
	bad := 0
	for i := range want {
		for j := range want[i] {
			if !closeRel(got[i][j], want[i][j], tol) {
				if bad < 5 {
					t.Errorf("%s[%d][%d] = %.12g, want %.12g", name, i, j, got[i][j], want[i][j])
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d entries differ", name, bad)
	}
}

// liveSubgraphs lists the members of each live slot of an unperturbed
// partition, in slot order.
func liveSubgraphs(sub *ops.Subgraphs) (slots []int64, members [][]int) {
	live := torch.ToSlice[bool](sub.Live)
	node, slot, w := torch.ToSlice[int64](sub.Node), torch.ToSlice[int64](sub.Slot), vector(sub.Weight)
	bySlot := map[int64][]int{}
	for i := range node {
		if w[i] == 1 {
			bySlot[slot[i]] = append(bySlot[slot[i]], int(node[i]))
		}
	}
	for s, ok := range live {
		if ok {
			slots = append(slots, int64(s))
			members = append(members, bySlot[int64(s)])
		}
	}
	return slots, members
}

// checkGradients builds cfg's model in float64 from seed and compares the
// gradient of its total loss on g with float64 central differences at the
// first, a random (from r) and the last entry of every trainable tensor,
// with the cuts of §2–§3 pinned. Pinning the cut softmax weights needs them
// materialised: with t fixed the unfused aggregation is checked; with t
// learned nothing is cut there, and the fused kernel is checked. The model
// is on the test device, as g must be.
func checkGradients(t *testing.T, cfg model.Config, g *graph.Graph, seed uint64, r *rand.Rand) {
	t.Helper()
	scope(t)
	torch.ManualSeed(seed)
	m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	model.SetUnfused(m.Encoder, !cfg.Encoder.LearnT)
	replay := pinStops(t, m)
	out := m.Forward(g, true)
	if out.Subgraphs.Count().ItemInt() == 0 {
		t.Fatal("the batch has no subgraphs: the check would miss L_mot-sub and L_contra")
	}
	out.Total.Backward()
	replay()
	checked := 0
	for _, v := range m.Store.Trainable() {
		grad := make([]float64, v.Tensor.Numel())
		if gt := v.Tensor.Grad(); gt != nil {
			grad = vector(gt)
		}
		flat := v.Tensor.Reshape(-1) // a view: entries set through it set the parameter's
		for _, i := range []int{0, r.IntN(len(grad)), len(grad) - 1} {
			entry := flat.Narrow(0, int64(i), 1)
			orig := entry.Item()
			set := func(x float64) { entry.CopyFrom(torch.Full([]int64{1}, x, torch.Options{DType: torch.Float64}), false) }
			lossAt := func(x float64) float64 {
				return torch.NoGradValue(func() float64 {
					set(x)
					return m.Forward(g, true).Total.Item()
				})
			}
			plus, minus := lossAt(orig+1e-6), lossAt(orig-1e-6)
			torch.NoGrad(func() { set(orig) })
			numeric := (plus - minus) / 2e-6
			if math.Abs(grad[i]-numeric) > 1e-6*math.Max(1, math.Abs(numeric)) {
				t.Errorf("%s[%d]: autograd %.10g, finite difference %.10g", v.Name, i, grad[i], numeric)
			}
			checked++
		}
	}
	t.Logf("%d parameter tensors, %d entries checked", len(m.Store.Trainable()), checked)
}
