package torch_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

var xs = []float64{-2, -0.5, 0, 0.25, 1, 3}

func TestUnaryValues(t *testing.T) {
	scope(t)
	x := f64(t, xs, 2, 3)
	pos := f64(t, []float64{0.25, 1, 4, 9}, 4)
	tests := []struct {
		name string
		got  *torch.Tensor
		in   []float64
		f    func(float64) float64
	}{
		{"neg", x.Neg(), xs, func(v float64) float64 { return -v }},
		{"exp", x.Exp(), xs, math.Exp},
		{"abs", x.Abs(), xs, math.Abs},
		{"relu", x.Relu(), xs, func(v float64) float64 { return math.Max(v, 0) }},
		{"log", pos.Log(), []float64{0.25, 1, 4, 9}, math.Log},
		{"sqrt", pos.Sqrt(), []float64{0.25, 1, 4, 9}, math.Sqrt},
		{"reciprocal", pos.Reciprocal(), []float64{0.25, 1, 4, 9}, func(v float64) float64 { return 1 / v }},
	}
	for _, tc := range tests {
		want := mapf(tc.in, tc.f)
		assertTensor(t, tc.name, tc.got, tc.got.Shape(), want, 1e-12)
		if tc.got.DType() != torch.Float64 {
			t.Errorf("%s: dtype %s", tc.name, tc.got.DType())
		}
	}
	finite := f64(t, []float64{1, math.Inf(1), math.NaN(), math.Inf(-1)}).IsFinite()
	assertTensor(t, "isfinite", finite, []int64{4}, []float64{1, 0, 0, 0}, 0)
	not := f64(t, []float64{0, 2}).LogicalNot()
	assertTensor(t, "logical_not", not, []int64{2}, []float64{1, 0}, 0)
}

func TestBinaryValues(t *testing.T) {
	scope(t)
	a := f64(t, []float64{1, -2, 3, 7.5}, 2, 2)
	b := f64(t, []float64{2, 4}, 2) // broadcast over rows
	tests := []struct {
		name string
		got  *torch.Tensor
		want []float64
	}{
		{"add", a.Add(b), []float64{3, 2, 5, 11.5}},
		{"sub", a.Sub(b), []float64{-1, -6, 1, 3.5}},
		{"mul", a.Mul(b), []float64{2, -8, 6, 30}},
		{"div", a.Div(b), []float64{0.5, -0.5, 1.5, 1.875}},
		{"minimum", a.Minimum(b), []float64{1, -2, 2, 4}},
		{"ne", a.Ne(b), []float64{1, 1, 1, 1}},
		{"le", a.Le(f64(t, []float64{1, 1}, 2)), []float64{1, 1, 0, 0}},
		{"add_scalar", a.AddScalar(0.5), []float64{1.5, -1.5, 3.5, 8}},
		{"sub_scalar", a.SubScalar(1), []float64{0, -3, 2, 6.5}},
		{"mul_scalar", a.MulScalar(-2), []float64{-2, 4, -6, -15}},
		{"div_scalar", a.DivScalar(4), []float64{0.25, -0.5, 0.75, 1.875}},
		{"pow_scalar", a.PowScalar(2), []float64{1, 4, 9, 56.25}},
		{"remainder_scalar", a.RemainderScalar(3), []float64{1, 1, 0, 1.5}},
		{"floor_divide_scalar", a.FloorDivideScalar(2), []float64{0, -1, 1, 3}},
		{"ge_scalar", a.GeScalar(3), []float64{0, 0, 1, 1}},
		{"clamp_min", a.ClampMin(2), []float64{2, 2, 3, 7.5}},
		{"clamp_max", a.ClampMax(2), []float64{1, -2, 2, 2}},
		{"where", torch.Where(a.GtScalar(0), a, b.Neg()), []float64{1, -4, 3, 7.5}},
		{"masked_fill", a.MaskedFill(a.LtScalar(2), 9), []float64{9, 9, 3, 7.5}},
	}
	for _, tc := range tests {
		assertTensor(t, tc.name, tc.got, []int64{2, 2}, tc.want, 1e-12)
	}
}

