package ops_test

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// mol is a test molecule: its atom count and bonds (each listed once).
type mol struct {
	atoms int
	bonds [][2]int
}

// hostGraph is a collated batch on the host, as the test builds it.
type hostGraph struct {
	src, dst, rowPtr, nodeGraph, graphPtr []int64
	nodes, degree, padIndex               []int64 // 0…N−1; incoming edges; molecule·MaxNodes + position
	pairLater, pairEarlier                []int64 // edge pairs e' < e into the same node
}

// collate lays molecules out as one disjoint graph: each bond u–v becomes
// u→v and v→u, then edges are stably sorted by destination.
func collate(mols []mol) hostGraph {
	var h hostGraph
	h.graphPtr = []int64{0}
	type edge struct{ u, v int64 }
	var edges []edge
	base := int64(0)
	for g, m := range mols {
		for range m.atoms {
			h.nodeGraph = append(h.nodeGraph, int64(g))
		}
		for _, b := range m.bonds {
			edges = append(edges, edge{base + int64(b[0]), base + int64(b[1])}, edge{base + int64(b[1]), base + int64(b[0])})
		}
		base += int64(m.atoms)
		h.graphPtr = append(h.graphPtr, base)
	}
	sort.SliceStable(edges, func(i, j int) bool { return edges[i].v < edges[j].v })
	h.rowPtr = make([]int64, base+1)
	for _, e := range edges {
		h.src = append(h.src, e.u)
		h.dst = append(h.dst, e.v)
		h.rowPtr[e.v+1]++
	}
	for i := int64(1); i <= base; i++ {
		h.rowPtr[i] += h.rowPtr[i-1]
	}
	most := int64(0)
	for _, m := range mols {
		most = max(most, int64(m.atoms))
	}
	for l, g := range h.nodeGraph {
		h.nodes = append(h.nodes, int64(l))
		h.degree = append(h.degree, h.rowPtr[l+1]-h.rowPtr[l])
		h.padIndex = append(h.padIndex, g*most+int64(l)-h.graphPtr[g])
	}
	for e := range h.dst {
		for earlier := range e {
			if h.dst[earlier] == h.dst[e] {
				h.pairLater, h.pairEarlier = append(h.pairLater, int64(e)), append(h.pairEarlier, int64(earlier))
			}
		}
	}
	return h
}

// deviceGraph puts a collated batch on the test device as a graph.Graph
// (features all 0).
func deviceGraph(t testing.TB, mols []mol) (*graph.Graph, hostGraph) {
	return graphOn(testdevice.Get(t), mols)
}

// graphOn puts a collated batch on device d as a graph.Graph (features all 0).
func graphOn(d torch.Device, mols []mol) (*graph.Graph, hostGraph) {
	h := collate(mols)
	on := func(x []int64) *torch.Tensor { return torch.FromSlice(x).To(d, false) }
	o := torch.Options{DType: torch.Int64, Device: d}
	n, e := int64(len(h.nodeGraph)), int64(len(h.src))
	var most int64
	for _, m := range mols {
		most = max(most, int64(m.atoms))
	}
	return &graph.Graph{
		NumGraphs: int64(len(mols)), NumNodes: n, NumEdges: e, MaxNodes: most,
		Atoms: torch.Zeros([]int64{n, 9}, o), Bonds: torch.Zeros([]int64{e, 3}, o),
		Src: on(h.src), Dst: on(h.dst), RowPtr: on(h.rowPtr), NodeGraph: on(h.nodeGraph), GraphPtr: on(h.graphPtr),
		Nodes: on(h.nodes), Degree: on(h.degree), PadIndex: on(h.padIndex),
		PairLater: on(h.pairLater), PairEarlier: on(h.pairEarlier),
	}, h
}

// dev is x on the test device ($MICROGRAPH_TEST_DEVICE, else the CPU).
func dev(t testing.TB, x *torch.Tensor) *torch.Tensor { return x.To(testdevice.Get(t), false) }

func scope(t testing.TB) {
	s := torch.NewScope()
	t.Cleanup(s.Close)
}

func values(x *torch.Tensor) []float64 { return torch.ToSlice[float64](x.ToDType(torch.Float64)) }

func ints(x *torch.Tensor) []int64 { return torch.ToSlice[int64](x.ToDType(torch.Int64)) }

func near(t testing.TB, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) || math.IsNaN(got[i]) {
			t.Errorf("%s[%d] = %.12g, want %.12g", name, i, got[i], want[i])
		}
	}
}

func equalInts(t testing.TB, name string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// gradCheck compares autograd's gradient of the scalar f(x) with float64
// central differences; x must be a float64 CPU leaf, which f gets on the
// test device.
func gradCheck(t *testing.T, name string, x *torch.Tensor, f func(x *torch.Tensor) *torch.Tensor) {
	t.Helper()
	gradCheckOn(t, testdevice.Get(t), name, x, f)
}

// gradCheckOn is gradCheck with f's x on device d.
func gradCheckOn(t *testing.T, d torch.Device, name string, x *torch.Tensor, f func(x *torch.Tensor) *torch.Tensor) {
	t.Helper()
	x.SetRequiresGrad(true)
	f(x.To(d, false)).Backward()
	analytic := values(x.Grad())
	data := torch.HostData[float64](x)
	for i := range data {
		orig := data[i]
		valueAt := func(v float64) float64 {
			data[i] = v
			return torch.NoGradValue(func() float64 { return f(x.To(d, false)).Item() })
		}
		plus, minus := valueAt(orig+1e-6), valueAt(orig-1e-6)
		data[i] = orig
		numeric := (plus - minus) / 2e-6
		if math.Abs(analytic[i]-numeric) > 1e-6*math.Max(1, math.Abs(numeric)) {
			t.Errorf("%s: d/dx[%d]: autograd %.10g, finite difference %.10g", name, i, analytic[i], numeric)
		}
	}
}

// weights is a fixed, irregular weighting that turns a tensor into a scalar.
func weighted(y *torch.Tensor) *torch.Tensor {
	w := make([]float64, y.Numel())
	for i := range w {
		w[i] = math.Cos(float64(3*i+1)) + 0.2
	}
	return y.Mul(torch.FromSlice(w, y.Shape()...).To(y.Device(), false)).Sum()
}
