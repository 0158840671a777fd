package linfit

import (
	"bytes"
	"fmt"
	"math"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/optim"
)

// BCEWithLogits is the elementwise binary cross-entropy of logits x against
// targets y, max(x,0) − x·y + log(1 + e^−|x|), which never overflows: the
// loss of logistic regression, and of a classification head fine-tuned.
func BCEWithLogits(x, y *torch.Tensor) *torch.Tensor {
	return x.Relu().Sub(x.Mul(y)).Add(x.Abs().Neg().Exp().AddScalar(1).Log())
}

// Logistic is what FitLogistic fits: Tasks logistic regressions for each
// L2 strength of Grid, by Steps full-batch Adam steps at rate LR from
// PyTorch's Linear initialisation drawn from Seed.
type Logistic struct {
	Tasks, Steps int
	Grid         []float64
	LR           float64
	Seed         uint64
}

// FitLogistic fits every task and grid value of f at once on the
// features x (n×d, standardised) and labels (n×T, NaN where missing),
// minimising mean BCE over each task's labelled rows + λ/2·‖w‖². It returns
// the weights (G×d×T), biases (G×1×T) and the last step's BCE (G×T), in the
// caller's scope. labels' missing entries are set to 0.
//
// Each step is Adam on the closed-form gradient rather than autograd's: the
// BCE's derivative in the logit z is σ(z) − y, so the weights' gradient is
// Xᵀ·((σ(XW+b) − y)·m/n_t) + λW and the biases' the column sums of the same
// matrix. And a row that is not labelled for a task adds exactly nothing to
// its fit, so the tasks are fitted in groups (taskGroups), each on only the
// rows its tasks have labels on: toxcast's 617 tasks are labelled on 29 % of
// the (row, task) pairs, in blocks that assays share. The maths is the
// objective's, task by task; only float rounding differs from differentiating
// it whole by autograd (the tests bound the difference).
func FitLogistic(x *torch.Tensor, labels []float32, f Logistic) (w, b, bce *torch.Tensor) {
	dev := x.Device()
	filled, mask := maskedLabels(labels)
	n, tasks, grid := x.Size(0), int64(f.Tasks), int64(len(f.Grid))
	y := torch.FromSlice(filled, n, tasks).To(dev, false)
	m := torch.FromSlice(mask, n, tasks).To(dev, false)
	lambda := make([]float32, grid)
	for g, l := range f.Grid {
		lambda[g] = float32(l)
	}
	decay := torch.FromSlice(lambda, grid, 1, 1).To(dev, false) // against G×d×T

	// Every weight matrix is drawn whole, as PyTorch's Linear(d, T) per grid
	// value, so that the grouping does not change the starting point.
	torch.ManualSeed(f.Seed)
	d := x.Size(1)
	store := nn.NewStore(dev, torch.Float32)
	defer store.Free()
	bound := 1 / math.Sqrt(float64(d))
	w0 := torch.Empty([]int64{grid, d, tasks}, store.Root().Options())
	b0 := torch.Empty([]int64{grid, 1, tasks}, store.Root().Options())
	nn.Uniform(w0, -bound, bound)
	nn.Uniform(b0, -bound, bound)
	type fit struct {
		cols, x, xt, y, m, labelled, w, b *torch.Tensor
	}
	var fits []fit
	for i, g := range taskGroups(mask, int(n), int(tasks)) {
		cols := torch.FromSlice(g.Tasks).To(dev, false)
		rows := torch.FromSlice(g.Rows).To(dev, false)
		gm := m.IndexSelect(0, rows).IndexSelect(1, cols)
		xg := x.IndexSelect(0, rows)
		fits = append(fits, fit{cols: cols, x: xg, xt: xg.T(), y: y.IndexSelect(0, rows).IndexSelect(1, cols), m: gm,
			labelled: gm.SumDim(0, false).ClampMin(1),
			w:        store.Root().Param(fmt.Sprintf("weight.%d", i), w0.IndexSelect(2, cols)),
			b:        store.Root().Param(fmt.Sprintf("bias.%d", i), b0.IndexSelect(2, cols))})
	}
	adam := optim.NewAdam(store.Trainable(), f.LR)
	defer adam.Free()
	bce = torch.Zeros([]int64{grid, tasks}, store.Root().Options())
	for step := range f.Steps {
		func() {
			s := torch.NewScope()
			defer s.Close()
			var surrogate *torch.Tensor
			for _, g := range fits {
				var gw, gb *torch.Tensor
				torch.NoGrad(func() {
					z := g.x.MatMul(g.w).Add(g.b) // (n×d)·(G×d×T) broadcasts to G×n×T
					if step == f.Steps-1 {
						perTask := BCEWithLogits(z, g.y).Mul(g.m).SumDim(1, false).Div(g.labelled)
						bce = s.Keep(bce.IndexAdd(1, g.cols, perTask))
					}
					// σ(z) = 1/(1 + e^−z): e^−z overflows to +Inf for z < −88, giving 0, its limit.
					dz := z.Neg().Exp().AddScalar(1).Reciprocal().Sub(g.y).Mul(g.m).Div(g.labelled)
					gw = g.xt.MatMul(dz).Add(g.w.Mul(decay))
					gb = dz.SumDim(1, true)
				})
				// Backward of Σ θ·g sets θ's gradient to g exactly, for Adam to use.
				term := g.w.Mul(gw).Sum().Add(g.b.Mul(gb).Sum())
				if surrogate == nil {
					surrogate = term
				} else {
					surrogate = surrogate.Add(term)
				}
			}
			adam.ZeroGrad()
			surrogate.Backward()
			adam.Step()
		}()
	}
	w, b = torch.Zeros(w0.Shape(), w0.Options()), torch.Zeros(b0.Shape(), b0.Options())
	torch.NoGrad(func() {
		for _, g := range fits {
			w, b = w.IndexAdd(2, g.cols, g.w), b.IndexAdd(2, g.cols, g.b)
		}
	})
	return w, b, bce
}

