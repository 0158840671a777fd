package ops_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
)

// randomRows is n row indices below rows.
func randomRows(r *rand.Rand, n int, rows int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = r.Int64N(rows)
	}
	return out
}

// unfusedAggregate is GENConv's aggregation composed from tensor ops, the
// way the model computes it where there is no fused kernel.
func unfusedAggregate(h, table, bond, t *torch.Tensor, g *graph.Graph, learnT bool) *torch.Tensor {
	m := h.IndexSelect(0, g.Src).Add(table.IndexSelect(0, bond)).Relu().AddScalar(torch.GENMessageEpsilon)
	var a *torch.Tensor
	if learnT {
		a = ops.SegmentSoftmax(m.Mul(t), g.RowPtr, g.Dst)
	} else {
		a = torch.NoGradValue(func() *torch.Tensor { return ops.SegmentSoftmax(m.Mul(t), g.RowPtr, g.Dst) })
	}
	return h.Add(m.Mul(a).SegmentReduce(g.RowPtr, torch.ReduceSum))
}

// aggregationDevices is where FusedGENAggregate has a kernel to test: the CPU
// (AVX2 and FMA) and, in a shim built with CUDA on a machine with a GPU, CUDA.
func aggregationDevices() []torch.Device {
	var ds []torch.Device
	for _, d := range []torch.Device{torch.CPU, torch.CUDA(0)} {
		if (!d.IsCUDA() || torch.CUDAAvailable()) && torch.FusedAggregation(d) {
			ds = append(ds, d)
		}
	}
	return ds
}

// aggregationCase is one comparison of the fused aggregation on a device with
// the unfused ops on the CPU, on graph g with node features hv (n×d), a bond
// table tv (rows×d), each edge's row of it (bond, e) and output weights w
// (n×d).
type aggregationCase struct {
	g             *graph.Graph
	n, e, d, rows int64
	hv, tv, w     []float64
	bond          []int64
	dtype         torch.DType
	temp          float64
	learnT        bool
	tol           float64
}

// check compares values and gradients (h, the table and, when learned, t)
// and returns the fused output.
func (c aggregationCase) check(t *testing.T, name string, dev torch.Device) []float64 {
	t.Helper()
	var grads [2][][]float64
	var outs [2][]float64
	for i, fused := range []bool{true, false} {
		at := torch.CPU
		if fused {
			at = dev
		}
		hh := torch.FromSlice(c.hv, c.n, c.d).ToDType(c.dtype).To(at, false).SetRequiresGrad(true)
		tab := torch.FromSlice(c.tv, c.rows, c.d).ToDType(c.dtype).To(at, false).SetRequiresGrad(true)
		bond := torch.FromSlice(c.bond).To(at, false)
		tt := torch.Full(nil, c.temp, torch.Options{DType: c.dtype, Device: at}).SetRequiresGrad(c.learnT)
		var out *torch.Tensor
		if fused {
			out = torch.FusedGENAggregate(hh, tab, bond, tt, c.g.Src.To(at, false), c.g.RowPtr.To(at, false), c.learnT)
		} else {
			out = unfusedAggregate(hh, tab, bond, tt, c.g, c.learnT)
		}
		out.Mul(torch.FromSlice(c.w, c.n, c.d).ToDType(c.dtype).To(at, false)).Sum().Backward()
		outs[i] = values(out.To(torch.CPU, false))
		grads[i] = [][]float64{values(hh.Grad().To(torch.CPU, false)), values(tab.Grad().To(torch.CPU, false))}
		if c.learnT {
			grads[i] = append(grads[i], values(tt.Grad().To(torch.CPU, false)))
		}
	}
	near(t, name+" out", outs[0], outs[1], c.tol)
	for k, part := range []string{"dh", "dtable", "dt"}[:len(grads[0])] {
		near(t, name+" "+part, grads[0][k], grads[1][k], c.tol)
	}
	return outs[0]
}

