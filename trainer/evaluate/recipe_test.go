package evaluate

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/evaluate/linfit"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// recipeEncoder keeps the recipe tests within seconds.
var recipeEncoder = model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1, Dropout: 0.5}

// baceRun is a finetuner on ogbg-molbace's scaffold split with the small
// encoder, and a freshly seeded classifier for it (freed with the test).
func baceRun(t *testing.T, recipe Recipe) (*finetuner, *model.Classifier) {
	t.Helper()
	ds, _, err := downstreamSetup(testenv.SharedData(t, "ogb/ogbg_molbace"), data.OpenOptions{CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultFinetuneConfig()
	cfg.Encoder, cfg.Epochs, cfg.Recipe = recipeEncoder, 2, recipe
	dev := evaluationDevice(t)
	f := &finetuner{cfg: &cfg, name: "bace", ds: ds, split: ds.Split, dev: dev, workers: 1, seed: 3}
	torch.ManualSeed(f.seed)
	clf, err := model.NewClassifier(recipeEncoder, ds.NumTasks(), dev, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clf.Free)
	return f, clf
}

// evaluationDevice is the tests' device, made reproducible as every
// evaluation's session makes it (until the test ends).
func evaluationDevice(t *testing.T) torch.Device {
	t.Helper()
	dev := testdevice.Get(t)
	if err := reproducible(dev); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { torch.SetDeterministic(false) })
	return dev
}

// hostState is every tensor of the classifier as float64 host values, by name.
func hostState(clf *model.Classifier) map[string][]float64 {
	out := map[string][]float64{}
	for _, n := range clf.Store.State() {
		out[n.Name] = torch.ScopedValue(func() []float64 { return torch.ToSlice[float64](n.Tensor.ToDType(torch.Float64)) })
	}
	return out
}

// The linear-probe start (LP-FT) makes the head the probe: on the train
// molecules the classifier's first logits, in evaluation mode, are those of
// a logistic regression fitted independently here on the same encoder's
// embeddings (embedMolecules, standardised on train) with the λ the run
// reports, and that λ is the one of the grid with the best valid ROC-AUC.
func TestLinearProbeStartHeadIsTheProbe(t *testing.T) {
	f, clf := baceRun(t, Recipe{LR: 1e-3, LinearProbeStart: true})
	l2, err := f.linearProbeStart(clf, f.ds)
	if err != nil {
		t.Fatal(err)
	}
	s := torch.NewScope()
	defer s.Close()
	all, err := embedMolecules(f.ds, recipeEncoder, clf.EncoderState(), 0, f.dev, model.FP32, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Free()
	rows := func(idx []int32) *torch.Tensor {
		i := make([]int64, len(idx))
		for k, g := range idx {
			i[k] = int64(g)
		}
		return all.IndexSelect(0, torch.FromSlice(i).To(f.dev, false))
	}
	mean, std := linfit.Standardisation(rows(f.split.Train))
	grid := DefaultLinearEvalConfig().L2Grid
	lin := DefaultLinearEvalConfig()
	w, b, _ := linfit.FitLogistic(rows(f.split.Train).Sub(mean).Div(std), splitLabels(f.ds, f.split.Train),
		linfit.Logistic{Tasks: 1, Grid: grid, Steps: lin.Steps, LR: lin.LR, Seed: f.seed})

	// The λ: the best valid ROC-AUC over the grid, the earliest on ties.
	validScores := torch.ToSlice[float32](rows(f.split.Valid).Sub(mean).Div(std).MatMul(w).Add(b))
	validLabels := splitLabels(f.ds, f.split.Valid)
	n := len(validLabels)
	best, bestAUC := 0, -1.0
	for g := range grid {
		_, auc, err := metrics.ROCAUC(validLabels, validScores[g*n:(g+1)*n], 1)
		if err != nil {
			t.Fatal(err)
		}
		if auc > bestAUC {
			best, bestAUC = g, auc
		}
	}
	if !slices.Equal(l2, []float64{grid[best]}) {
		t.Fatalf("the probe took λ %v; the best valid ROC-AUC (%.4f) is at λ %g", l2, bestAUC, grid[best])
	}

	want := torch.ToSlice[float32](rows(f.split.Train).Sub(mean).Div(std).MatMul(w).Add(b).Narrow(0, int64(best), 1))
	var got []float32
	if err := forEachBatch(f.ds, f.split.Train, 1, f.dev, func(bt *feed.Batch, _ *torch.Scope) {
		got = append(got, torch.ToSlice[float32](clf.Forward(bt.Graph(f.dev), false))...)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i]-want[i]))/(1+math.Abs(float64(want[i]))))
	}
	if worst > 1e-4 {
		t.Errorf("the head's first logits differ from the probe's by up to %.2g (relative)", worst)
	}
	t.Logf("λ %g, valid ROC-AUC %.4f, head against probe: %.2g", l2[0], bestAUC, worst)
}

