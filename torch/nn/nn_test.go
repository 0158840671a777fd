package nn_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/internal/libtorchtest"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/testdevice"
)

func names(vars []nn.Var) []string {
	var out []string
	for _, v := range vars {
		out = append(out, v.Name)
	}
	return out
}

func values(t *torch.Tensor) []float64 { return torch.ToSlice[float64](t.ToDType(torch.Float64)) }

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

// Names follow PyTorch's state_dict: dotted paths, list indices as path
// elements, parameters and buffers in creation order.
func TestStoreNamesLikeStateDict(t *testing.T) {
	sc := torch.NewScope()
	defer sc.Close()
	s := nn.NewStore(testdevice.Get(t), torch.Float32)
	defer s.Free()
	root := s.Root()
	nn.NewEmbedding(root.Sub("atom_encoder").Sub("embeddings").Index(0), 5, 4)
	for i := range 2 {
		nn.NewLinear(root.Sub("convs").Index(i).Sub("lin"), 4, 4, true)
	}
	nn.NewBatchNorm1d(root.Sub("norms").Index(0), 4)
	nn.NewLinear(root.Sub("W_h"), 4, 4, false)
	want := []string{
		"atom_encoder.embeddings.0.weight",
		"convs.0.lin.weight", "convs.0.lin.bias",
		"convs.1.lin.weight", "convs.1.lin.bias",
		"norms.0.weight", "norms.0.bias", "norms.0.running_mean", "norms.0.running_var", "norms.0.num_batches_tracked",
		"W_h.weight",
	}
	if got := names(s.Vars()); !slices.Equal(got, want) {
		t.Errorf("names:\n got %v\nwant %v", got, want)
	}
	var trainable []string
	for _, n := range want {
		if !strings.Contains(n, "running") && !strings.Contains(n, "num_batches") {
			trainable = append(trainable, n)
		}
	}
	if got := names(s.Trainable()); !slices.Equal(got, trainable) {
		t.Errorf("trainable: %v", got)
	}
	if len(s.Parameters()) != len(trainable) {
		t.Errorf("%d parameters, want %d", len(s.Parameters()), len(trainable))
	}
	for _, v := range s.Vars() {
		if v.Tensor.RequiresGrad() != v.Trainable {
			t.Errorf("%s: requires grad %v", v.Name, v.Tensor.RequiresGrad())
		}
	}
	if s.Get("norms.0.num_batches_tracked").DType() != torch.Int64 {
		t.Error("num_batches_tracked is not int64")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	nn.NewLinear(root.Sub("W_h"), 4, 4, false)
}

// Parameters made inside a scope belong to the store, not the scope.
func TestStoreOutlivesScopes(t *testing.T) {
	s := nn.NewStore(testdevice.Get(t), torch.Float64)
	defer s.Free()
	sc := torch.NewScope()
	l := nn.NewLinear(s.Root().Sub("lin"), 3, 2, true)
	sc.Close()
	if got := l.Weight.Shape(); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("weight shape after the scope closed: %v", got)
	}
	if s.DType() != torch.Float64 || l.Bias.DType() != torch.Float64 {
		t.Error("store dtype not applied")
	}
}

