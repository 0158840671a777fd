package ops_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
)

// testMols: a 4-ring, a triangle, a single atom (no bonds) and a 3-path.
var testMols = []mol{
	{4, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}}},
	{3, [][2]int{{0, 1}, {1, 2}, {0, 2}}},
	{1, nil},
	{3, [][2]int{{0, 1}, {1, 2}}},
}

func randomMatrix(r *rand.Rand, rows, cols int) []float64 {
	d := make([]float64, rows*cols)
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return d
}

func TestSegmentSoftmax(t *testing.T) {
	scope(t)
	g, h := deviceGraph(t, testMols)
	r := rand.New(rand.NewPCG(1, 1))
	e := len(h.src)
	z := randomMatrix(r, e, 2)
	got := values(ops.SegmentSoftmax(dev(t, torch.FromSlice(z, int64(e), 2)), g.RowPtr, g.Dst))
	want := make([]float64, 2*e)
	for i := range h.rowPtr[:len(h.rowPtr)-1] {
		lo, hi := h.rowPtr[i], h.rowPtr[i+1]
		for c := range 2 {
			var sum float64
			for k := lo; k < hi; k++ {
				sum += math.Exp(z[2*k+int64(c)])
			}
			for k := lo; k < hi; k++ {
				want[2*k+int64(c)] = math.Exp(z[2*k+int64(c)]) / sum
			}
		}
	}
	near(t, "softmax", got, want, 1e-12)
	gradCheck(t, "softmax", torch.FromSlice(z, int64(e), 2), func(x *torch.Tensor) *torch.Tensor {
		return weighted(ops.SegmentSoftmax(x, g.RowPtr, g.Dst))
	})
}

func TestGraphPool(t *testing.T) {
	scope(t)
	g, h := deviceGraph(t, testMols)
	n := len(h.nodeGraph)
	x := make([]float64, 2*n)
	for i := range x {
		x[i] = float64((i*7)%11) - 5
	}
	xt := dev(t, torch.FromSlice(x, int64(n), 2))
	var mean, sum, mx []float64
	for b := range testMols {
		for c := range 2 {
			s, m := 0.0, math.Inf(-1)
			for l := h.graphPtr[b]; l < h.graphPtr[b+1]; l++ {
				s += x[2*l+int64(c)]
				m = math.Max(m, x[2*l+int64(c)])
			}
			cnt := float64(h.graphPtr[b+1] - h.graphPtr[b])
			mean, sum, mx = append(mean, s/cnt), append(sum, s), append(mx, m)
		}
	}
	near(t, "mean", values(ops.GraphPool(xt, g, ops.MeanPool)), mean, 1e-12)
	near(t, "sum", values(ops.GraphPool(xt, g, ops.SumPool)), sum, 1e-12)
	near(t, "max", values(ops.GraphPool(xt, g, ops.MaxPool)), mx, 1e-12)
	// Segment means are 0, not NaN, for an empty segment.
	near(t, "empty", values(ops.SegmentMean(dev(t, torch.FromSlice([]float64{4, 6}, 2, 1)), dev(t, torch.FromSlice([]int64{0, 0, 2})))), []float64{0, 5}, 0)
}

func TestCosine(t *testing.T) {
	scope(t)
	a := dev(t, torch.FromSlice([]float64{3, 4, 0, 0}, 2, 2))
	b := dev(t, torch.FromSlice([]float64{1, 0, 0, 2, -3, -4}, 3, 2))
	near(t, "cos", values(ops.Cosine(a, b)), []float64{0.6, 0.8, -1, 0, 0, 0}, 1e-12)
}