// setHeadToProbe's arithmetic on a hand-made probe: the head's output is
// w·(z−μ)/σ + b for features z at and above the lowest value it was given.
func TestSetHeadToProbeArithmetic(t *testing.T) {
	dev := testdevice.Get(t)
	torch.ManualSeed(1)
	clf, err := model.NewClassifier(model.EncoderConfig{Hidden: 3, Layers: 1, MLPLayers: 1, T: 1}, 2, dev, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	mean, std := []float32{0.5, -1, 2}, []float32{2, 0.25, 1}
	p := linfit.Probe{W: []float64{1, -2, 0.5, 0, 3, -1}, B: []float64{0.1, -0.3}}
	lowest := []float32{-4} // of (z−μ)/σ over the train rows
	s := torch.NewScope()
	defer s.Close()
	setHeadToProbe(clf.Head, p, mean, std, lowest)
	z := [][]float32{{0.5, -1, 2}, {-7.5, -2, -2}, {3, 0, 5}} // standardised: {0,0,0}, {-4,-4,-4}, {1.25,4,3}
	flat := slices.Concat(z...)
	out := torch.ToSlice[float32](clf.Head.Lin2.Forward(clf.Head.Lin1.Forward(torch.FromSlice(flat, 3, 3).To(dev, false)).Relu()))
	for i, row := range z {
		for task := range 2 {
			want := p.B[task]
			for j, v := range row {
				want += p.W[task*3+j] * (float64(v) - float64(mean[j])) / float64(std[j])
			}
			if got := float64(out[i*2+task]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("row %d, task %d: %v, want %v", i, task, got, want)
			}
		}
	}
}

// The encoder's learning rate reaches only the encoder's parameters: after
// one step Adam moves each entry by lr·|g|/(|g|+ε) ≤ lr, so every encoder
// entry moves by at most the encoder's rate and some by nearly it, and the
// head's by nearly the head's.
func TestEncoderLRReachesOnlyTheEncoder(t *testing.T) {
	const headLR, encoderLR = 1e-3, 1e-5
	f, clf := baceRun(t, Recipe{LR: headLR, EncoderLR: encoderLR})
	opt := f.cfg.Recipe.newOptimizers(clf)
	defer opt.free()
	before := hostState(clf)
	oneStep(t, f, clf, opt, false)
	after := hostState(clf)
	moved := map[string]float64{} // the largest move of each group
	for _, v := range clf.Store.Trainable() {
		group, lr := "head", headLR
		if strings.HasPrefix(v.Name, "encoder.") {
			group, lr = "encoder", encoderLR
		}
		for i := range before[v.Name] {
			d := math.Abs(after[v.Name][i] - before[v.Name][i])
			// float32 rounding of θ ≈ 1 adds up to 2⁻²⁴ to the move.
			if d > lr*1.001+1.2e-7 {
				t.Fatalf("%s[%d] moved by %g, more than the %s's rate %g", v.Name, i, d, group, lr)
			}
			moved[group] = max(moved[group], d)
		}
	}
	if moved["encoder"] < encoderLR/2 || moved["head"] < headLR/2 {
		t.Errorf("largest moves: encoder %g (rate %g), head %g (rate %g)", moved["encoder"], encoderLR, moved["head"], headLR)
	}
}

// oneStep trains the classifier on the first training batch of f's split.
func oneStep(t *testing.T, f *finetuner, clf *model.Classifier, opt *optimizers, frozen bool) {
	t.Helper()
	loader := firstBatch(t, f)
	defer loader.Close()
	if _, err := trainEpoch(clf, opt, loader, epochSteps{dev: f.dev, frozenEncoder: frozen, recipe: f.cfg.Recipe}); err != nil {
		t.Fatal(err)
	}
}

// firstBatch is a loader of one epoch of one batch: the first of f's train part.
func firstBatch(t *testing.T, f *finetuner) *feed.Loader {
	t.Helper()
	loader, err := feed.NewLoader(feed.LoaderConfig{Dataset: f.ds, Indices: f.split.Train[:f.cfg.BatchSize], BatchSize: f.cfg.BatchSize, Epochs: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return loader
}

// A frozen encoder does not move, running statistics included, while the
// head trains.
func TestFrozenEncoderDoesNotMove(t *testing.T) {
	f, clf := baceRun(t, Recipe{LR: 1e-3, FreezeEpochs: 1})
	opt := f.cfg.Recipe.newOptimizers(clf)
	defer opt.free()
	before := hostState(clf)
	oneStep(t, f, clf, opt, true)
	after := hostState(clf)
	headMoved := false
	for name, v := range before {
		same := slices.Equal(v, after[name])
		switch {
		case strings.HasPrefix(name, "encoder.") && !same:
			t.Errorf("%s changed while the encoder was frozen", name)
		case strings.HasPrefix(name, "head.") && !same:
			headMoved = true
		}
	}
	if !headMoved {
		t.Error("the head did not train while the encoder was frozen")
	}
}

// Two optimisers at one rate step as one Adam over every parameter, bit
// for bit: the paper's recipe is unchanged by the split.
func TestSplitOptimisersStepAsOne(t *testing.T) {
	f, split := baceRun(t, Recipe{LR: 1e-3})
	_, whole := baceRun(t, Recipe{LR: 1e-3}) // the same seed: the same initial weights
	opt := f.cfg.Recipe.newOptimizers(split)
	defer opt.free()
	one := optim.NewAdam(whole.Store.Trainable(), 1e-3)
	defer one.Free()
	for range 3 {
		torch.ManualSeed(9)
		oneStep(t, f, split, opt, false)
		torch.ManualSeed(9) // the same dropout masks
		loader := firstBatch(t, f)
		b, err := loader.Next()
		if err != nil {
			t.Fatal(err)
		}
		func() {
			s := torch.NewScope()
			defer s.Close()
			labels, mask := b.Targets(f.dev)
			loss := MaskedBCEWithLogits(whole.Forward(b.Graph(f.dev), true), labels, mask)
			one.ZeroGrad()
			loss.Backward()
			one.Step()
		}()
		loader.Release(b)
		loader.Close()
	}
	a, b := hostState(split), hostState(whole)
	for name := range a {
		if !slices.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two optimisers and one", name)
		}
	}
}

// Warm-up raises the rate linearly over the first W epochs' steps.
func TestWarmupScale(t *testing.T) {
	cases := []struct {
		warmup, step, perEpoch int
		want                   float64
	}{
		{0, 0, 10, 1}, {0, 5, 10, 1},
		{1, 0, 4, 0.25}, {1, 3, 4, 1}, {1, 4, 4, 1},
		{2, 0, 5, 0.1}, {2, 4, 5, 0.5}, {2, 9, 5, 1}, {2, 30, 5, 1},
	}
	for _, c := range cases {
		if got := (Recipe{WarmupEpochs: c.warmup}).warmupScale(c.step, c.perEpoch); got != c.want {
			t.Errorf("warm-up %d, step %d of %d an epoch: %v, want %v", c.warmup, c.step, c.perEpoch, got, c.want)
		}
	}
}

// Averaging with the start puts w·θ_start + (1−w)·θ in place for an
// evaluation and the trained θ back after it, bit for bit; batch norm's
// integer counter keeps its trained value.
func TestAverageWithStart(t *testing.T) {
	const share = 0.25
	f, clf := baceRun(t, Recipe{LR: 1e-3, AverageWithStart: share})
	weights := f.cfg.Recipe.evaluatedWeights(clf)
	defer weights.free()
	start := hostState(clf)
	opt := f.cfg.Recipe.newOptimizers(clf)
	defer opt.free()
	oneStep(t, f, clf, opt, false)
	trained := hostState(clf)
	weights.apply()
	averaged := hostState(clf)
	weights.restore()
	for _, n := range clf.Store.State() {
		name := n.Name
		if n.Tensor.DType() != torch.Float32 {
			if !slices.Equal(averaged[name], trained[name]) {
				t.Errorf("%s (%s) was averaged", name, n.Tensor.DType())
			}
			continue
		}
		for i := range trained[name] {
			want := share*start[name][i] + (1-share)*trained[name][i]
			if math.Abs(averaged[name][i]-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("%s[%d]: averaged %v, want %v", name, i, averaged[name][i], want)
			}
		}
	}
	if after := hostState(clf); !mapsEqual(after, trained) {
		t.Error("restore did not put the trained weights back bit for bit")
	}
}

func mapsEqual(a, b map[string][]float64) bool {
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return len(a) == len(b)
}

// Patience stops a run once that many epochs pass without a better valid
// figure: the last epoch trained is the best one plus the patience, and the
// best one is still the one reported.
func TestPatienceStopsTheRun(t *testing.T) {
	ds := testenv.SharedData(t, "ogb/ogbg_molbace")
	cfg := DefaultFinetuneConfig()
	cfg.Data, cfg.Encoder, cfg.Epochs, cfg.Seeds, cfg.Seed = ds, recipeEncoder, 25, 2, 1
	cfg.Encoder.Dropout = 0
	cfg.Dropout, cfg.Patience = 0.5, 3
	env := runenv.Default()
	env.Device, env.Dataset.CacheDir = testdevice.Get(t), t.TempDir()
	res, err := Finetune(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for _, r := range res.Runs {
		best := slices.Index(r.ValidROCAUC, slices.Max(r.ValidROCAUC)) + 1
		if r.BestEpoch != best {
			t.Errorf("seed %d: best epoch %d, want %d", r.Seed, r.BestEpoch, best)
		}
		switch {
		case r.StoppedAt == 0 && len(r.ValidROCAUC) != cfg.Epochs:
			t.Errorf("seed %d: %d epochs without a stop", r.Seed, len(r.ValidROCAUC))
		case r.StoppedAt > 0 && (r.StoppedAt != r.BestEpoch+cfg.Patience || len(r.ValidROCAUC) != r.StoppedAt || len(r.TrainLoss) != r.StoppedAt):
			t.Errorf("seed %d: stopped at %d with %d epochs of figures; best epoch %d, patience %d", r.Seed, r.StoppedAt, len(r.ValidROCAUC), r.BestEpoch, cfg.Patience)
		case r.StoppedAt > 0:
			stopped++
		}
	}
	if stopped == 0 {
		t.Error("no run stopped early: the test cannot see the patience")
	}
}

// A recipe that cannot work names its field.
func TestRecipeValidation(t *testing.T) {
	cases := []struct {
		recipe Recipe
		cv     bool
		field  string
	}{
		{Recipe{LR: 0}, false, "lr"},
		{Recipe{LR: 1e-3, EncoderLR: -1}, false, "encoder_lr"},
		{Recipe{LR: 1e-3, FreezeEpochs: 10}, false, "freeze_epochs"},
		{Recipe{LR: 1e-3, WeightDecay: -0.1}, false, "weight_decay"},
		{Recipe{LR: 1e-3, WarmupEpochs: 11}, false, "warmup_epochs"},
		{Recipe{LR: 1e-3, AverageWithStart: 1}, false, "average_with_start"},
		{Recipe{LR: 1e-3, AverageWithStart: math.NaN()}, false, "average_with_start"},
		{Recipe{LR: 1e-3, Patience: 5}, true, "patience"},
		{Recipe{LR: 1e-3, Patience: -1}, false, "patience"},
	}
	for _, c := range cases {
		err := c.recipe.validate(10, c.cv)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Name != c.field {
			t.Errorf("%+v (cv %v): %v, want an error on %s", c.recipe, c.cv, err, c.field)
		}
	}
	if err := (Recipe{LR: 1e-3, EncoderLR: 1e-4, LinearProbeStart: true, FreezeEpochs: 9, WarmupEpochs: 10, AverageWithStart: 0.5, Patience: 20}).validate(10, false); err != nil {
		t.Errorf("a valid recipe: %v", err)
	}
}

// A whole run with FreezeEpochs 2 of 3: the encoder's weights (running
// statistics included) are the start's after epochs 1 and 2 while the
// head's move, and the encoder's move in epoch 3, the first it trains.
func TestFreezeEpochsInARun(t *testing.T) {
	f, _ := baceRun(t, Recipe{LR: 1e-3, FreezeEpochs: 2})
	f.cfg.Epochs = 3
	var states []map[string][]float64 // by epoch, from the start
	f.observe = func(epoch int, clf *model.Classifier) { states = append(states, hostState(clf)) }
	if _, err := f.run(nil); err != nil {
		t.Fatal(err)
	}
	if len(states) != 4 {
		t.Fatalf("observed %d states, want the start and 3 epochs", len(states))
	}
	moved := func(epoch int, prefix string) (moved, all bool) {
		all = true
		for name, v := range states[epoch] {
			if !strings.HasPrefix(name, prefix) || strings.HasSuffix(name, "num_batches_tracked") {
				continue
			}
			same := slices.Equal(v, states[epoch-1][name])
			moved, all = moved || !same, all && !same
		}
		return moved, all
	}
	for epoch := 1; epoch <= 3; epoch++ {
		encoderMoved, _ := moved(epoch, "encoder.")
		headMoved, _ := moved(epoch, "head.")
		if encoderMoved != (epoch == 3) || !headMoved {
			t.Errorf("epoch %d: encoder moved %v, head moved %v; want the encoder frozen in epochs 1 and 2 only, the head always training", epoch, encoderMoved, headMoved)
		}
	}
}

// AdamW's decoupled decay reaches the head and the encoder: one step with
// weight decay wd differs from the same step without it by exactly
// −lr·wd·θ₀ on every trained parameter (PyTorch's AdamW: θ ← θ(1 − lr·wd),
// then Adam's step, the same in both), to float32 rounding.
func TestWeightDecayReachesHeadAndEncoder(t *testing.T) {
	const lr, wd = 1e-3, 0.5
	step := func(recipe Recipe) (before, after map[string][]float64, trained map[string]bool) {
		f, clf := baceRun(t, recipe)
		opt := recipe.newOptimizers(clf)
		defer opt.free()
		trained = map[string]bool{}
		for _, v := range clf.Store.Trainable() {
			trained[v.Name] = true
		}
		before = hostState(clf)
		oneStep(t, f, clf, opt, false)
		return before, hostState(clf), trained
	}
	start, plain, trained := step(Recipe{LR: lr})
	_, decayed, _ := step(Recipe{LR: lr, WeightDecay: wd})
	checked := map[string]int{}
	for name := range trained {
		for i, v0 := range start[name] {
			want := -lr * wd * v0
			got := decayed[name][i] - plain[name][i]
			// Two float32 updates of values up to |θ₀| + lr apart.
			if math.Abs(got-want) > 1e-7*(math.Abs(v0)+1) {
				t.Fatalf("%s[%d]: the decay moved it by %.3g, want −lr·wd·θ₀ = %.3g", name, i, got, want)
			}
		}
		checked[strings.SplitN(name, ".", 2)[0]]++
	}
	if checked["head"] == 0 || checked["encoder"] == 0 {
		t.Errorf("parameters checked by part: %v; want the head's and the encoder's", checked)
	}
}