// The fused kernel, on each device that has one, gives the values and
// gradients of the unfused ops on the CPU, for fixed and learned
// temperatures, in float64 and float32, including a node without incoming
// edges; edges share the rows of a four-row bond table.
func TestFusedAggregationMatchesUnfused(t *testing.T) {
	scope(t)
	devices := aggregationDevices()
	if len(devices) == 0 {
		t.Skip("no fused aggregation here (a CPU without AVX2/FMA, no CUDA): the model uses the unfused ops, tested elsewhere")
	}
	g, h := graphOn(torch.CPU, testMols)
	r := rand.New(rand.NewPCG(8, 8))
	n, e, d, rows := int64(len(h.nodeGraph)), int64(len(h.src)), int64(5), int64(4)
	hv, tv := randomMatrix(r, int(n), int(d)), randomMatrix(r, int(rows), int(d))
	bond := randomRows(r, int(e), rows)
	weights := randomMatrix(r, int(n), int(d))
	for _, dev := range devices {
		for _, tc := range []struct {
			name   string
			dtype  torch.DType
			t      float64
			learnT bool
			tol    float64
		}{
			{"fixed t, float64", torch.Float64, 1, false, 1e-12},
			{"learned t, float64", torch.Float64, 0.7, true, 1e-12},
			{"large t, float64", torch.Float64, 30, true, 1e-11},
			{"fixed t, float32", torch.Float32, 1, false, 1e-5},
			{"learned t, float32", torch.Float32, 1.3, true, 1e-5},
		} {
			name := dev.String() + ", " + tc.name
			c := aggregationCase{g: g, n: n, e: e, d: d, rows: rows, hv: hv, tv: tv, bond: bond, w: weights,
				dtype: tc.dtype, temp: tc.t, learnT: tc.learnT, tol: tc.tol}
			out := c.check(t, name, dev)
			// Atom 7 (the one-atom molecule) has no incoming edges: x = h.
			near(t, name+" isolated", out[7*d:8*d], hv[7*d:8*d], tc.tol)
		}
	}
	if !torch.FusedAggregation(torch.CPU) {
		return
	}
	// And against central differences, through the table and the learned
	// temperature too.
	tt := torch.Full(nil, 0.9, torch.Options{DType: torch.Float64})
	tab, bt := torch.FromSlice(tv, rows, d), torch.FromSlice(bond)
	gradCheckOn(t, torch.CPU, "fused dh", torch.FromSlice(hv, n, d), func(x *torch.Tensor) *torch.Tensor {
		return weighted(torch.FusedGENAggregate(x, tab, bt, tt, g.Src, g.RowPtr, true))
	})
	gradCheckOn(t, torch.CPU, "fused dtable", torch.FromSlice(tv, rows, d), func(x *torch.Tensor) *torch.Tensor {
		return weighted(torch.FusedGENAggregate(torch.FromSlice(hv, n, d), x, bt, tt, g.Src, g.RowPtr, true))
	})
	gradCheckOn(t, torch.CPU, "fused dt", torch.Full(nil, 0.9, torch.Options{DType: torch.Float64}), func(x *torch.Tensor) *torch.Tensor {
		return weighted(torch.FusedGENAggregate(torch.FromSlice(hv, n, d), tab, bt, x, g.Src, g.RowPtr, true))
	})
}

// On a random graph large enough for many CUDA blocks (1,000 nodes × 37
// channels, 0–6 incoming edges each, channels not a multiple of a warp), the
// fused kernel still matches the unfused ops.
func TestFusedAggregationLargeGraph(t *testing.T) {
	scope(t)
	devices := aggregationDevices()
	if len(devices) == 0 {
		t.Skip("no fused aggregation here (a CPU without AVX2/FMA, no CUDA)")
	}
	r := rand.New(rand.NewPCG(10, 10))
	const n, d = 1000, 37
	rowPtr := []int64{0}
	var src, dst []int64
	for i := range int64(n) {
		for range r.IntN(7) {
			src = append(src, r.Int64N(n))
			dst = append(dst, i)
		}
		rowPtr = append(rowPtr, int64(len(src)))
	}
	e := int64(len(src))
	g := &graph.Graph{NumNodes: n, NumEdges: e, Src: torch.FromSlice(src), Dst: torch.FromSlice(dst),
		RowPtr: torch.FromSlice(rowPtr)}
	for _, dev := range devices {
		for _, dtype := range []torch.DType{torch.Float64, torch.Float32} {
			tol := 1e-12
			if dtype == torch.Float32 {
				tol = 1e-5
			}
			c := aggregationCase{g: g, n: n, e: e, d: d, rows: 60, hv: randomMatrix(r, n, d), tv: randomMatrix(r, 60, d),
				bond: randomRows(r, int(e), 60), w: randomMatrix(r, n, d), dtype: dtype, temp: 1.1, learnT: true, tol: tol}
			c.check(t, dev.String()+", "+dtype.String(), dev)
		}
	}
}

