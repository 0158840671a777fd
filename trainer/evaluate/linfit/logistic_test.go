package linfit

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// autogradFitLogistic is FitLogistic as it was before the closed-form
// gradient: the objective written out and differentiated by autograd. It is
// the reference the closed form must reproduce.
func autogradFitLogistic(x *torch.Tensor, labels []float32, f Logistic) (w, b, bce *torch.Tensor) {
	dev := x.Device()
	filled, mask := maskedLabels(labels)
	n, tasks, grid := x.Size(0), int64(f.Tasks), int64(len(f.Grid))
	y := torch.FromSlice(filled, n, tasks).To(dev, false)
	m := torch.FromSlice(mask, n, tasks).To(dev, false)
	labelled := m.SumDim(0, false).ClampMin(1)
	lambda := make([]float32, grid)
	for g, l := range f.Grid {
		lambda[g] = float32(l)
	}
	penalty := torch.FromSlice(lambda, grid, 1).To(dev, false)
	torch.ManualSeed(f.Seed)
	d := x.Size(1)
	store := nn.NewStore(dev, torch.Float32)
	defer store.Free()
	bound := 1 / math.Sqrt(float64(d))
	ws := store.Root().Param("weight", torch.Empty([]int64{grid, d, tasks}, store.Root().Options()))
	bs := store.Root().Param("bias", torch.Empty([]int64{grid, 1, tasks}, store.Root().Options()))
	nn.Uniform(ws, -bound, bound)
	nn.Uniform(bs, -bound, bound)
	adam := optim.NewAdam(store.Trainable(), f.LR)
	defer adam.Free()
	for range f.Steps {
		func() {
			step := torch.NewScope()
			defer step.Close()
			perTask := BCEWithLogits(x.MatMul(ws).Add(bs), y).Mul(m).SumDim(1, false).Div(labelled)
			loss := perTask.Add(ws.Mul(ws).SumDim(1, false).Mul(penalty).MulScalar(0.5)).Sum()
			adam.ZeroGrad()
			loss.Backward()
			adam.Step()
			bce.Free()
			bce = step.Keep(perTask.Detach())
		}()
	}
	return ws.Detach().Clone(), bs.Detach().Clone(), bce
}

// atomDescriptors are real features of ds's molecules without an encoder:
// per molecule, the share of its atoms taking each value of each of OGB's
// atom features (a bag of atom types, charges, degrees, rings …), the
// features that never vary left out. Columns are collinear (each feature's
// shares sum to 1), which makes the fits' conditioning realistic.
func atomDescriptors(ds *data.Dataset) (x []float32, d int) {
	const nf = data.NumAtomFeatures
	var offset [nf + 1]int
	for f := range nf {
		hi := 0
		for a := f; a < len(ds.AtomFeat); a += nf {
			hi = max(hi, int(ds.AtomFeat[a]))
		}
		offset[f+1] = offset[f] + hi + 1
	}
	d = offset[nf]
	g := len(ds.NodePtr) - 1
	x = make([]float32, g*d)
	for i := range g {
		atoms := float32(ds.NodePtr[i+1] - ds.NodePtr[i])
		for a := ds.NodePtr[i]; a < ds.NodePtr[i+1]; a++ {
			for f := range nf {
				x[i*d+offset[f]+int(ds.AtomFeat[int(a)*nf+f])] += 1 / atoms
			}
		}
	}
	return x, d
}

// rowsOf are the rows idx of x (n×d) and of labels (n×T).
func rowsOf(x []float32, d int, labels []float32, tasks int, idx []int32) ([]float32, []float32) {
	xs, ys := make([]float32, 0, len(idx)*d), make([]float32, 0, len(idx)*tasks)
	for _, i := range idx {
		xs = append(xs, x[int(i)*d:int(i+1)*d]...)
		ys = append(ys, labels[int(i)*tasks:int(i+1)*tasks]...)
	}
	return xs, ys
}

