package evaluate

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate/linfit"
)

// linearProbeStart sets the head of clf to a linear probe of its frozen
// encoder (Recipe.LinearProbeStart, LP-FT). The probe is fitted on the mean
// embeddings z of the train molecules in evaluation mode, standardised with
// their mean μ and std σ: per task the L2-regularised logistic regression of
// linear evaluation (§7.4) on classification tasks, ridge regression of the
// standardised labels on regression tasks, each task's λ of the linear
// evaluation's grid chosen on the valid part. Without a valid part (cvK) a
// tenth of the train part, drawn from the run's seed, is held out to choose
// λ and the probe is fitted on the rest. The head then computes
//
//	lin1(z) = diag(1/σ)·z − μ/σ + c·1      c = 1 + max(0, −min over train molecules and j of (z_j−μ_j)/σ_j)
//	lin2(u) = w·u + b − c·w·1
//
// so that ReLU passes lin1's output unchanged on every train molecule and the
// head's first logits there are the probe's, w·(z−μ)/σ + b. It returns the
// λ each task took. train is the dataset the run trains on (its labels
// standardised on regression tasks).
func (f *finetuner) linearProbeStart(clf *model.Classifier, train *data.Dataset) ([]float64, error) {
	fit, valid := f.split.Train, f.split.Valid
	if len(valid) == 0 {
		fit, valid = holdOutTenth(fit, f.seed)
	}
	s := torch.NewScope()
	defer s.Close()
	zFit, err := f.meanEmbeddings(clf.Encoder, fit)
	if err != nil {
		return nil, err
	}
	zValid, err := f.meanEmbeddings(clf.Encoder, valid)
	if err != nil {
		return nil, err
	}
	mean, std := linfit.Standardisation(zFit)
	xFit, xValid := zFit.Sub(mean).Div(std), zValid.Sub(mean).Div(std)
	lin := DefaultLinearEvalConfig()
	d := linfit.ProbeData{Fit: xFit, Valid: xValid, FitLabels: splitLabels(train, fit), ValidLabels: splitLabels(train, valid)}
	var p linfit.Probe
	if f.regression {
		p, err = linfit.RidgeProbe(d, train.NumTasks(), lin.L2Grid)
	} else {
		p, err = linfit.LogisticProbe(d, linfit.Logistic{Tasks: train.NumTasks(), Grid: lin.L2Grid, Steps: lin.Steps, LR: lin.LR, Seed: f.seed})
	}
	if err != nil {
		return nil, fmt.Errorf("linear probe: %w", err)
	}
	setHeadToProbe(clf.Head, p, torch.ToSlice[float32](mean), torch.ToSlice[float32](std), torch.ToSlice[float32](xFit.Min()))
	return p.L2, nil
}

// setHeadToProbe writes p into head as linearProbeStart describes, given
// the features' standardisation (mean, std, 1×d) and the lowest
// standardised value over the train rows (used for c; one number bounds
// every feature).
func setHeadToProbe(head *model.GraphHead, p linfit.Probe, mean, std, lowest []float32) {
	d, tasks := len(mean), len(p.B)
	shift := 1 + math.Max(0, -float64(lowest[0]))
	w1, b1 := make([]float32, d*d), make([]float32, d)
	for j := range d {
		w1[j*d+j] = float32(1 / float64(std[j]))
		b1[j] = float32(-float64(mean[j])/float64(std[j]) + shift)
	}
	w2, b2 := make([]float32, tasks*d), make([]float32, tasks)
	for t := range tasks {
		bias := p.B[t]
		for j := range d {
			w2[t*d+j] = float32(p.W[t*d+j])
			bias -= p.W[t*d+j] * shift
		}
		b2[t] = float32(bias)
	}
	dev := head.Lin1.Weight.Device()
	values := []torch.Named{
		{Name: "lin1.weight", Tensor: torch.FromSlice(w1, int64(d), int64(d)).To(dev, false)},
		{Name: "lin1.bias", Tensor: torch.FromSlice(b1, int64(d)).To(dev, false)},
		{Name: "lin2.weight", Tensor: torch.FromSlice(w2, int64(tasks), int64(d)).To(dev, false)},
		{Name: "lin2.bias", Tensor: torch.FromSlice(b2, int64(tasks)).To(dev, false)},
	}
	live := []torch.Named{
		{Name: "lin1.weight", Tensor: head.Lin1.Weight}, {Name: "lin1.bias", Tensor: head.Lin1.Bias},
		{Name: "lin2.weight", Tensor: head.Lin2.Weight}, {Name: "lin2.bias", Tensor: head.Lin2.Bias},
	}
	if err := torch.LoadState(live, values); err != nil {
		panic(err) // the shapes are the head's own
	}
}

// holdOutTenth splits idx into nine tenths to fit on and a tenth to choose
// on, the tenth drawn from seed.
func holdOutTenth(idx []int32, seed uint64) (fit, held []int32) {
	shuffled := append([]int32(nil), idx...)
	rand.New(rand.NewPCG(seed, 0x6c702d6674)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	k := max(1, len(shuffled)/10)
	return shuffled[k:], shuffled[:k]
}

// meanEmbeddings is the mean-pooled embedding (n×d, in the caller's scope)
// of the molecules idx of f's dataset by enc in evaluation mode.
func (f *finetuner) meanEmbeddings(enc *model.DeeperGCN, idx []int32) (*torch.Tensor, error) {
	chunks := make([]*torch.Tensor, 0, len(idx)/evalBatchSize+1)
	err := forEachBatch(f.ds, idx, f.workers, f.dev, func(b *feed.Batch, batch *torch.Scope) {
		g := b.Graph(f.dev)
		chunks = append(chunks, batch.Keep(ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)))
	})
	if err != nil {
		return nil, err
	}
	return torch.Cat(chunks, 0), nil
}
