package linfit

import (
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
func FitLogistic(x *torch.Tensor, labels []float32, f Logistic) (w, b, bce *torch.Tensor) {
	dev := x.Device()
	filled, mask := maskedLabels(labels)
	n, tasks, grid := x.Size(0), int64(f.Tasks), int64(len(f.Grid))
	y := torch.FromSlice(filled, n, tasks).To(dev, false)
	m := torch.FromSlice(mask, n, tasks).To(dev, false)
	labelled := m.SumDim(0, false).ClampMin(1) // per task
	lambda := make([]float32, grid)
	for g, l := range f.Grid {
		lambda[g] = float32(l)
	}
	penalty := torch.FromSlice(lambda, grid, 1).To(dev, false) // G×1, against G×T

	// One weight matrix per grid value, initialised as PyTorch's Linear(d, T).
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
			// (n×d)·(G×d×T) broadcasts to G×n×T.
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