// validChoice is, per grid value, the valid ROC-AUC of each task, and the
// λ index each task keeps by BestPerTask.
func validChoice(t *testing.T, xv *torch.Tensor, labels []float32, tasks int, w, b *torch.Tensor, grid int) ([][]float64, []int) {
	scores := torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](xv.MatMul(w).Add(b)) })
	per := len(labels)
	byL2, byTask := make([]metrics.Value, grid), make([][]float64, grid)
	for g := range grid {
		perTask, mean, err := metrics.ROCAUC(labels, scores[g*per:(g+1)*per], tasks)
		if err != nil {
			t.Fatal(err)
		}
		byL2[g], byTask[g] = metrics.Value(mean), perTask
	}
	return byTask, BestPerTask(byL2, byTask, tasks)
}

// The grouped closed-form fit is the autograd fit on real data: bace (one
// task), tox21 (12 tasks, 16,026 labels missing, no two tasks on the same
// rows: one group) and every twelfth of toxcast's 617 tasks (labelled on
// blocks of rows that assays share: several groups), their scaffold splits,
// atom descriptors standardised on train, linear evaluation's grid and Adam
// at 0.01 (500 steps on bace; 200 and 150 on the others, whose autograd
// reference is slow). The weights agree to 1e-4 relative to the largest,
// and the final BCE of every task and λ to 1e-6 (float32 rounding through
// the Adam steps), each task's valid ROC-AUC at
// every λ to 1e-3 (the descriptors make near-tied scores, whose order a
// rounding can swap: on bace a pair or two of ~5,500), and every task keeps
// the same λ.
func TestFitLogisticMatchesAutogradOnRealData(t *testing.T) {
	grid := []float64{10, 1, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5}
	for _, tc := range []struct {
		path          string
		stride, steps int
		groups        int
	}{
		{"ogb/ogbg_molbace", 1, 500, 1},
		{"moleculenet/tox21.csv", 1, 200, 1},
		{"moleculenet/toxcast.csv.gz", 12, 150, 0},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			dir, file := filepath.Split(tc.path)
			ds, err := data.Open(filepath.Join(testenv.SharedData(t, filepath.Clean(dir)), file), data.OpenOptions{CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			all := ds.NumTasks()
			var labels []float32 // every stride-th task
			for i := range len(ds.Labels) / all {
				for k := 0; k < all; k += tc.stride {
					labels = append(labels, ds.Labels[i*all+k])
				}
			}
			tasks := len(labels) / (len(ds.Labels) / all)
			x, d := atomDescriptors(ds)
			xf, yf := rowsOf(x, d, labels, tasks, ds.Split.Train)
			xv, yv := rowsOf(x, d, labels, tasks, ds.Split.Valid)
			_, mask := maskedLabels(slices.Clone(yf))
			groups := taskGroups(mask, len(ds.Split.Train), tasks)
			shared := 0
			for _, g := range groups {
				if len(g.Tasks) > 1 && len(g.Rows) < len(ds.Split.Train) {
					shared++
				}
			}
			s := torch.NewScope()
			defer s.Close()
			fit := torch.FromSlice(xf, int64(len(ds.Split.Train)), int64(d))
			mean, std := Standardisation(fit)
			fit = fit.Sub(mean).Div(std)
			valid := torch.FromSlice(xv, int64(len(ds.Split.Valid)), int64(d)).Sub(mean).Div(std)
			f := Logistic{Tasks: tasks, Grid: grid, Steps: tc.steps, LR: 0.01, Seed: 3}
			w, b, bce := FitLogistic(fit, slices.Clone(yf), f)
			rw, rb, rbce := autogradFitLogistic(fit, slices.Clone(yf), f)

			maxDiff := func(a, b *torch.Tensor) float64 {
				return float64(torch.ToSlice[float32](a.Sub(b).Abs().Max())[0])
			}
			dw, db, dbce := maxDiff(w, rw), maxDiff(b, rb), maxDiff(bce, rbce)
			largest := math.Max(float64(torch.ToSlice[float32](rw.Abs().Max())[0]), float64(torch.ToSlice[float32](rb.Abs().Max())[0]))
			t.Logf("%d tasks in %d groups (%d on a subset of rows shared by several tasks), d %d, %d train rows: max |Δw| %.2g, |Δb| %.2g (largest |w|, |b| %.3g), |ΔBCE| %.2g",
				tasks, len(groups), shared, d, len(ds.Split.Train), dw, db, largest, dbce)
			if tc.groups > 0 && len(groups) != tc.groups || tc.groups == 0 && shared < 2 {
				t.Errorf("%d groups, %d of several tasks on shared rows", len(groups), shared)
			}
			if dw > 1e-4*largest || db > 1e-4*largest || dbce > 1e-6 {
				t.Errorf("closed form against autograd: max |Δw| %g, |Δb| %g, |ΔBCE| %g", dw, db, dbce)
			}
			got, gotChoice := validChoice(t, valid, yv, tasks, w, b, len(grid))
			want, wantChoice := validChoice(t, valid, yv, tasks, rw, rb, len(grid))
			for g := range grid {
				for k := range tasks {
					if a, r := got[g][k], want[g][k]; math.Abs(a-r) > 1e-3 && !(math.IsNaN(a) && math.IsNaN(r)) {
						t.Errorf("λ %g, task %d: valid ROC-AUC %.6f, autograd's %.6f", grid[g], k, a, r)
					}
				}
			}
			if !slices.Equal(gotChoice, wantChoice) {
				t.Errorf("λ chosen per task %v, autograd's %v", gotChoice, wantChoice)
			}
		})
	}
}