// taskGroup is tasks fitted together on the rows any of them is labelled on.
type taskGroup struct {
	Tasks, Rows []int64
}

// taskGroups splits the tasks of an n×T mask (1 where labelled) into
// groups to fit on fewer rows: the tasks labelled on exactly the same rows
// form a group on those rows, and the tasks whose rows no other task shares
// form one group on the union of their rows (all the rows, at worst: then
// the plain full-batch fit). Tasks and rows are in increasing order; the
// groups of shared rows come by their first task, the others' group last.
func taskGroups(mask []float32, n, tasks int) []taskGroup {
	byRows := map[string][]int64{} // a task's labelled rows, as a key
	keys := make([]string, tasks)
	for t := range tasks {
		key := make([]byte, n)
		for i := range n {
			if mask[i*tasks+t] != 0 {
				key[i] = 1
			}
		}
		if bytes.IndexByte(key, 1) < 0 { // a task without labels joins the rest
			key = nil
		}
		keys[t] = string(key)
		byRows[keys[t]] = append(byRows[keys[t]], int64(t))
	}
	var groups []taskGroup
	var rest []int64
	for t, key := range keys {
		same := byRows[key]
		switch {
		case len(same) == 1 || key == "":
			rest = append(rest, int64(t))
		case same[0] == int64(t):
			groups = append(groups, taskGroup{Tasks: same, Rows: labelledRows(mask, n, tasks, same)})
		}
	}
	if len(rest) > 0 {
		g := taskGroup{Tasks: rest, Rows: labelledRows(mask, n, tasks, rest)}
		if len(g.Rows) == 0 { // no labels at all: one row, masked, keeps the shapes non-empty
			g.Rows = []int64{0}
		}
		groups = append(groups, g)
	}
	return groups
}

// labelledRows are the rows of an n×T mask labelled for any of tasks.
func labelledRows(mask []float32, n, tasks int, of []int64) []int64 {
	var rows []int64
	for i := range n {
		for _, t := range of {
			if mask[i*tasks+int(t)] != 0 {
				rows = append(rows, int64(i))
				break
			}
		}
	}
	return rows
}

// maskedLabels are labels with each missing one (NaN) set to 0, and the
// mask that is 1 where a label is present.
func maskedLabels(labels []float32) (filled, mask []float32) {
	mask = make([]float32, len(labels))
	for i, y := range labels {
		if y == y {
			mask[i] = 1
		} else {
			labels[i] = 0
		}
	}
	return labels, mask
}