// Integer tensors stay integral with whole-number scalars, as with Python
// scalars; true division and fractional scalars promote to float32.
func TestScalarPromotion(t *testing.T) {
	scope(t)
	n := i64(t, []int64{7, -3})
	tests := []struct {
		name  string
		got   *torch.Tensor
		dtype torch.DType
		want  []float64
	}{
		{"int+1", n.AddScalar(1), torch.Int64, []float64{8, -2}},
		{"int*3", n.MulScalar(3), torch.Int64, []float64{21, -9}},
		{"int%4", n.RemainderScalar(4), torch.Int64, []float64{3, 1}},
		{"int//2", n.FloorDivideScalar(2), torch.Int64, []float64{3, -2}},
		{"int/2", n.DivScalar(2), torch.Float32, []float64{3.5, -1.5}},
		{"int+0.5", n.AddScalar(0.5), torch.Float32, []float64{7.5, -2.5}},
		{"f32+scalar", torch.FromSlice([]float32{1}).AddScalar(1e-7), torch.Float32, []float64{float64(float32(1) + float32(1e-7))}},
	}
	for _, tc := range tests {
		if tc.got.DType() != tc.dtype {
			t.Errorf("%s: dtype %s, want %s", tc.name, tc.got.DType(), tc.dtype)
		}
		assertTensor(t, tc.name, tc.got, tc.got.Shape(), tc.want, 0)
	}
}

func TestReductionValues(t *testing.T) {
	scope(t)
	a := f64(t, []float64{1, 5, -2, 4, 0, 3}, 2, 3)
	tests := []struct {
		name  string
		got   *torch.Tensor
		shape []int64
		want  []float64
	}{
		{"sum", a.Sum(), []int64{}, []float64{11}},
		{"sum_dim0", a.SumDim(0, false), []int64{3}, []float64{5, 5, 1}},
		{"sum_dim1_keep", a.SumDim(1, true), []int64{2, 1}, []float64{4, 7}},
		{"mean", a.Mean(), []int64{}, []float64{11.0 / 6}},
		{"mean_dim1", a.MeanDim(1, false), []int64{2}, []float64{4.0 / 3, 7.0 / 3}},
		{"max", a.Max(), []int64{}, []float64{5}},
		{"min", a.Min(), []int64{}, []float64{-2}},
		{"amax_dim0", a.Amax(0, false), []int64{3}, []float64{4, 5, 3}},
		{"all", a.GtScalar(-3).All(), []int64{}, []float64{1}},
		{"argmax_dim0", a.Argmax(0, false), []int64{3}, []float64{1, 0, 1}},
		{"nonzero", a.Reshape(-1).Nonzero(), []int64{5}, []float64{0, 1, 2, 3, 5}},
		{"nonzero_none", a.Reshape(-1).GtScalar(9).Nonzero(), []int64{0}, nil},
		{"norm1_dim1", a.NormDim(1, 1, false), []int64{2}, []float64{8, 7}},
		{"cumsum_dim1", a.Cumsum(1), []int64{2, 3}, []float64{1, 6, 4, 4, 4, 7}},
	}
	for _, tc := range tests {
		assertTensor(t, tc.name, tc.got, tc.shape, tc.want, 1e-12)
	}
}

func TestSoftmaxAndNormalize(t *testing.T) {
	scope(t)
	rows := [][]float64{{1, 2, 3}, {-1, 0, 1000}}
	x := f64(t, append(slices.Clone(rows[0]), rows[1]...), 2, 3)
	var soft, logSoft, unit []float64
	for _, r := range rows {
		m := slices.Max(r)
		var z, n2 float64
		for _, v := range r {
			z += math.Exp(v - m)
			n2 += v * v
		}
		for _, v := range r {
			soft = append(soft, math.Exp(v-m)/z)
			logSoft = append(logSoft, v-m-math.Log(z))
			unit = append(unit, v/math.Sqrt(n2))
		}
	}
	assertTensor(t, "softmax", x.Softmax(1), []int64{2, 3}, soft, 1e-12)
	assertTensor(t, "log_softmax", x.LogSoftmax(1), []int64{2, 3}, logSoft, 1e-12)
	assertTensor(t, "normalize", x.Normalize(2, 1, 1e-12), []int64{2, 3}, unit, 1e-12)
	// A zero row stays zero instead of dividing by zero.
	z := f64(t, []float64{0, 0}, 1, 2).Normalize(2, 1, 1e-12)
	assertTensor(t, "normalize_zero", z, []int64{1, 2}, []float64{0, 0}, 0)
}