// libtorch's embedding bag and the fused kernel sum the looked-up rows, values
// and gradients.
func TestEmbeddingBagSumMatchesEmbedding(t *testing.T) {
	scope(t)
	r := rand.New(rand.NewPCG(9, 9))
	w := randomMatrix(r, 7, 3)
	idx := torch.FromSlice([]int64{0, 6, 2, 2, 3, 1, 5, 5, 0}, 3, 3)
	bags := []func(w, idx *torch.Tensor) *torch.Tensor{torch.EmbeddingBagSum}
	if torch.FusedKernels(torch.CPU) {
		bags = append(bags, torch.FusedEmbeddingBagSum)
	}
	refW := torch.FromSlice(w, 7, 3).SetRequiresGrad(true)
	ref := torch.Embedding(refW, idx).SumDim(1, false)
	weighted(ref).Backward()
	for i, sum := range bags {
		bagW := torch.FromSlice(w, 7, 3).SetRequiresGrad(true)
		bag := sum(bagW, idx)
		near(t, fmt.Sprintf("embedding bag %d (1: fused)", i), values(bag), values(ref), 1e-12)
		weighted(bag).Backward()
		near(t, fmt.Sprintf("embedding bag %d grad", i), values(bagW.Grad()), values(refW.Grad()), 1e-12)
	}
}

// A message whose pre-activation is cut by the ReLU is exactly the ε the
// fused kernel adds (kGENMessageEpsilon), and that is GENMessageEpsilon: the
// composed form adds the same.
func TestFusedAggregationMessageEpsilon(t *testing.T) {
	scope(t)
	if !torch.FusedAggregation(torch.CPU) {
		t.Skip("no fused aggregation on this CPU (AVX2/FMA)")
	}
	for _, dt := range []torch.DType{torch.Float32, torch.Float64} {
		o := torch.Options{DType: dt}
		// Node 1 (h = 0) receives one edge from node 0 (h = −1): x_1 = 0 + ε.
		h := torch.FromSlice([]float64{-1, -1, -1, 0, 0, 0}, 2, 3).ToDType(dt)
		table := torch.Zeros([]int64{1, 3}, o)
		out := torch.FusedGENAggregate(h, table, torch.FromSlice([]int64{0}), torch.Full(nil, 1, o), torch.FromSlice([]int64{0}),
			torch.FromSlice([]int64{0, 0, 1}), false)
		want := torch.Full(nil, torch.GENMessageEpsilon, o).Item()
		got := values(out)
		for i, v := range got {
			if wantV := []float64{-1, want}[i/3]; v != wantV {
				t.Fatalf("%s: out %v, want −1 (h) for node 0 and %v (ε) for node 1", dt, got, want)
			}
		}
	}
}

// The pooling kernel and the sorted-segment pooling of other devices agree,
// values and gradients, with drops and additions.
func TestPoolKernelMatchesSortedSegments(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("this CPU lacks AVX2/FMA: only the sorted pooling runs, tested elsewhere")
	}
	g, h := graphOn(torch.CPU, testMols)
	n := int64(len(h.nodeGraph))
	torch.ManualSeed(3)
	motif := torch.FromSlice([]int64{0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0})
	sub := ops.MotifSubgraphs(g, motif, 2, 1, 0.3, 0.6, torch.Float64)
	r := rand.New(rand.NewPCG(5, 5))
	x := randomMatrix(r, int(n), 3)
	var outs, grads [2][]float64
	for i, pool := range []func(*torch.Tensor) *torch.Tensor{sub.Pool, func(h *torch.Tensor) *torch.Tensor { return ops.PoolSorted(sub, h) }} {
		xt := torch.FromSlice(x, n, 3).SetRequiresGrad(true)
		out := pool(xt)
		weighted(out).Backward()
		outs[i], grads[i] = values(out), values(xt.Grad())
	}
	near(t, "pooled", outs[0], outs[1], 1e-12)
	near(t, "gradient", grads[0], grads[1], 1e-12)
}