// Groups of a hand-made mask (rows × tasks): tasks 0 and 2 share rows
// {0, 1}, task 3 is labelled on rows {0, 1} and 2, tasks 1 and 4 on rows of
// their own; task 5 on none. Tasks 0 and 2 form a group on their two rows;
// 1, 3, 4 and 5 the last group, on every row some of them is labelled on.
func TestTaskGroups(t *testing.T) {
	mask := []float32{
		1, 0, 1, 1, 0, 0,
		1, 1, 1, 1, 0, 0,
		0, 0, 0, 1, 1, 0,
		0, 0, 0, 0, 0, 0,
	}
	got := taskGroups(mask, 4, 6)
	want := []taskGroup{{Tasks: []int64{0, 2}, Rows: []int64{0, 1}}, {Tasks: []int64{1, 3, 4, 5}, Rows: []int64{0, 1, 2}}}
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i].Tasks, want[i].Tasks) || !slices.Equal(got[i].Rows, want[i].Rows) {
			t.Errorf("group %d: %v, want %v", i, got[i], want[i])
		}
	}
	// No label anywhere: one group, kept non-empty by a masked row.
	if g := taskGroups(make([]float32, 6), 3, 2); len(g) != 1 || !slices.Equal(g[0].Tasks, []int64{0, 1}) || !slices.Equal(g[0].Rows, []int64{0}) {
		t.Errorf("no labels: %v", g)
	}
}

// BenchmarkFitLogisticToxcast times an Adam step of toxcast's linear
// evaluation on one thread, the grouped closed form against the autograd
// fit: its 617 tasks' labels on its scaffold split's train part (6,860
// molecules), 300 random features (the embedding width), the 7 λ of the
// grid. cpu-s/step is the process's CPU time, which other work on the
// machine inflates less than the wall time.
//
//	go test -run '^$' -bench FitLogisticToxcast -benchtime 4x ./trainer/evaluate/linfit
func BenchmarkFitLogisticToxcast(b *testing.B) {
	ds, err := data.Open(filepath.Join(testenv.SharedData(b, "moleculenet"), "toxcast.csv.gz"), data.OpenOptions{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	tasks, d := ds.NumTasks(), 300
	var labels []float32
	for _, i := range ds.Split.Train {
		labels = append(labels, ds.Labels[int(i)*tasks:int(i+1)*tasks]...)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, len(ds.Split.Train)*d)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	prev := torch.NumThreads()
	torch.SetNumThreads(1)
	defer torch.SetNumThreads(prev)
	s := torch.NewScope()
	defer s.Close()
	xt := torch.FromSlice(x, int64(len(ds.Split.Train)), int64(d))
	f := Logistic{Tasks: tasks, Grid: []float64{10, 1, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5}, Steps: 1, LR: 0.01, Seed: 1}
	for _, fit := range []struct {
		name string
		fit  func(*torch.Tensor, []float32, Logistic) (*torch.Tensor, *torch.Tensor, *torch.Tensor)
	}{{"grouped", FitLogistic}, {"autograd", autogradFitLogistic}} {
		b.Run(fit.name, func(b *testing.B) {
			start := cpuTime()
			for range b.N {
				func() {
					step := torch.NewScope()
					defer step.Close()
					fit.fit(xt, slices.Clone(labels), f)
				}()
			}
			b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/step")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