func TestLinearAlgebra(t *testing.T) {
	scope(t)
	a := f64(t, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	w := f64(t, []float64{1, 0, -1, 2, 1, 0}, 2, 3)
	b := f64(t, []float64{0.5, -1}, 2)
	assertTensor(t, "matmul", a.MatMul(w.T()), []int64{2, 2}, []float64{-2, 4, -2, 13}, 1e-12)
	assertTensor(t, "linear", torch.Linear(a, w, b), []int64{2, 2}, []float64{-1.5, 3, -1.5, 12}, 1e-12)
	assertTensor(t, "linear_nobias", torch.Linear(a, w, nil), []int64{2, 2}, []float64{-2, 4, -2, 13}, 1e-12)
}

func TestShapeOps(t *testing.T) {
	scope(t)
	a := f64(t, []float64{0, 1, 2, 3, 4, 5}, 2, 3)
	tests := []struct {
		name  string
		got   *torch.Tensor
		shape []int64
		want  []float64
	}{
		{"reshape", a.Reshape(3, -1), []int64{3, 2}, []float64{0, 1, 2, 3, 4, 5}},
		{"transpose", a.Transpose(0, 1), []int64{3, 2}, []float64{0, 3, 1, 4, 2, 5}},
		{"t", a.T(), []int64{3, 2}, []float64{0, 3, 1, 4, 2, 5}},
		{"unsqueeze", a.Unsqueeze(1), []int64{2, 1, 3}, []float64{0, 1, 2, 3, 4, 5}},
		{"squeeze", a.Unsqueeze(0).Squeeze(0), []int64{2, 3}, []float64{0, 1, 2, 3, 4, 5}},
		{"narrow", a.Narrow(1, 1, 2), []int64{2, 2}, []float64{1, 2, 4, 5}},
		{"expand", f64(t, []float64{7, 8}, 2, 1).Expand(-1, 3), []int64{2, 3}, []float64{7, 7, 7, 8, 8, 8}},
		{"cat0", torch.Cat([]*torch.Tensor{a, a.Narrow(0, 0, 1)}, 0), []int64{3, 3}, []float64{0, 1, 2, 3, 4, 5, 0, 1, 2}},
		{"cat1", torch.Cat([]*torch.Tensor{a, a.Narrow(1, 2, 1)}, 1), []int64{2, 4}, []float64{0, 1, 2, 2, 3, 4, 5, 5}},
		{"stack", torch.Stack([]*torch.Tensor{a.Narrow(0, 0, 1).Reshape(3), a.Narrow(0, 1, 1).Reshape(3)}, 1), []int64{3, 2}, []float64{0, 3, 1, 4, 2, 5}},
		{"clone", a.Clone(), []int64{2, 3}, []float64{0, 1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		assertTensor(t, tc.name, tc.got, tc.shape, tc.want, 0)
	}
}

func TestIndexingOps(t *testing.T) {
	scope(t)
	a := f64(t, []float64{0, 1, 2, 3, 4, 5}, 3, 2)
	src := f64(t, []float64{10, 20, 30, 40, 50, 60, 70, 80}, 4, 2)
	index := i64(t, []int64{2, 0, 2, 1})
	tests := []struct {
		name  string
		got   *torch.Tensor
		shape []int64
		want  []float64
	}{
		{"index_select", a.IndexSelect(0, i64(t, []int64{2, 0, 2})), []int64{3, 2}, []float64{4, 5, 0, 1, 4, 5}},
		{"gather", a.Gather(1, i64(t, []int64{1, 0, 0, 0, 1, 1}, 3, 2)), []int64{3, 2}, []float64{1, 0, 2, 2, 5, 5}},
		{"index_add", a.IndexAdd(0, index, src), []int64{3, 2}, []float64{30, 41, 72, 83, 64, 85}},
		{"one_hot", i64(t, []int64{2, 0}).OneHot(3), []int64{2, 3}, []float64{0, 0, 1, 1, 0, 0}},
	}
	for _, tc := range tests {
		assertTensor(t, tc.name, tc.got, tc.shape, tc.want, 0)
	}
}

func TestSegmentReduce(t *testing.T) {
	scope(t)
	// Rows 0-1, (empty), 2, 3-4: segments of a CSR over 5 rows.
	data := f64(t, []float64{1, -1, 3, 2, -5, 7, 4, 4, 0, -9}, 5, 2)
	offsets := i64(t, []int64{0, 2, 2, 3, 5})
	inf := math.Inf(1)
	tests := []struct {
		r    torch.Reduction
		want []float64
	}{
		{torch.ReduceSum, []float64{4, 1, 0, 0, -5, 7, 4, -5}},
		{torch.ReduceMean, []float64{2, 0.5, math.NaN(), math.NaN(), -5, 7, 2, -2.5}},
		{torch.ReduceMax, []float64{3, 2, -inf, -inf, -5, 7, 4, 4}},
		{torch.ReduceMin, []float64{1, -1, inf, inf, -5, 7, 0, -9}},
	}
	for _, tc := range tests {
		assertTensor(t, "segment_reduce", data.SegmentReduce(offsets, tc.r), []int64{4, 2}, tc.want, 1e-12)
	}
	// No rows at all (a batch without edges): every segment is empty.
	empty := f64(t, nil, 0, 2)
	none := i64(t, []int64{0, 0, 0})
	for _, tc := range tests {
		w := tc.want[2:4] // segment 1 above is empty
		assertTensor(t, "segment_reduce_empty", empty.SegmentReduce(none, tc.r), []int64{2, 2}, []float64{w[0], w[1], w[0], w[1]}, 0)
	}
}

func TestNNFunctions(t *testing.T) {
	scope(t)
	w := f64(t, []float64{1, 2, 3, 4, 5, 6}, 3, 2)
	assertTensor(t, "embedding", torch.Embedding(w, i64(t, []int64{2, 2, 0}, 3)), []int64{3, 2}, []float64{5, 6, 5, 6, 1, 2}, 0)

	// Batch norm of a 3×2 batch: channel 0 = {1, 2, 6}, channel 1 = {0, 0, 3}.
	x := f64(t, []float64{1, 0, 2, 0, 6, 3}, 3, 2)
	gamma := f64(t, []float64{2, 1}, 2)
	beta := f64(t, []float64{0, 1}, 2)
	rm := f64(t, []float64{0, 0}, 2)
	rv := f64(t, []float64{1, 1}, 2)
	eps := 1e-5
	var want []float64
	mean := []float64{3, 1}
	biased := []float64{(4 + 1 + 9) / 3.0, (1 + 1 + 4) / 3.0}
	in := [][]float64{{1, 0}, {2, 0}, {6, 3}}
	for _, row := range in {
		for c := range 2 {
			g := []float64{2, 1}[c]
			bb := []float64{0, 1}[c]
			want = append(want, (row[c]-mean[c])/math.Sqrt(biased[c]+eps)*g+bb)
		}
	}
	y := torch.BatchNorm(x, gamma, beta, rm, rv, true, 0.1, eps)
	assertTensor(t, "batch_norm_train", y, []int64{3, 2}, want, 1e-12)
	// Running stats move 10% towards the batch, with the unbiased variance.
	assertTensor(t, "running_mean", rm, []int64{2}, []float64{0.3, 0.1}, 1e-12)
	assertTensor(t, "running_var", rv, []int64{2}, []float64{0.9 + 0.1*7, 0.9 + 0.1*3}, 1e-12)
	ev := torch.BatchNorm(x, gamma, beta, rm, rv, false, 0.1, eps)
	want = want[:0]
	for _, row := range in {
		for c := range 2 {
			g := []float64{2, 1}[c]
			bb := []float64{0, 1}[c]
			m := []float64{0.3, 0.1}[c]
			v := []float64{1.6, 1.2}[c]
			want = append(want, (row[c]-m)/math.Sqrt(v+eps)*g+bb)
		}
	}
	assertTensor(t, "batch_norm_eval", ev, []int64{3, 2}, want, 1e-12)
}

func TestCreationAndTransfer(t *testing.T) {
	scope(t)
	dev := testdevice.Get(t)
	o := torch.Options{DType: torch.Float64, Device: dev}
	assertTensor(t, "zeros", torch.Zeros([]int64{2, 2}, o), []int64{2, 2}, []float64{0, 0, 0, 0}, 0)
	assertTensor(t, "ones", torch.Ones([]int64{3}, o), []int64{3}, []float64{1, 1, 1}, 0)
	assertTensor(t, "full", torch.Full([]int64{2}, -2.5, o), []int64{2}, []float64{-2.5, -2.5}, 0)
	assertTensor(t, "arange", torch.Arange(1, 2, 0.25, o), []int64{4}, []float64{1, 1.25, 1.5, 1.75}, 0)
	ai := torch.Arange(0, 5, 2, torch.Options{DType: torch.Int64, Device: dev})
	if ai.DType() != torch.Int64 {
		t.Errorf("integer arange has dtype %s", ai.DType())
	}
	assertTensor(t, "arange_int", ai, []int64{3}, []float64{0, 2, 4}, 0)
	if got := torch.Empty([]int64{4, 5}, o).Shape(); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("empty shape %v", got)
	}
	if d := torch.Zeros([]int64{1}, o).Device(); d != dev {
		t.Errorf("device %v, want %v", d, dev)
	}
	if got := ai.Options(); got != (torch.Options{DType: torch.Int64, Device: dev}) {
		t.Errorf("Options of an int64 tensor on %v: %+v", dev, got)
	}

	// Round trips of every element type, and conversions.
	if got := torch.ToSlice[float32](torch.FromSlice([]float32{1.5, -2})); !slices.Equal(got, []float32{1.5, -2}) {
		t.Errorf("float32 round trip: %v", got)
	}
	if got := torch.ToSlice[int32](torch.FromSlice([]int32{-7, 1 << 30})); !slices.Equal(got, []int32{-7, 1 << 30}) {
		t.Errorf("int32 round trip: %v", got)
	}
	if got := torch.ToSlice[int64](torch.FromSlice([]int64{-7, 1 << 62})); !slices.Equal(got, []int64{-7, 1 << 62}) {
		t.Errorf("int64 round trip: %v", got)
	}
	if got := torch.ToSlice[bool](torch.FromSlice([]bool{true, false, true})); !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("bool round trip: %v", got)
	}
	if got := torch.ToSlice[uint8](torch.FromSlice([]uint8{0, 255})); !slices.Equal(got, []uint8{0, 255}) {
		t.Errorf("uint8 round trip: %v", got)
	}
	if got := torch.ToSlice[float64](torch.FromSlice([]float64{math.Pi}).To(dev, false)); got[0] != math.Pi {
		t.Errorf("float64 via %v: %v", dev, got)
	}
	assertTensor(t, "to_dtype", torch.FromSlice([]float64{2.75, -1.5}).ToDType(torch.Int64), []int64{2}, []float64{2, -1}, 0)
	if err := torch.Catch(func() { torch.ToSlice[float32](torch.FromSlice([]int64{1})) }); err == nil {
		t.Error("ToSlice with the wrong element type did not fail")
	}
	if err := torch.Catch(func() { torch.FromSlice([]float32{1, 2, 3}, 2, 2) }); err == nil {
		t.Error("FromSlice with a shape that does not fit did not fail")
	}

	// In-place writes.
	dst := torch.Zeros([]int64{3}, o)
	dst.CopyFrom(torch.FromSlice([]float32{1, 2, 3}), false)
	assertTensor(t, "copy_from", dst, []int64{3}, []float64{1, 2, 3}, 0)
	dst.Fill(4)
	dst.AddScalarInPlace(0.5)
	assertTensor(t, "fill", dst, []int64{3}, []float64{4.5, 4.5, 4.5}, 0)
	if got := torch.FromSlice([]float64{2.5}).Item(); got != 2.5 {
		t.Errorf("Item = %v", got)
	}
	if got := torch.FromSlice([]int64{1<<53 + 1}).ItemInt(); got != 1<<53+1 {
		t.Errorf("ItemInt = %v", got)
	}

	// HostData aliases the tensor's memory.
	h := torch.Zeros([]int64{3}, torch.Options{DType: torch.Int64, Pinned: true})
	torch.HostData[int64](h)[1] = 42
	assertTensor(t, "host_data", h, []int64{3}, []float64{0, 42, 0}, 0)
}

func TestRandomOps(t *testing.T) {
	scope(t)
	dev := testdevice.Get(t)
	o := torch.Options{DType: torch.Float64, Device: dev}
	torch.ManualSeed(7)
	u := values(torch.Rand([]int64{10000}, o))
	var um float64
	for i := range u {
		if u[i] < 0 || u[i] >= 1 {
			t.Fatalf("rand value %v outside [0, 1)", u[i])
		}
		um += u[i] / 1e4
	}
	// Five standard errors: 1/√(12·10⁴) for the uniform mean.
	if math.Abs(um-0.5) > 5*0.00289 {
		t.Errorf("uniform mean %v, want 0.5", um)
	}
	b := values(torch.Bernoulli(f64(t, []float64{0, 1, 0, 1, 1})))
	if !slices.Equal(b, []float64{0, 1, 0, 1, 1}) {
		t.Errorf("bernoulli of 0/1 probabilities: %v", b)
	}
	x := torch.Ones([]int64{20000}, o)
	d := values(torch.Dropout(x, 0.25, true))
	kept := 0
	for _, v := range d {
		switch {
		case v == 0:
		case math.Abs(v-4.0/3) < 1e-12:
			kept++
		default:
			t.Fatalf("dropout value %v is neither 0 nor 1/(1-p)", v)
		}
	}
	if f := float64(kept) / 20000; math.Abs(f-0.75) > 0.015 {
		t.Errorf("dropout kept %.3f, want 0.75", f)
	}
	assertTensor(t, "dropout_eval", torch.Dropout(x, 0.25, false).Narrow(0, 0, 3), []int64{3}, []float64{1, 1, 1}, 0)
	w := torch.Empty([]int64{1000}, o)
	w.FillUniform(-0.5, 0.25)
	if lo, hi := slices.Min(values(w)), slices.Max(values(w)); lo < -0.5 || hi >= 0.25 {
		t.Errorf("uniform fill outside [-0.5, 0.25): %v %v", lo, hi)
	}
}

// The generator state restores the exact sequence, as a resumed run needs.
func TestRNGStateRoundTrip(t *testing.T) {
	scope(t)
	dev := testdevice.Get(t)
	o := torch.Options{DType: torch.Float64, Device: dev}
	torch.ManualSeed(123)
	first := values(torch.Rand([]int64{5}, o))
	torch.ManualSeed(123)
	if again := values(torch.Rand([]int64{5}, o)); !slices.Equal(first, again) {
		t.Fatalf("same seed, different draws: %v vs %v", first, again)
	}
	state, err := torch.RNGState(dev)
	if err != nil {
		t.Fatal(err)
	}
	next := values(torch.Rand([]int64{5}, o))
	torch.Rand([]int64{7}, o) // move on
	if err := torch.SetRNGState(dev, state); err != nil {
		t.Fatal(err)
	}
	if replay := values(torch.Rand([]int64{5}, o)); !slices.Equal(next, replay) {
		t.Errorf("restored state gives %v, want %v", replay, next)
	}
	if err := torch.SetRNGState(dev, torch.Zeros([]int64{3}, torch.Options{DType: torch.Uint8})); err == nil {
		t.Error("a malformed generator state was accepted")
	}
}

// RNGStates snapshots the generator of every device this process has, and
// SetRNGStates replays each one's draws; names of absent devices are refused
// before anything changes.
func TestRNGStatesCoverEveryGenerator(t *testing.T) {
	scope(t)
	devices := torch.Generators()
	draws := func() [][]float64 {
		var out [][]float64
		for _, d := range devices {
			out = append(out, values(torch.Rand([]int64{6}, torch.Options{DType: torch.Float64, Device: d})))
		}
		return out
	}
	torch.ManualSeed(5)
	draws()
	states, err := torch.RNGStates()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range states {
		names = append(names, n.Name)
	}
	want := []string{"cpu"}
	for i := range torch.CUDADeviceCount() {
		want = append(want, fmt.Sprintf("cuda:%d", i))
	}
	if !slices.Equal(names, want) {
		t.Fatalf("RNGStates names %v, want %v", names, want)
	}
	next := draws()
	draws() // move every generator on
	if err := torch.SetRNGStates(states); err != nil {
		t.Fatal(err)
	}
	replay := draws()
	for i, d := range devices {
		if !slices.Equal(replay[i], next[i]) {
			t.Errorf("%s: restored state gives %v, want %v", d, replay[i], next[i])
		}
	}

	// Refused names leave every generator where it was: at the snapshot.
	if err := torch.SetRNGStates(states); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"auto", "cuda", fmt.Sprintf("cuda:%d", torch.CUDADeviceCount()), "tpu:0"} {
		bad := append(slices.Clone(states), torch.Named{Name: name, Tensor: states[0].Tensor})
		if err := torch.SetRNGStates(bad); err == nil {
			t.Errorf("a state named %q was accepted", name)
		}
	}
	if got := draws(); !slices.EqualFunc(got, next, slices.Equal[[]float64]) {
		t.Error("a refused SetRNGStates changed a generator")
	}
}