// The Sinkhorn kernel and the composed assignment of other devices agree.
func TestSinkhornKernelMatchesComposed(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("this CPU lacks AVX2/FMA: only the composed Sinkhorn runs, tested elsewhere")
	}
	r := rand.New(rand.NewPCG(12, 12))
	q := torch.FromSlice(randomMatrix(r, 300, 7), 300, 7).MulScalar(2).Softmax(1)
	m1, a1 := ops.SinkhornAssign(q, 20, 5, nil)
	m2, a2 := ops.SinkhornComposed(q, 20, 5, nil)
	near(t, "balanced", values(a1), values(a2), 1e-5)
	equalInts(t, "motif", ints(m1), ints(m2))
}

// Mean pooling through the group kernel equals the segment mean of other
// devices, values and gradients.
func TestGraphPoolKernelMatchesSegments(t *testing.T) {
	scope(t)
	g, h := graphOn(torch.CPU, testMols)
	r := rand.New(rand.NewPCG(13, 13))
	x := randomMatrix(r, len(h.nodeGraph), 4)
	var outs, grads [2][]float64
	for i, pool := range []func(*torch.Tensor) *torch.Tensor{
		func(x *torch.Tensor) *torch.Tensor { return ops.GraphPool(x, g, ops.MeanPool) },
		func(x *torch.Tensor) *torch.Tensor { return ops.SegmentMean(x, g.GraphPtr) },
	} {
		xt := torch.FromSlice(x, int64(len(h.nodeGraph)), 4).SetRequiresGrad(true)
		out := pool(xt)
		weighted(out).Backward()
		outs[i], grads[i] = values(out), values(xt.Grad())
	}
	near(t, "mean pool", outs[0], outs[1], 1e-12)
	near(t, "mean pool gradient", grads[0], grads[1], 1e-12)
}

// The MinCut kernel and the composed regulariser of other devices agree,
// values and gradients, with all columns and with selected ones (including a
// molecule with none selected).
func TestMinCutKernelMatchesComposed(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("this CPU lacks AVX2/FMA: only the composed MinCut runs, tested elsewhere")
	}
	g, h := graphOn(torch.CPU, testMols)
	n := int64(len(h.nodeGraph))
	r := rand.New(rand.NewPCG(14, 14))
	logits := randomMatrix(r, int(n), 3)
	sel := torch.FromSlice([]float64{1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0}, 4, 3)
	for _, selected := range []*torch.Tensor{nil, sel} {
		var outs, grads [2][]float64
		for i, f := range []func(*torch.Tensor, *graph.Graph, *torch.Tensor) (*torch.Tensor, *torch.Tensor){ops.MinCut, ops.MinCutComposed} {
			x := torch.FromSlice(logits, n, 3).SetRequiresGrad(true)
			cut, ortho := f(x.Softmax(1), g, selected)
			cut.MulScalar(1.3).Add(ortho.MulScalar(-0.7)).Backward()
			outs[i] = []float64{cut.Item(), ortho.Item()}
			grads[i] = values(x.Grad())
		}
		near(t, "cut, ortho", outs[0], outs[1], 1e-12)
		near(t, "gradient", grads[0], grads[1], 1e-12)
	}
}

// The fused CPU kernels split their loops over libtorch's threads (nodes,
// channels, elements) so that every value is computed by one thread in one
// order: the aggregation's values and gradients, dropout, the embedding bag
// sums and batch norm (its running statistics too) are bit for bit the same
// on 1 and on 3 threads (runs resumed or repeated on another thread count
// differ only in libtorch's own sums).
func TestFusedKernelsIndependentOfThreads(t *testing.T) {
	threadsTest(t)
	one, three := fusedKernelOutputs(1), fusedKernelOutputs(3)
	for i, name := range fusedOutputNames {
		if !slices.Equal(one[i], three[i]) {
			t.Errorf("%s differs between 1 and 3 threads", name)
		}
	}
}

// fusedOutputNames name fusedKernelOutputs' results, in order.
var fusedOutputNames = []string{"aggregation", "dropout", "embedding bag", "batch norm", "running mean", "running variance",
	"dh", "dtable", "dγ", "dβ", "Adam's parameters", "Adam's first moments", "Adam's second moments", "group mean", "group mean's gradient"}

