package evaluate

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// The recipe's settings as a whole run uses them (run, not the helpers
// that compute them): recipe_test.go pins each helper's arithmetic.

// Warm-up over 2 epochs of one step each, in a 3-epoch run: the run's first
// step is Adam's first, which moves every trained entry by lr·s·|g|/(|g|+ε)
// ≤ lr·s, so at the warm rate s = ½ no entry moves by more than lr/2 and
// some by nearly that; the second step is at the full rate (its moves, up to
// 1.0014·lr for Adam's second step, reach past ¾·lr), and so is the third.
// The warm-up thus counts steps over the run, not within an epoch, and the
// rate is set before the step it is for.
func TestWarmupInARun(t *testing.T) {
	const lr = 1e-3
	f, _ := baceRun(t, Recipe{LR: lr, WarmupEpochs: 2})
	f.cfg.Epochs = 3
	oneBatch := *f.split
	oneBatch.Train = oneBatch.Train[:f.cfg.BatchSize]
	f.split = &oneBatch
	var states []map[string][]float64
	var trained []string
	f.observe = func(epoch int, clf *model.Classifier) {
		states = append(states, hostState(clf))
		if trained == nil {
			for _, v := range clf.Store.Trainable() {
				trained = append(trained, v.Name)
			}
		}
	}
	if _, err := f.run(nil); err != nil {
		t.Fatal(err)
	}
	if len(states) != 4 {
		t.Fatalf("observed %d states, want the start and 3 epochs", len(states))
	}
	largestMove := func(epoch int) float64 {
		largest := 0.0
		for _, name := range trained {
			for i, v := range states[epoch][name] {
				largest = max(largest, math.Abs(v-states[epoch-1][name][i]))
			}
		}
		return largest
	}
	// float32 rounding of entries below 2 adds up to 2⁻²³ to a move.
	const rounding = 1.2e-7
	cases := []struct {
		epoch    int
		low, top float64 // the largest move's bounds
	}{
		{1, 0.45 * lr, 0.5*lr + rounding},
		{2, 0.75 * lr, 1.0014*lr + rounding}, // Adam's second step: m̂/√v̂ ≤ 1.00136 (Cauchy–Schwarz)
		{3, 0.75 * lr, 1.01 * lr},            // Adam's third step: a ratio m̂/√v̂ of at most about 1
	}
	for _, c := range cases {
		if got := largestMove(c.epoch); got < c.low || got > c.top {
			t.Errorf("epoch %d: the largest move is %.4g, want it in [%.4g, %.4g] (lr %g)", c.epoch, got, c.low, c.top, lr)
		}
	}
}