func TestParseDevice(t *testing.T) {
	cuda := torch.CUDAAvailable()
	tests := []struct {
		in      string
		want    torch.Device
		wantErr bool
	}{
		{"cpu", torch.CPU, false},
		{"cuda", torch.CUDA(0), !cuda},
		{"cuda:0", torch.CUDA(0), !cuda},
		{"cuda:99", torch.CPU, true},
		{"cuda:-1", torch.CPU, true},
		{"cuda0", torch.CPU, true},
		{"gpu", torch.CPU, true},
		{"", torch.CPU, true},
	}
	for _, tc := range tests {
		got, err := torch.ParseDevice(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseDevice(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("ParseDevice(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	auto, err := torch.ParseDevice("auto")
	if err != nil || auto.IsCUDA() != cuda {
		t.Errorf("ParseDevice(auto) = %v, %v; CUDA available: %v", auto, err, cuda)
	}
}

// Dropout's gradient is its mask scaled by 1/(1−p); masks follow the seed and
// restored generator states, as resumed runs need. So do the fused kernel's.
func TestDropoutMaskAndGradient(t *testing.T) {
	dev := testdevice.Get(t)
	t.Run("libtorch", func(t *testing.T) {
		checkDropout(t, dev, func(x *torch.Tensor, p float64) *torch.Tensor { return torch.Dropout(x, p, true) })
	})
	if torch.FusedKernels(dev) {
		t.Run("fused", func(t *testing.T) { checkDropout(t, dev, torch.FusedDropout) })
	}
}

func checkDropout(t *testing.T, dev torch.Device, dropout func(x *torch.Tensor, p float64) *torch.Tensor) {
	scope(t)
	o := torch.Options{DType: torch.Float64, Device: dev}
	draw := func() ([]float64, []float64) {
		x := torch.Rand([]int64{50, 40}, o).AddScalar(0.5).SetRequiresGrad(true)
		y := dropout(x, 0.3)
		y.Sum().Backward()
		return values(y.Div(x.Detach())), values(x.Grad())
	}
	torch.ManualSeed(21)
	ratio, grad := draw()
	for i := range ratio {
		if math.Abs(ratio[i]-grad[i]) > 1e-12 || (ratio[i] != 0 && math.Abs(ratio[i]-1/0.7) > 1e-12) {
			t.Fatalf("element %d: output/input %v, gradient %v", i, ratio[i], grad[i])
		}
	}
	torch.ManualSeed(21)
	if again, _ := draw(); !slices.Equal(again, ratio) {
		t.Error("the same seed gave another mask")
	}
	// The CPU kernel seeds its mask from the CPU generator, libtorch's CUDA
	// dropout from the GPU's Philox state: the snapshot must hold both.
	state, err := torch.RNGStates()
	if err != nil {
		t.Fatal(err)
	}
	next, _ := draw()
	if slices.Equal(next, ratio) {
		t.Error("consecutive calls gave the same mask")
	}
	if err := torch.SetRNGStates(state); err != nil {
		t.Fatal(err)
	}
	if replay, _ := draw(); !slices.Equal(replay, next) {
		t.Error("a restored generator state gave another mask")
	}
}

func TestEmbeddingBagSumChecksIndices(t *testing.T) {
	scope(t)
	w := torch.Ones([]int64{4, 2}, torch.Options{})
	bags := []func(w, idx *torch.Tensor) *torch.Tensor{torch.EmbeddingBagSum}
	if torch.FusedKernels(torch.CPU) {
		bags = append(bags, torch.FusedEmbeddingBagSum)
	}
	for i, bag := range bags {
		for _, idx := range [][]int64{{0, 4}, {-1, 0}} {
			if err := torch.Catch(func() { bag(w, torch.FromSlice(idx, 1, 2)) }); err == nil {
				t.Errorf("bag sum %d (1: fused): indices %v accepted", i, idx)
			}
		}
	}
}

// The fused kernels for row normalisation and training-mode batch norm agree
// with libtorch's ops: values, gradients and running statistics.
func TestKernelsMatchLibtorchOps(t *testing.T) {
	scope(t)
	if !torch.FusedKernels(torch.CPU) {
		t.Skip("this CPU lacks AVX2/FMA: libtorch's ops run everywhere")
	}
	data := make([]float64, 6*4)
	for i := range data {
		data[i] = math.Sin(float64(i)*1.7) * float64(i%5)
	}
	data[4], data[5], data[6], data[7] = 0, 0, 0, 0 // a zero row: normalize's clamp
	tests := []struct {
		name string
		f    func(x *torch.Tensor, fused bool) *torch.Tensor
	}{
		{"normalize", func(x *torch.Tensor, fused bool) *torch.Tensor {
			if fused {
				return torch.FusedNormalize(x, 1e-12)
			}
			return x.Normalize(2, 1, 1e-12)
		}},
		{"batch_norm", func(x *torch.Tensor, fused bool) *torch.Tensor {
			o := torch.Options{DType: torch.Float64}
			w, b := torch.FromSlice([]float64{1.5, -1, 0.5, 2}), torch.FromSlice([]float64{0.1, 0.2, -0.3, 0})
			rm, rv := torch.Zeros([]int64{4}, o), torch.Ones([]int64{4}, o)
			var y *torch.Tensor
			if fused {
				y = torch.FusedBatchNorm(x, w, b, rm, rv, 0.1, 1e-5)
			} else {
				y = torch.BatchNorm(x, w, b, rm, rv, true, 0.1, 1e-5)
			}
			return torch.Cat([]*torch.Tensor{y.Reshape(-1), rm, rv}, 0)
		}},
	}
	for _, tc := range tests {
		var outs, grads [2][]float64
		for i, fused := range []bool{true, false} {
			x := torch.FromSlice(data, 6, 4).SetRequiresGrad(true)
			y := tc.f(x, fused)
			w := make([]float64, y.Numel())
			for j := range w {
				w[j] = math.Cos(float64(j))
			}
			y.Reshape(-1).Mul(torch.FromSlice(w)).Sum().Backward()
			outs[i], grads[i] = values(y), values(x.Grad())
		}
		assertTensor(t, tc.name, torch.FromSlice(outs[0]), []int64{int64(len(outs[0]))}, outs[1], 1e-12)
		assertTensor(t, tc.name+" gradient", torch.FromSlice(grads[0]), []int64{int64(len(grads[0]))}, grads[1], 1e-12)
	}
}