// fusedKernelOutputs runs every fused CPU kernel with lane-wise loops
// (kernels/isa.h) on fixed random inputs at threads threads, forward and
// backward, then two Adam steps on the gradients, and returns their values.
func fusedKernelOutputs(threads int) [][]float64 {
	torch.SetNumThreads(threads)
	torch.ManualSeed(5)
	r := rand.New(rand.NewPCG(12, 12))
	const n, d, rows = 2000, 64, 60
	rowPtr := []int64{0}
	var src []int64
	for range int64(n) {
		for range r.IntN(7) {
			src = append(src, r.Int64N(n))
		}
		rowPtr = append(rowPtr, int64(len(src)))
	}
	hv, tv, w := randomMatrix(r, n, d), randomMatrix(r, rows, d), randomMatrix(r, n, d)
	bond := randomRows(r, len(src), rows)
	idx := randomRows(r, n*3, rows)
	groups := make([]int64, n)
	for i := range groups {
		groups[i] = int64(i * 37 / n)
	}
	s := torch.NewScope()
	defer s.Close()
	f32 := torch.Options{DType: torch.Float32, Device: torch.CPU}
	h := torch.FromSlice(hv, n, d).ToDType(torch.Float32).SetRequiresGrad(true)
	tab := torch.FromSlice(tv, rows, d).ToDType(torch.Float32).SetRequiresGrad(true)
	tt := torch.Full(nil, 1.1, f32)
	out := torch.FusedGENAggregate(h, tab, torch.FromSlice(bond), tt, torch.FromSlice(src), torch.FromSlice(rowPtr), false)
	dropped := torch.FusedDropout(out, 0.2).Add(torch.FusedReluDropout(out, 0.3))
	bag := torch.FusedEmbeddingBagSum(tab, torch.FromSlice(idx, n, 3))
	gamma := torch.Full([]int64{d}, 1.5, f32).SetRequiresGrad(true)
	beta := torch.Full([]int64{d}, 0.25, f32).SetRequiresGrad(true)
	mean := torch.Zeros([]int64{d}, f32)
	variance := torch.Ones([]int64{d}, f32)
	normed := torch.FusedBatchNorm(dropped.Add(bag), gamma, beta, mean, variance, 0.1, 1e-5).
		Add(torch.FusedBatchNormDropout(out, gamma, beta, mean, variance, 0.1, 1e-5, torch.NormDropout{P: 0.4, ReLU: true})).
		Add(torch.FusedLinearResidual(out, identity(d), beta, bag))
	pooled := torch.FusedGroupMean(normed, torch.Arange(0, n, 1, torch.Options{DType: torch.Int64}), torch.FromSlice(groups),
		torch.Ones([]int64{n}, f32), 37)
	normed.Mul(torch.FromSlice(w, n, d).ToDType(torch.Float32)).Sum().Add(pooled.PowScalar(2).Sum()).Backward()
	params := []*torch.Tensor{h.Detach().Clone(), tab.Detach().Clone(), gamma.Detach().Clone()}
	grads := []*torch.Tensor{h.Grad(), tab.Grad(), gamma.Grad()}
	m := []*torch.Tensor{torch.Zeros(h.Shape(), f32), torch.Zeros(tab.Shape(), f32), torch.Zeros(gamma.Shape(), f32)}
	v := []*torch.Tensor{torch.Zeros(h.Shape(), f32), torch.Zeros(tab.Shape(), f32), torch.Zeros(gamma.Shape(), f32)}
	steps := []int64{0, 0, 0}
	for range 2 {
		torch.FusedAdamStep(params, m, v, steps, 1e-3, 0.9, 0.999, 1e-8, 0.01, true)
	}
	cat := func(ts []*torch.Tensor) []float64 {
		var all []float64
		for _, t := range ts {
			all = append(all, values(t)...)
		}
		return all
	}
	return [][]float64{values(out), values(dropped), values(bag), values(normed), values(mean), values(variance),
		values(h.Grad()), values(tab.Grad()), values(gamma.Grad()), values(beta.Grad()),
		cat(params), cat(m), cat(v), values(pooled), values(grads[0])}
}