// The initialisations are PyTorch's: bounds and spreads of large samples.
func TestInitialisations(t *testing.T) {
	sc := torch.NewScope()
	defer sc.Close()
	torch.ManualSeed(3)
	s := nn.NewStore(testdevice.Get(t), torch.Float64)
	defer s.Free()
	const in, out = 400, 300
	l := nn.NewLinear(s.Root().Sub("lin"), in, out, true)
	e := nn.NewEmbedding(s.Root().Sub("emb"), 119, 300)
	x := s.Root().Param("x", torch.Empty([]int64{119, 300}, s.Root().Options()))
	nn.XavierUniform(x, 1)
	tests := []struct {
		name  string
		vals  []float64
		bound float64 // 0: unbounded
		std   float64
	}{
		{"linear weight", values(l.Weight), 1 / math.Sqrt(in), 1 / math.Sqrt(in) / math.Sqrt(3)},
		{"linear bias", values(l.Bias), 1 / math.Sqrt(in), 1 / math.Sqrt(in) / math.Sqrt(3)},
		{"embedding", values(e.Weight), 0, 1},
		{"xavier", values(x), math.Sqrt(6.0 / (119 + 300)), math.Sqrt(6.0/(119+300)) / math.Sqrt(3)},
	}
	for _, tc := range tests {
		if tc.bound > 0 {
			lo, hi := slices.Min(tc.vals), slices.Max(tc.vals)
			if lo < -tc.bound || hi > tc.bound || hi < 0.95*tc.bound {
				t.Errorf("%s: range [%v, %v], want ±%v", tc.name, lo, hi, tc.bound)
			}
		}
		mean, std := meanStd(tc.vals)
		// Generous: ≥ 300 samples give a relative standard error under 5%.
		if math.Abs(std-tc.std) > 0.1*tc.std || math.Abs(mean) > 0.2*tc.std {
			t.Errorf("%s: mean %v std %v, want 0 and %v", tc.name, mean, std, tc.std)
		}
	}
}

func TestBatchNorm1dStatistics(t *testing.T) {
	dev := testdevice.Get(t)
	s := nn.NewStore(dev, torch.Float64)
	defer s.Free()
	bn := nn.NewBatchNorm1d(s.Root().Sub("bn"), 2)
	sc := torch.NewScope()
	defer sc.Close()
	x := torch.FromSlice([]float64{1, 10, 3, 20, 5, 60}, 3, 2).To(dev, false)
	bn.Forward(x, true)
	bn.Forward(x, true)
	// Channel 0: mean 3, unbiased variance 4; channel 1: mean 30, variance 700.
	// After two updates with momentum 0.1: r = 0.81·r₀ + 0.19·batch.
	wantMean := []float64{0.19 * 3, 0.19 * 30}
	wantVar := []float64{0.81 + 0.19*4, 0.81 + 0.19*700}
	for i := range 2 {
		if got := values(bn.RunningMean)[i]; math.Abs(got-wantMean[i]) > 1e-12 {
			t.Errorf("running_mean[%d] = %v, want %v", i, got, wantMean[i])
		}
		if got := values(bn.RunningVar)[i]; math.Abs(got-wantVar[i]) > 1e-9 {
			t.Errorf("running_var[%d] = %v, want %v", i, got, wantVar[i])
		}
	}
	if n := bn.NumBatchesTracked.ItemInt(); n != 2 {
		t.Errorf("num_batches_tracked = %d, want 2", n)
	}
	y := values(bn.Forward(x, false))
	want := (1 - wantMean[0]) / math.Sqrt(wantVar[0]+1e-5)
	if math.Abs(y[0]-want) > 1e-12 {
		t.Errorf("eval output %v, want %v", y[0], want)
	}
	if n := bn.NumBatchesTracked.ItemInt(); n != 2 {
		t.Errorf("evaluation changed num_batches_tracked to %d", n)
	}
	// A one-row training batch gives β and leaves the statistics alone.
	one := values(bn.Forward(torch.FromSlice([]float64{7, -3}, 1, 2).To(dev, false), true))
	if !slices.Equal(one, []float64{0, 0}) || math.Abs(values(bn.RunningMean)[0]-wantMean[0]) > 1e-12 || bn.NumBatchesTracked.ItemInt() != 2 {
		t.Errorf("one-row batch: output %v, running mean %v, tracked %d", one, values(bn.RunningMean), bn.NumBatchesTracked.ItemInt())
	}
	// Dropout is the identity in evaluation and with P = 0.
	d := nn.Dropout{P: 0.5}
	if got := values(d.Forward(x, false)); !slices.Equal(got, values(x)) {
		t.Errorf("dropout in evaluation changed values: %v", got)
	}
	if got := values(nn.Dropout{}.Forward(x, true)); !slices.Equal(got, values(x)) {
		t.Errorf("dropout with P=0 changed values: %v", got)
	}
}