// The linear-probe start on a regression set without a valid part (a cv5
// fold of FreeSolv): the head's first outputs are, in the standardised
// units the run trains in (the train part's label mean and std), those of a
// ridge regression fitted here in float64 on nine tenths of the train part,
// its λ the one of the grid with the lowest RMSE on the held-out tenth. They
// are the probe's on every molecule whose standardised features lie at most
// 1 below the lowest fitted one (the head's shift), and the test asks that
// some molecules outside the fitted rows lie below that lowest value.
func TestLinearProbeStartOnRegressionWithoutValid(t *testing.T) {
	ds := freesolv(t)
	folds, err := CrossValidationSplits(ds.NumGraphs(), 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultFinetuneConfig()
	cfg.Encoder, cfg.Epochs, cfg.Recipe = recipeEncoder, 1, Recipe{LR: 1e-3, LinearProbeStart: true}
	dev := evaluationDevice(t)
	f := &finetuner{cfg: &cfg, name: "freesolv", ds: ds, regression: true, split: folds[0], dev: dev, workers: 1, seed: 3}
	all := make([]int32, ds.NumGraphs())
	for i := range all {
		all[i] = int32(i)
	}
	var head []float32      // the head's outputs before the first step, every molecule
	var state []torch.Named // the encoder's weights then (copies)
	f.observe = func(epoch int, clf *model.Classifier) {
		if epoch != 0 {
			return
		}
		if err := forEachBatch(ds, all, 1, dev, func(b *feed.Batch, _ *torch.Scope) {
			head = append(head, torch.ToSlice[float32](clf.Forward(b.Graph(dev), false))...)
		}); err != nil {
			t.Fatal(err)
		}
		for _, n := range clf.EncoderState() {
			state = append(state, torch.Named{Name: n.Name, Tensor: copyOf(n.Tensor)})
		}
	}
	run, err := f.run(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(state)
	emb, err := embedMolecules(ds, recipeEncoder, state, 0, dev, model.FP32, 1)
	if err != nil {
		t.Fatal(err)
	}
	z := torch.ToSlice[float32](emb)
	emb.Free()
	d := len(z) / ds.NumGraphs()

	fit, held := holdOutTenth(f.split.Train, f.seed)
	if len(held) != len(f.split.Train)/10 || len(fit)+len(held) != len(f.split.Train) {
		t.Fatalf("held out %d of %d train molecules, want a tenth", len(held), len(f.split.Train))
	}
	yMean, yStd := meanStd(ds.Labels, f.split.Train)
	y := func(g int32) float64 { return (float64(ds.Labels[g]) - yMean) / yStd }
	// Features standardised on the fitted rows, as float64.
	xMean, xStd := make([]float64, d), make([]float64, d)
	for j := range d {
		column := make([]float32, len(z)/d)
		for i := range column {
			column[i] = z[i*d+j]
		}
		xMean[j], xStd[j] = meanStd(column, fit)
		if xStd[j] < 1e-6 {
			xStd[j] = 1
		}
	}
	x := func(g int32) []float64 {
		row := make([]float64, d)
		for j := range d {
			row[j] = (float64(z[int(g)*d+j]) - xMean[j]) / xStd[j]
		}
		return row
	}
	lowest := math.Inf(1)
	for _, g := range fit {
		lowest = min(lowest, slices.Min(x(g)))
	}

	grid := DefaultLinearEvalConfig().L2Grid
	bestRMSE, best := math.Inf(1), ridge{}
	for _, lambda := range grid {
		r := fitRidge64(fit, x, y, lambda)
		var sum float64
		for _, g := range held {
			e := r.predict(x(g)) - y(g)
			sum += e * e
		}
		if rmse := math.Sqrt(sum / float64(len(held))); rmse < bestRMSE {
			bestRMSE, best = rmse, r
		}
	}
	if !slices.Equal(run.ProbeL2, []float64{best.lambda}) {
		t.Fatalf("the probe took λ %v; the lowest held-out RMSE (%.4f) is at λ %g", run.ProbeL2, bestRMSE, best.lambda)
	}

	inFit := map[int32]bool{}
	for _, g := range fit {
		inFit[g] = true
	}
	worst, beyond := 0.0, 0
	for _, g := range all {
		row := x(g)
		if slices.Min(row) < lowest-1 {
			continue // out of the shift's reach: ReLU may cut it
		}
		if !inFit[g] && slices.Min(row) < lowest {
			beyond++
		}
		want := best.predict(row)
		worst = max(worst, math.Abs(float64(head[g])-want)/(1+math.Abs(want)))
	}
	if worst > 1e-4 {
		t.Errorf("the head's first outputs differ from the probe's by up to %.2g (relative)", worst)
	}
	if beyond == 0 {
		t.Errorf("no molecule outside the fitted rows lies below their lowest standardised feature %.3f: the shift is not tested", lowest)
	}
	t.Logf("λ %g, held-out RMSE %.4f (standardised), %d molecules below the fitted rows' lowest feature, head against probe: %.2g",
		best.lambda, bestRMSE, beyond, worst)
}

// freesolv is FreeSolv (642 molecules, one regression task "expt"),
// featurised into the test's own folder with a scaffold split.
func freesolv(t *testing.T) *data.Dataset {
	t.Helper()
	csv := testenv.SharedData(t, "moleculenet/freesolv.csv")
	table, err := data.ReadTable(csv, data.Columns{Targets: []string{"expt"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "freesolv")
	if _, err := data.Featurize(table, dir, data.FeaturizeOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, types, err := downstreamSetup(dir, data.OpenOptions{CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if types[0] != data.Regression {
		t.Fatalf("FreeSolv's task is %s, want regression", types[0])
	}
	return ds
}

// meanStd is the mean and population std of v over the rows idx.
func meanStd(v []float32, idx []int32) (mean, std float64) {
	for _, i := range idx {
		mean += float64(v[i])
	}
	mean /= float64(len(idx))
	for _, i := range idx {
		std += (float64(v[i]) - mean) * (float64(v[i]) - mean)
	}
	return mean, math.Sqrt(std / float64(len(idx)))
}

// ridge is a float64 ridge regression x·w + b.
type ridge struct {
	lambda float64
	w      []float64
	b      float64
}

func (r ridge) predict(x []float64) float64 {
	p := r.b
	for j, v := range x {
		p += r.w[j] * v
	}
	return p
}

// fitRidge64 minimises 1/n Σ (x_i·w + b − y_i)² + λ‖w‖² over the rows idx by
// Gaussian elimination with partial pivoting of the centred normal equations.
func fitRidge64(idx []int32, x func(int32) []float64, y func(int32) float64, lambda float64) ridge {
	d := len(x(idx[0]))
	n := float64(len(idx))
	xMean, yMean := make([]float64, d), 0.0
	for _, g := range idx {
		for j, v := range x(g) {
			xMean[j] += v / n
		}
		yMean += y(g) / n
	}
	a := make([][]float64, d) // [XcᵀXc/n + λI | Xcᵀyc/n]
	for j := range a {
		a[j] = make([]float64, d+1)
		a[j][j] = lambda
	}
	for _, g := range idx {
		row, yc := x(g), y(g)-yMean
		for j := range d {
			for k := range d {
				a[j][k] += (row[j] - xMean[j]) * (row[k] - xMean[k]) / n
			}
			a[j][d] += (row[j] - xMean[j]) * yc / n
		}
	}
	for c := range d {
		p := c
		for r := c + 1; r < d; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < d; r++ {
			m := a[r][c] / a[c][c]
			for k := c; k <= d; k++ {
				a[r][k] -= m * a[c][k]
			}
		}
	}
	w := make([]float64, d)
	for c := d - 1; c >= 0; c-- {
		s := a[c][d]
		for k := c + 1; k < d; k++ {
			s -= a[c][k] * w[k]
		}
		w[c] = s / a[c][c]
	}
	b := yMean
	for j := range d {
		b -= w[j] * xMean[j]
	}
	return ridge{lambda: lambda, w: w, b: b}
}

// Averaging with the start in a run: the valid ROC-AUC a run records at each
// epoch is that of w·θ_start + (1−w)·θ_epoch (batch norm's running
// statistics averaged too, its counter the trained one), computed here by
// putting that average in place and evaluating; and training continues from
// θ_epoch: after every epoch the weights are, bit for bit, those of the same
// run without averaging. The trained weights' own figure differs in some
// epoch (else the test could not tell them apart).
func TestAverageWithStartInARun(t *testing.T) {
	const share = 0.25
	f, _ := baceRun(t, Recipe{LR: 1e-3, AverageWithStart: share})
	f.cfg.Epochs = 3
	twoBatches := *f.split
	twoBatches.Train = twoBatches.Train[:2*f.cfg.BatchSize]
	f.split = &twoBatches
	validLabels := splitLabels(f.ds, f.split.Valid)
	var start []*torch.Tensor
	var averaged, trained []float64   // valid ROC-AUC by epoch
	var states []map[string][]float64 // after each epoch's steps
	f.observe = func(epoch int, clf *model.Classifier) {
		var live []*torch.Tensor
		for _, n := range clf.Store.State() {
			if n.Tensor.DType() == torch.Float32 {
				live = append(live, n.Tensor)
			}
		}
		if epoch == 0 {
			for _, v := range live {
				start = append(start, copyOf(v))
			}
			return
		}
		states = append(states, hostState(clf))
		valid := func() float64 {
			fig, err := f.evaluate(clf, metrics.Standardizer{}, f.split.Valid, validLabels)
			if err != nil {
				t.Fatal(err)
			}
			return fig.value
		}
		trained = append(trained, valid())
		held := make([]*torch.Tensor, len(live))
		torch.NoGrad(func() {
			for i, v := range live {
				held[i] = copyOf(v)
				s := torch.NewScope()
				v.CopyFrom(start[i].MulScalar(share).Add(held[i].MulScalar(1-share)), false)
				s.Close()
			}
		})
		averaged = append(averaged, valid())
		torch.NoGrad(func() {
			for i, v := range live {
				v.CopyFrom(held[i], false)
				held[i].Free()
			}
		})
	}
	run, err := f.run(nil)
	for _, v := range start {
		v.Free()
	}
	if err != nil {
		t.Fatal(err)
	}
	differs := false
	for e := range f.cfg.Epochs {
		if got := float64(run.ValidROCAUC[e]); got != averaged[e] {
			t.Errorf("epoch %d: the run records valid ROC-AUC %v; the average with the start has %v (the trained weights %v)", e+1, got, averaged[e], trained[e])
		}
		differs = differs || trained[e] != averaged[e]
	}
	if !differs {
		t.Error("the trained weights score as their average with the start in every epoch: the test shows nothing")
	}
	plain, _ := baceRun(t, Recipe{LR: 1e-3})
	plain.cfg.Epochs, plain.split = f.cfg.Epochs, f.split
	epoch := 0
	plain.observe = func(e int, clf *model.Classifier) {
		if e == 0 {
			return
		}
		for name, v := range hostState(clf) {
			if !slices.Equal(v, states[e-1][name]) {
				t.Errorf("epoch %d: %s differs from the run without averaging: training went on from other weights", e, name)
			}
		}
		epoch = e
	}
	if _, err := plain.run(nil); err != nil || epoch != f.cfg.Epochs {
		t.Fatalf("the run without averaging: %v after %d epochs", err, epoch)
	}
}