// The fused kernels' lane-wise loops give the same bits in their AVX-512
// build as in their AVX2 one (kernels/isa.h): this process runs the former
// where the CPU has AVX-512, and a copy of the test binary with
// MICROGRAPH_NO_AVX512 set runs the latter.
func TestFusedKernelsSameAtEveryVectorWidth(t *testing.T) {
	if path := os.Getenv("MG_TEST_KERNEL_OUTPUTS"); path != "" {
		b, _ := json.Marshal(fusedKernelOutputs(1))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	scope(t)
	if torch.KernelVectorBits() != 512 {
		t.Skipf("the fused kernels run at %d bits here: no AVX-512 build to compare with AVX2's", torch.KernelVectorBits())
	}
	defer torch.SetNumThreads(torch.NumThreads())
	wide := fusedKernelOutputs(1)
	path := filepath.Join(t.TempDir(), "avx2.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFusedKernelsSameAtEveryVectorWidth$")
	cmd.Env = append(os.Environ(), "MICROGRAPH_NO_AVX512=1", "MG_TEST_KERNEL_OUTPUTS="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the AVX2 run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var narrow [][]float64
	if err := json.Unmarshal(b, &narrow); err != nil {
		t.Fatal(err)
	}
	for i, name := range fusedOutputNames {
		if !slices.Equal(wide[i], narrow[i]) {
			t.Errorf("%s differs between the AVX-512 and AVX2 builds", name)
		}
	}
}

// threadsTest starts a test of the fused CPU kernels that sets the thread
// count: it skips where they do not run and restores the count at the end.
func threadsTest(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("no fused CPU kernels here (a CPU without AVX2/FMA)")
	}
	threads := torch.NumThreads()
	t.Cleanup(func() { torch.SetNumThreads(threads) })
}

// identity is the d×d identity matrix in float32: the weight of the linear
// layer in fusedKernelOutputs, whose product (libtorch's gemm, which may sum
// in another order on another number of threads: on an Intel Xeon of family
// 6 model 207 it does) is then exact, so that only the kernel's own
// arithmetic, the bias and residual added, is compared.
func identity(d int64) *torch.Tensor {
	v := make([]float64, d*d)
	for i := range d {
		v[i*d+i] = 1
	}
	return torch.FromSlice(v, d, d).ToDType(torch.Float32)
}

// sameBits reports whether a and b hold the same values bit for bit (−0 is
// not +0).
func sameBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// Batch norm and dropout fused (with and without a ReLU between them) give
// FusedBatchNorm followed by FusedReluDropout or FusedDropout bit for bit: the
// output, the running statistics and the gradients of x, γ and β, in float32
// and float64, from the same generator state, at one thread and at three.
func TestFusedBatchNormDropoutIsDropoutOfBatchNorm(t *testing.T) {
	threadsTest(t)
	const n, c, p = 700, 90, 0.35
	r := rand.New(rand.NewPCG(5, 6))
	xv, gv, wv, bv := randomMatrix(r, n, c), randomMatrix(r, n, c), randomMatrix(r, 1, c), randomMatrix(r, 1, c)
	run := func(dt torch.DType, relu, fused bool) [][]float64 {
		o := torch.Options{DType: dt}
		x := torch.FromSlice(xv, n, c).ToDType(dt).SetRequiresGrad(true)
		w := torch.FromSlice(wv, c).ToDType(dt).SetRequiresGrad(true)
		b := torch.FromSlice(bv, c).ToDType(dt).SetRequiresGrad(true)
		mean, variance := torch.Zeros([]int64{c}, o), torch.Ones([]int64{c}, o)
		torch.ManualSeed(8)
		var y *torch.Tensor
		switch {
		case fused:
			y = torch.FusedBatchNormDropout(x, w, b, mean, variance, 0.1, 1e-5, torch.NormDropout{P: p, ReLU: relu})
		case relu:
			y = torch.FusedReluDropout(torch.FusedBatchNorm(x, w, b, mean, variance, 0.1, 1e-5), p)
		default:
			y = torch.FusedDropout(torch.FusedBatchNorm(x, w, b, mean, variance, 0.1, 1e-5), p)
		}
		y.Mul(torch.FromSlice(gv, n, c).ToDType(dt)).Sum().Backward()
		return [][]float64{values(y), values(mean), values(variance), values(x.Grad()), values(w.Grad()), values(b.Grad())}
	}
	names := []string{"output", "running mean", "running variance", "dx", "dγ", "dβ"}
	for _, threads := range []int{1, 3} {
		torch.SetNumThreads(threads)
		for _, dt := range []torch.DType{torch.Float32, torch.Float64} {
			for _, relu := range []bool{true, false} {
				fused, composed := run(dt, relu, true), run(dt, relu, false)
				for i, name := range names {
					if !sameBits(fused[i], composed[i]) {
						t.Errorf("%d threads, %s, ReLU %v: the fused %s differs from batch norm then dropout", threads, dt, relu, name)
					}
				}
				zero := 0
				for _, v := range fused[0] {
					if v == 0 {
						zero++
					}
				}
				// Dropout zeroes 35 %; the ReLU about half of the rest too.
				want := p
				if relu {
					want = p + (1-p)/2
				}
				if frac := float64(zero) / float64(n*c); math.Abs(frac-want) > 0.03 {
					t.Errorf("%s, ReLU %v: %.3f of the outputs are zero, want about %.3f", dt, relu, frac, want)
				}
			}
		}
	}
}

// The fused linear layer with its residual gives Linear(x, W, b).Add(r) bit
// for bit, values and the gradients of x, W, b and r, in float32 and
// float64, at one thread and at three.
func TestFusedLinearResidualIsLinearPlusResidual(t *testing.T) {
	threadsTest(t)
	const n, in, out = 500, 70, 90
	r := rand.New(rand.NewPCG(7, 8))
	xv, wv, bv, rv, gv := randomMatrix(r, n, in), randomMatrix(r, out, in), randomMatrix(r, 1, out), randomMatrix(r, n, out), randomMatrix(r, n, out)
	run := func(dt torch.DType, fused bool) [][]float64 {
		x := torch.FromSlice(xv, n, in).ToDType(dt).SetRequiresGrad(true)
		w := torch.FromSlice(wv, out, in).ToDType(dt).SetRequiresGrad(true)
		b := torch.FromSlice(bv, out).ToDType(dt).SetRequiresGrad(true)
		res := torch.FromSlice(rv, n, out).ToDType(dt).SetRequiresGrad(true)
		var z *torch.Tensor
		if fused {
			z = torch.FusedLinearResidual(x, w, b, res)
		} else {
			z = torch.Linear(x, w, b).Add(res)
		}
		z.Mul(torch.FromSlice(gv, n, out).ToDType(dt)).Sum().Backward()
		return [][]float64{values(z), values(x.Grad()), values(w.Grad()), values(b.Grad()), values(res.Grad())}
	}
	for _, threads := range []int{1, 3} {
		torch.SetNumThreads(threads)
		for _, dt := range []torch.DType{torch.Float32, torch.Float64} {
			fused, composed := run(dt, true), run(dt, false)
			for i, name := range []string{"output", "dx", "dW", "db", "dresidual"} {
				if !sameBits(fused[i], composed[i]) {
					t.Errorf("%d threads, %s: the fused %s differs from Linear then Add", threads, dt, name)
				}
			}
		}
	}
}

// The fused dropout of a ReLU is FusedDropout(x.Relu(), p) bit for bit, its
// values and its gradient, for the same generator state.
func TestFusedReluDropoutIsDropoutOfRelu(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("no fused CPU kernels here (a CPU without AVX2/FMA)")
	}
	r := rand.New(rand.NewPCG(3, 4))
	xv, gv := randomMatrix(r, 700, 90), randomMatrix(r, 700, 90)
	run := func(fused bool) (out, grad []float64) {
		x := torch.FromSlice(xv, 700, 90).ToDType(torch.Float32).SetRequiresGrad(true)
		torch.ManualSeed(8)
		var y *torch.Tensor
		if fused {
			y = torch.FusedReluDropout(x, 0.35)
		} else {
			y = torch.FusedDropout(x.Relu(), 0.35)
		}
		y.Mul(torch.FromSlice(gv, 700, 90).ToDType(torch.Float32)).Sum().Backward()
		return values(y), values(x.Grad())
	}
	fusedOut, fusedGrad := run(true)
	out, grad := run(false)
	if !slices.Equal(fusedOut, out) || !slices.Equal(fusedGrad, grad) {
		t.Fatal("the fused ReLU and dropout differ from dropout of the ReLU")
	}
	zero, kept := 0, 0
	for i, v := range fusedOut {
		switch {
		case v == 0:
			zero++
		case v != float64(float32(xv[i])*float32(1/(1-0.35))):
			t.Fatalf("element %d: %v, want x/(1−p) = %v", i, v, float32(xv[i])*float32(1/(1-0.35)))
		default:
			kept++
		}
	}
	// About half the inputs are positive and 65 % of those kept.
	if frac := float64(kept) / float64(len(fusedOut)); frac < 0.28 || frac > 0.37 {
		t.Errorf("%.3f of the elements kept, want about 0.5·0.65", frac)
	}
}