// sinkhornReference is docs/method.md §3's Sinkhorn in float32 Go arithmetic.
func sinkhornReference(q []float64, n, k int, lambda float32, iters int) ([]float32, []int64) {
	a := make([]float32, k*n) // K×N
	var total float32
	for l := range n {
		for j := range k {
			a[j*n+l] = float32(math.Exp(float64(lambda * float32(q[l*k+j]))))
			total += a[j*n+l]
		}
	}
	for i := range a {
		a[i] /= total
	}
	for range iters {
		for j := range k {
			var row float32
			for l := range n {
				row += a[j*n+l]
			}
			for l := range n {
				a[j*n+l] *= (1 / float32(k)) / row
			}
		}
		for l := range n {
			var col float32
			for j := range k {
				col += a[j*n+l]
			}
			for j := range k {
				a[j*n+l] *= (1 / float32(n)) / col
			}
		}
	}
	motif := make([]int64, n)
	for l := range n {
		for j := range k {
			if a[j*n+l] > a[int(motif[l])*n+l] {
				motif[l] = int64(j)
			}
		}
	}
	return a, motif
}

// sinkhornInput is n random node-to-motif distributions over k motifs (n×k).
func sinkhornInput(n, k int) []float64 {
	r := rand.New(rand.NewPCG(2, 2))
	q := make([]float64, n*k)
	for l := range n {
		var z float64
		for j := range k {
			q[l*k+j] = math.Exp(2 * r.NormFloat64())
			z += q[l*k+j]
		}
		for j := range k {
			q[l*k+j] /= z
		}
	}
	return q
}

func TestSinkhornAssign(t *testing.T) {
	scope(t)
	const n, k = 40, 5
	q := sinkhornInput(n, k)
	motif, balanced := ops.SinkhornAssign(dev(t, torch.FromSlice(q, n, k)), 20, 5, nil)
	if balanced.DType() != torch.Float32 {
		t.Errorf("Sinkhorn ran in %s, want float32", balanced.DType())
	}
	wantA, wantMotif := sinkhornReference(q, n, k, 20, 5)
	wa := make([]float64, len(wantA))
	for i, v := range wantA {
		wa[i] = float64(v)
	}
	near(t, "A", values(balanced), wa, 1e-5)
	equalInts(t, "motif", ints(motif), wantMotif)
	// After the last column step every column sums to 1/N.
	near(t, "columns", values(balanced.SumDim(0, false)), slicesRepeat(1.0/n, n), 1e-6)
}

func slicesRepeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestMotifSubgraphs(t *testing.T) {
	scope(t)
	g, _ := deviceGraph(t, testMols)
	// Ring: motifs 0 0 1 1; triangle: 0 0 1; single atom: 1; path: 1 1 0.
	motif := dev(t, torch.FromSlice([]int64{0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0}))
	const k = 2
	tests := []struct {
		name        string
		eta         int
		pDrop, pAdd float64
		size        []float64 // per slot: graph·K + motif
	}{
		{"partition", 2, 0, 0, []float64{2, 2, 2, 1, 0, 1, 1, 2}},
		{"eta 1", 1, 0, 0, []float64{2, 2, 2, 1, 0, 1, 1, 2}},
		// Every neighbour joins, once per (node, slot): in the triangle both
		// motif-0 atoms touch atom 2, which still joins slot 0 only once.
		{"all join", 2, 0, 1, []float64{4, 4, 3, 3, 0, 1, 2, 3}},
		{"all drop", 1, 1, 0, []float64{0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		s := ops.MotifSubgraphs(g, motif, k, tc.eta, tc.pDrop, tc.pAdd, torch.Float64)
		near(t, tc.name+" size", values(s.Size), tc.size, 0)
		var live []float64
		var count int64
		for _, v := range tc.size {
			if v >= float64(tc.eta) {
				live = append(live, 1)
				count++
			} else {
				live = append(live, 0)
			}
		}
		near(t, tc.name+" live", values(s.Live), live, 0)
		if got := s.Count().ItemInt(); got != count {
			t.Errorf("%s: %d subgraphs, want %d", tc.name, got, count)
		}
	}
	// The slot of every membership lies in the member's own molecule.
	s := ops.MotifSubgraphs(g, motif, k, 1, 0.5, 0.5, torch.Float64)
	equalInts(t, "slot graph", ints(s.Slot.FloorDivideScalar(k)), ints(g.NodeGraph.IndexSelect(0, s.Node)))
	equalInts(t, "slot graphs", ints(s.SlotGraph()), []int64{0, 0, 1, 1, 2, 2, 3, 3})
}

func TestSubgraphPool(t *testing.T) {
	scope(t)
	g, _ := deviceGraph(t, testMols)
	motif := dev(t, torch.FromSlice([]int64{0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0}))
	s := ops.MotifSubgraphs(g, motif, 2, 2, 0, 1, torch.Float64)
	x := make([]float64, 11)
	for i := range x {
		x[i] = float64(i * i)
	}
	// Members with all neighbours joining: ring slot 0 = {0,1,2,3} (2 and 3
	// join via 1 and 0), slot 1 = {2,3,1,0}; triangle slot 0 = {4,5,6},
	// slot 1 = {6,4,5}; atom 7 alone; path slot 0 = {10, 9}, slot 1 = {8, 9, 10}.
	mean := func(ids ...int) float64 {
		var s float64
		for _, i := range ids {
			s += x[i]
		}
		return s / float64(len(ids))
	}
	want := []float64{mean(0, 1, 2, 3), mean(0, 1, 2, 3), mean(4, 5, 6), mean(4, 5, 6), 0, x[7], mean(9, 10), mean(8, 9, 10)}
	near(t, "pool", values(s.Pool(dev(t, torch.FromSlice(x, 11, 1)))), want, 1e-12)
	gradCheck(t, "pool", torch.FromSlice(x, 11, 1), func(h *torch.Tensor) *torch.Tensor { return weighted(s.Pool(h)) })
}

// minCutReference is §5 with float64 loops; sel nil means all columns.
func minCutReference(q []float64, k int, h hostGraph, sel [][]bool) (cut, ortho float64) {
	b := len(h.graphPtr) - 1
	deg := make([]float64, len(h.nodeGraph))
	for _, u := range h.src {
		deg[u]++
	}
	for g := range b {
		var num, den float64
		for e := range h.src {
			if h.nodeGraph[h.dst[e]] == int64(g) {
				for j := range k {
					num += q[int(h.src[e])*k+j] * q[int(h.dst[e])*k+j]
				}
			}
		}
		gram := make([]float64, k*k)
		for l := h.graphPtr[g]; l < h.graphPtr[g+1]; l++ {
			for j := range k {
				den += deg[l] * q[int(l)*k+j] * q[int(l)*k+j]
				for i := range k {
					gram[i*k+j] += q[int(l)*k+i] * q[int(l)*k+j]
				}
			}
		}
		if den > 0 {
			cut -= num / den / float64(b)
		}
		use := func(i int) bool { return sel == nil || sel[g][i] }
		var fro float64
		j := 0
		for i := range k {
			if use(i) {
				j++
			}
			for c := range k {
				if use(i) && use(c) {
					fro += gram[i*k+c] * gram[i*k+c]
				}
			}
		}
		if j == 0 {
			continue
		}
		fro = math.Sqrt(fro)
		var o float64
		for i := range k {
			for c := range k {
				if !use(i) || !use(c) {
					continue
				}
				v := gram[i*k+c] / fro
				if i == c {
					v -= 1 / math.Sqrt(float64(j))
				}
				o += v * v
			}
		}
		ortho += math.Sqrt(o) / float64(b)
	}
	return cut, ortho
}

func TestMinCut(t *testing.T) {
	scope(t)
	g, h := deviceGraph(t, testMols)
	r := rand.New(rand.NewPCG(3, 3))
	const k = 3
	n := len(h.nodeGraph)
	logits := randomMatrix(r, n, k)
	q := values(torch.FromSlice(logits, int64(n), k).Softmax(1))
	sel := [][]bool{{true, false, true}, {false, false, false}, {true, true, true}, {false, true, false}}
	var selFlat []float64
	for _, row := range sel {
		for _, v := range row {
			selFlat = append(selFlat, map[bool]float64{true: 1, false: 0}[v])
		}
	}
	for _, tc := range []struct {
		name string
		sel  [][]bool
		mask *torch.Tensor
	}{{"all columns", nil, nil}, {"selected columns", sel, dev(t, torch.FromSlice(selFlat, 4, k))}} {
		cut, ortho := ops.MinCut(dev(t, torch.FromSlice(q, int64(n), k)), g, tc.mask)
		wc, wo := minCutReference(q, k, h, tc.sel)
		near(t, tc.name+" cut", []float64{cut.Item()}, []float64{wc}, 1e-12)
		near(t, tc.name+" ortho", []float64{ortho.Item()}, []float64{wo}, 1e-12)
		gradCheck(t, tc.name, torch.FromSlice(logits, int64(n), k), func(x *torch.Tensor) *torch.Tensor {
			c, o := ops.MinCut(x.Softmax(1), g, tc.mask)
			return c.Add(o.MulScalar(0.7))
		})
	}
	// Hand-computed: one motif for every node gives cut −1 on molecules with
	// bonds; two equal orthogonal columns give ortho 0.
	one := dev(t, torch.FromSlice([]float64{1, 0, 1, 0, 1, 0, 1, 0}, 4, 2))
	pair, _ := deviceGraph(t, []mol{{4, [][2]int{{0, 1}, {2, 3}}}})
	cut, _ := ops.MinCut(one, pair, nil)
	near(t, "uniform cut", []float64{cut.Item()}, []float64{-1}, 1e-12)
	split := dev(t, torch.FromSlice([]float64{1, 0, 1, 0, 0, 1, 0, 1}, 4, 2))
	cut, ortho := ops.MinCut(split, pair, nil)
	near(t, "split", []float64{cut.Item(), ortho.Item()}, []float64{-1, 0}, 1e-12)
}

func TestGraphSubgraphContrast(t *testing.T) {
	scope(t)
	g, _ := deviceGraph(t, testMols)
	motif := dev(t, torch.FromSlice([]int64{0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0}))
	sub := ops.MotifSubgraphs(g, motif, 2, 2, 0, 0, torch.Float64)
	live := values(sub.Live) // slots 0,1,2,7 live
	r := rand.New(rand.NewPCG(4, 4))
	z := randomMatrix(r, 4, 3)
	s := randomMatrix(r, 8, 3)
	const tau = 0.5
	cos := func(a, b []float64) float64 {
		var d, na, nb float64
		for i := range a {
			d, na, nb = d+a[i]*b[i], na+a[i]*a[i], nb+b[i]*b[i]
		}
		return d / math.Sqrt(na) / math.Sqrt(nb)
	}
	var total float64
	graphsWith := 0
	for i := range 4 {
		var lse []float64
		maxY := math.Inf(-1)
		for j := range 8 {
			if live[j] == 1 {
				y := cos(z[3*i:3*i+3], s[3*j:3*j+3]) / tau
				lse = append(lse, y)
				maxY = math.Max(maxY, y)
			}
		}
		var norm float64
		for _, y := range lse {
			norm += math.Exp(y - maxY)
		}
		logZ := maxY + math.Log(norm)
		has := false
		for j := 2 * i; j < 2*i+2; j++ {
			if live[j] == 1 {
				total -= cos(z[3*i:3*i+3], s[3*j:3*j+3])/tau - logZ
				has = true
			}
		}
		if has {
			graphsWith++
		}
	}
	want := total / float64(graphsWith)
	got := ops.GraphSubgraphContrast(dev(t, torch.FromSlice(z, 4, 3)), sub.LiveRows(dev(t, torch.FromSlice(s, 8, 3))), sub, tau, nil).Item()
	near(t, "contrast", []float64{got}, []float64{want}, 1e-12)
	gradCheck(t, "contrast z", torch.FromSlice(z, 4, 3), func(x *torch.Tensor) *torch.Tensor {
		return ops.GraphSubgraphContrast(x, sub.LiveRows(dev(t, torch.FromSlice(s, 8, 3))), sub, tau, nil)
	})
	gradCheck(t, "contrast s", torch.FromSlice(s, 8, 3), func(x *torch.Tensor) *torch.Tensor {
		return ops.GraphSubgraphContrast(dev(t, torch.FromSlice(z, 4, 3)), sub.LiveRows(x), sub, tau, nil)
	})
	// No subgraph at all: the loss is 0 and its gradient finite.
	none := ops.MotifSubgraphs(g, motif, 2, 100, 0, 0, torch.Float64)
	x := dev(t, torch.FromSlice(z, 4, 3)).SetRequiresGrad(true)
	loss := ops.GraphSubgraphContrast(x, none.LiveRows(dev(t, torch.FromSlice(s, 8, 3))), none, tau, nil)
	loss.Backward()
	if loss.Item() != 0 || x.Grad().IsFinite().All().ItemInt() != 1 {
		t.Errorf("no subgraphs: loss %v, gradient %v", loss.Item(), values(x.Grad()))
	}
}

// members lists, per slot, the member nodes (weight 1) of a set of subgraphs.
func members(s *ops.Subgraphs) map[int64][]int64 {
	out := map[int64][]int64{}
	node, slot, w := ints(s.Node), ints(s.Slot), values(s.Weight)
	for i := range node {
		if w[i] == 1 {
			out[slot[i]] = append(out[slot[i]], node[i])
		}
	}
	return out
}

// connected reports whether nodes induce a connected subgraph of h.
func connected(nodes []int64, h hostGraph) bool {
	in := map[int64]bool{}
	for _, v := range nodes {
		in[v] = true
	}
	seen := map[int64]bool{nodes[0]: true}
	stack := []int64{nodes[0]}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for e := range h.src {
			if h.src[e] == u && in[h.dst[e]] && !seen[h.dst[e]] {
				seen[h.dst[e]] = true
				stack = append(stack, h.dst[e])
			}
		}
	}
	return len(seen) == len(in)
}

func TestAblationSamplers(t *testing.T) {
	scope(t)
	// A 12-atom path (diameter 11) and the test molecules.
	path := mol{atoms: 12}
	for i := range 11 {
		path.bonds = append(path.bonds, [2]int{i, i + 1})
	}
	g, h := deviceGraph(t, append([]mol{path}, testMols...))
	torch.ManualSeed(5)
	for _, tc := range []struct {
		name    string
		sample  func() *ops.Subgraphs
		maxSpan int64 // largest index span on the path molecule
	}{
		{"random walk", func() *ops.Subgraphs { return ops.RandomWalkSubgraphs(g, 3, 10, 40, 1, torch.Float64) }, 11},
		{"k-hop", func() *ops.Subgraphs { return ops.KHopSubgraphs(g, 3, 1, torch.Float64) }, 4},
	} {
		spans := map[int64]bool{}
		for range 20 {
			s := tc.sample()
			if s.NumSlots != 15 || s.PerGraph != 3 {
				t.Fatalf("%s: %d slots (%d per graph)", tc.name, s.NumSlots, s.PerGraph)
			}
			m := members(s)
			size := values(s.Size)
			for slot := range s.NumSlots {
				nodes := m[slot]
				if len(nodes) == 0 || float64(len(nodes)) != size[slot] {
					t.Fatalf("%s: slot %d has members %v, size %v", tc.name, slot, nodes, size[slot])
				}
				seen := map[int64]bool{}
				lo, hi := nodes[0], nodes[0]
				for _, v := range nodes {
					if seen[v] {
						t.Fatalf("%s: node %d twice in slot %d", tc.name, v, slot)
					}
					seen[v] = true
					if h.nodeGraph[v] != slot/3 {
						t.Fatalf("%s: node %d of molecule %d in slot %d", tc.name, v, h.nodeGraph[v], slot)
					}
					lo, hi = min(lo, v), max(hi, v)
				}
				if !connected(nodes, h) {
					t.Fatalf("%s: slot %d members %v are not connected", tc.name, slot, nodes)
				}
				if slot < 3 {
					if hi-lo > tc.maxSpan {
						t.Fatalf("%s: slot %d spans %d..%d on the path", tc.name, slot, lo, hi)
					}
					spans[hi-lo] = true
				}
			}
		}
		// k-hop on a path spans 2 (k=1) or 4 (k=2) away from the ends; walks vary.
		if len(spans) < 3 {
			t.Errorf("%s: spans on the path never vary: %v", tc.name, spans)
		}
	}
}