// A saved store loads into a fresh one bit for bit; a store of another shape
// is refused with every mismatched key named.
func TestStoreSaveLoad(t *testing.T) {
	sc := torch.NewScope()
	defer sc.Close()
	build := func(d int64, extra bool) *nn.Store {
		s := nn.NewStore(testdevice.Get(t), torch.Float32)
		nn.NewLinear(s.Root().Sub("lin"), 3, d, true)
		nn.NewBatchNorm1d(s.Root().Sub("bn"), d)
		if extra {
			nn.NewLinear(s.Root().Sub("extra"), 2, 2, false)
		}
		return s
	}
	a, b := build(4, false), build(4, false)
	defer a.Free()
	defer b.Free()
	path := t.TempDir() + "/store.pt"
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(path); err != nil {
		t.Fatal(err)
	}
	for i, v := range a.Vars() {
		if !slices.Equal(values(v.Tensor), values(b.Vars()[i].Tensor)) {
			t.Errorf("%s differs after loading", v.Name)
		}
	}
	c := build(5, true)
	defer c.Free()
	err := c.Load(path)
	for _, want := range []string{"missing keys: extra.weight", "shape mismatch: lin.weight (want [5 3], file has [4 3])", "bn.running_var"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if err := c.Load(path + ".absent"); err == nil {
		t.Error("loading a missing file succeeded")
	}
}

// In bfloat16 compute a Linear layer's output and gradients are float32 and
// stay near float64 products of the unrounded float32 values, within a bound
// set by the kernels that really run on this CPU or GPU; some values must
// differ from float64's by more than float32 rounding could (the products
// really are bfloat16). y = xWᵀ + bias, and ∂L/∂x, ∂L/∂W (a sum over the
// rows) and ∂L/∂bias take the same form Σₖ aₖbₖ (+ bias). With u = 2⁻⁹,
// bfloat16's unit roundoff:
//
//   - oneDNN, on CPUs with avx512_bf16 or AMX (the only ones --precision bf16
//     runs on): inputs, weights and result rounded to bfloat16, float32
//     accumulation, |ŷ − y| ≤ 2.2u·Σₖ|aₖ||bₖ| + 1.1u|y| + u|bias|;
//   - libtorch's own kernels, which a CPU without avx512 takes (and any CPU
//     with oneDNN switched off, as here): some of them keep the partial sums
//     in bfloat16, rounding after each of the n terms, so the bound is the
//     recursive summation's, |ŷ − y| ≤ γ(n+3)·Σₖ|aₖ||bₖ| + u|y| + u|bias|
//     with γ(m) = mu/(1 − mu). The product refuses bf16 on such CPUs; the
//     layer must still compute bfloat16 products correctly there;
//   - cuBLAS, when the tests run on a GPU ($MICROGRAPH_TEST_DEVICE): libtorch
//     lets it reduce split sums in bfloat16 (PyTorch's
//     allow_bf16_reduced_precision_reduction, on by default), so the bound is
//     the same recursive summation's.
func TestLinearBFloat16Products(t *testing.T) {
	const u = 1.0 / 512
	gamma := func(m int) float64 { return float64(m) * u / (1 - float64(m)*u) }
	oneDNNBound := func(_ int, abs, y, bias float64) float64 { return 2.2*u*abs + 1.1*u*math.Abs(y) + u*math.Abs(bias) }
	recursiveBound := func(terms int, abs, y, bias float64) float64 {
		return gamma(terms+3)*abs + u*math.Abs(y) + u*math.Abs(bias)
	}
	kernels := []struct {
		name   string
		dev    torch.Device
		oneDNN bool // on: checked only where --precision bf16 runs; off: switched off
		bound  func(terms int, abs, y, bias float64) float64
	}{
		{"oneDNN", torch.CPU, true, oneDNNBound},
		{"libtorch kernels", torch.CPU, false, recursiveBound},
		{"cuBLAS", testdevice.Get(t), false, recursiveBound},
	}
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			switch {
			case k.name == "cuBLAS" && !k.dev.IsCUDA():
				t.Skipf("the tests run on the CPU (%s is not cuda)", testdevice.Env)
			case k.dev.IsCUDA():
				if err := torch.CheckBFloat16(k.dev); err != nil {
					t.Skipf("no bfloat16 products on this GPU: %v", err)
				}
			case k.oneDNN:
				if err := torch.CheckBFloat16(torch.CPU); err != nil {
					t.Skipf("oneDNN's bfloat16 products are checked only where --precision bf16 runs: %v", err)
				}
			default:
				defer libtorchtest.SetOneDNN(libtorchtest.SetOneDNN(false))
			}
			checkLinearBFloat16(t, k.dev, k.bound)
		})
	}
}

// checkLinearBFloat16 runs one bfloat16 Linear layer forward and backward
// on dev and compares each output with float64 within bound(terms, Σ|ab|,
// y, bias).
func checkLinearBFloat16(t *testing.T, dev torch.Device, bound func(terms int, abs, y, bias float64) float64) {
	const rows, in, out = 64, 300, 40
	store := nn.NewStore(dev, torch.Float32)
	defer store.Free()
	lin := nn.NewLinear(store.Root(), in, out, true)
	store.SetCompute(torch.BFloat16)
	rng := rand.New(rand.NewPCG(1, 2))
	normal := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x := torch.FromSlice(normal(rows*in), rows, in).To(dev, false).Unscope()
	g := torch.FromSlice(normal(rows*out), rows, out).To(dev, false).Unscope() // ∂L/∂y
	x.SetRequiresGrad(true)
	y := lin.Forward(x)
	y.Mul(g).Sum().Backward()
	for _, p := range []*torch.Tensor{y, lin.Weight, lin.Bias, lin.Weight.Grad(), lin.Bias.Grad(), x.Grad()} {
		if p.DType() != torch.Float32 {
			t.Fatalf("an output, parameter or gradient is %v, want float32", p.DType())
		}
	}
	X, G, W, B := values(x), values(g), values(lin.Weight), values(lin.Bias)
	// check compares got (n×k) with Σ_l term(i, j, l) + bias(j).
	check := func(what string, got []float64, n, k, terms int, term func(i, j, l int) float64, bias func(j int) float64) {
		t.Helper()
		beyondFloat32 := 0
		for i := range n {
			for j := range k {
				var want, abs float64
				for l := range terms {
					p := term(i, j, l)
					want += p
					abs += math.Abs(p)
				}
				want += bias(j)
				limit := bound(terms, abs, want, bias(j))
				d := math.Abs(got[i*k+j] - want)
				if d > limit {
					t.Fatalf("%s[%d,%d] = %v, float64 %v: off by %.3g, bound %.3g", what, i, j, got[i*k+j], want, d, limit)
				}
				if d > 1e-5*(abs+math.Abs(bias(j))) {
					beyondFloat32++
				}
			}
		}
		if beyondFloat32 == 0 {
			t.Errorf("%s: every value is within float32 rounding of float64's: not a bfloat16 product", what)
		}
	}
	none := func(int) float64 { return 0 }
	check("y", values(y), rows, out, in, func(i, j, l int) float64 { return X[i*in+l] * W[j*in+l] }, func(j int) float64 { return B[j] })
	check("∂L/∂x", values(x.Grad()), rows, in, out, func(i, j, l int) float64 { return G[i*out+l] * W[l*in+j] }, none)
	check("∂L/∂W", values(lin.Weight.Grad()), out, in, rows, func(i, j, l int) float64 { return G[l*out+i] * X[l*in+j] }, none)
	check("∂L/∂bias", values(lin.Bias.Grad()), 1, out, rows, func(_, j, l int) float64 { return G[l*out+j] }, none)
}
