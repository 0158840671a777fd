package evaluate

import (
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/optim"
)

// Recipe is how a fine-tuning run trains its model: the field's ways of
// carrying pre-trained features through fine-tuning (docs/method.md §7.3,
// each with its source; docs/finetune-study.md measures them). The zero
// value of every field but LR leaves the paper's recipe as it is: Adam at
// LR on every parameter for every epoch, the model evaluated as trained.
type Recipe struct {
	// LR is Adam's learning rate for the head, and for the encoder unless
	// EncoderLR is set.
	LR float64 `json:"lr"`
	// EncoderLR, when positive, is the encoder's own learning rate (MolCLR
	// fine-tunes its encoder at 1e-4 against the head's 5e-4; GROVER scales
	// it by 0.1).
	EncoderLR float64 `json:"encoder_lr,omitempty"`
	// LinearProbeStart starts the head from a linear probe fitted on the
	// frozen encoder's train embeddings (LP-FT, Kumar et al. 2022): the
	// fine-tuned model's first outputs are the probe's (linearprobe.go).
	LinearProbeStart bool `json:"linear_probe_start,omitempty"`
	// FreezeEpochs trains only the head for the first epochs: the encoder
	// runs in evaluation mode (no dropout, running batch-norm statistics)
	// and is not updated.
	FreezeEpochs int `json:"freeze_epochs,omitempty"`
	// WeightDecay, when positive, is AdamW's decoupled weight decay on
	// every parameter; zero is Adam without decay.
	WeightDecay float64 `json:"weight_decay,omitempty"`
	// WarmupEpochs raises both learning rates linearly from 1/W of their
	// value at the first step to their value at the last step of epoch W.
	WarmupEpochs int `json:"warmup_epochs,omitempty"`
	// AverageWithStart, when positive, is the weight w of the starting
	// weights in the model that is evaluated, selected and saved:
	// w·θ_start + (1−w)·θ_fine-tuned, batch-norm statistics included
	// (WiSE-FT, Wortsman et al. 2022, whose α is 1−w). Training itself
	// continues from θ_fine-tuned.
	AverageWithStart float64 `json:"average_with_start,omitempty"`
	// Patience, when positive, stops a run once that many epochs have
	// passed without a better valid figure; the best valid epoch is still
	// the one reported. It needs a valid part (the scaffold protocol).
	Patience int `json:"patience,omitempty"`
}

// validate reports the first setting that cannot work, naming its field;
// crossValidated says whether the runs lack a valid part, and epochs is the
// number they train for.
func (r Recipe) validate(epochs int, crossValidated bool) error {
	if err := field.First(field.Finite("lr", r.LR), field.Finite("encoder_lr", r.EncoderLR),
		field.Finite("weight_decay", r.WeightDecay), field.Finite("average_with_start", r.AverageWithStart)); err != nil {
		return err
	}
	switch {
	case !(r.LR > 0):
		return field.Errorf("lr", r.LR, "must be positive")
	case r.EncoderLR < 0:
		return field.Errorf("encoder_lr", r.EncoderLR, "must be positive (or 0: the lr)")
	case r.FreezeEpochs < 0 || r.FreezeEpochs >= epochs:
		return field.Errorf("freeze_epochs", r.FreezeEpochs, "must be in [0, epochs): the encoder must train for at least one of the %d epochs", epochs)
	case r.WeightDecay < 0:
		return field.Errorf("weight_decay", r.WeightDecay, "must not be negative")
	case r.WarmupEpochs < 0 || r.WarmupEpochs > epochs:
		return field.Errorf("warmup_epochs", r.WarmupEpochs, "must be in [0, epochs] (%d)", epochs)
	case r.AverageWithStart < 0 || r.AverageWithStart >= 1:
		return field.Errorf("average_with_start", r.AverageWithStart, "must be in [0, 1): the starting weights' share (0: off)")
	case r.Patience < 0:
		return field.Errorf("patience", r.Patience, "must not be negative (0: off)")
	case r.Patience > 0 && crossValidated:
		return field.Errorf("patience", r.Patience, "needs a valid part to stop on: protocol %s (cross-validation chooses the epoch on test across folds)", ProtocolScaffold)
	}
	return nil
}

// encoderLR is the encoder's learning rate.
func (r Recipe) encoderLR() float64 {
	if r.EncoderLR > 0 {
		return r.EncoderLR
	}
	return r.LR
}

// steps names the settings that size the recipe's steps, for a message
// on a diverged run: "the learning rate 0.001", then the encoder's rate
// and the weight decay when set.
func (r Recipe) steps() string {
	parts := []string{"the learning rate " + fmtG(r.LR)}
	if r.EncoderLR > 0 {
		parts = append(parts, "the encoder's learning rate "+fmtG(r.EncoderLR))
	}
	if r.WeightDecay > 0 {
		parts = append(parts, "the weight decay "+fmtG(r.WeightDecay))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// String names the recipe's departures from the paper's, for progress lines
// and tables: "lr 0.001" alone is the paper's.
func (r Recipe) String() string {
	parts := []string{"lr " + fmtG(r.LR)}
	if r.EncoderLR > 0 {
		parts = append(parts, "encoder lr "+fmtG(r.EncoderLR))
	}
	if r.LinearProbeStart {
		parts = append(parts, "linear-probe start")
	}
	if r.FreezeEpochs > 0 {
		parts = append(parts, "encoder frozen "+strconv.Itoa(r.FreezeEpochs)+" epochs")
	}
	if r.WeightDecay > 0 {
		parts = append(parts, "weight decay "+fmtG(r.WeightDecay))
	}
	if r.WarmupEpochs > 0 {
		parts = append(parts, "warm-up "+strconv.Itoa(r.WarmupEpochs)+" epochs")
	}
	if r.AverageWithStart > 0 {
		parts = append(parts, "averaged with the start at "+fmtG(r.AverageWithStart))
	}
	if r.Patience > 0 {
		parts = append(parts, "patience "+strconv.Itoa(r.Patience))
	}
	return strings.Join(parts, ", ")
}

// optimizers are a run's two Adam optimisers: the encoder's and the head's,
// each at its own rate (the same rate gives the single optimiser's steps:
// Adam updates each parameter on its own).
type optimizers struct {
	encoder, head *optim.Adam
	lr, encoderLR float64 // the rates before warm-up
}

// newOptimizers builds r's optimisers over the classifier's parameters.
func (r Recipe) newOptimizers(clf *model.Classifier) *optimizers {
	var enc, head []nn.Var
	for _, v := range clf.Store.Trainable() {
		if strings.HasPrefix(v.Name, "encoder.") {
			enc = append(enc, v)
		} else {
			head = append(head, v)
		}
	}
	o := &optimizers{lr: r.LR, encoderLR: r.encoderLR()}
	if r.WeightDecay > 0 {
		o.encoder, o.head = optim.NewAdamW(enc, o.encoderLR, r.WeightDecay), optim.NewAdamW(head, o.lr, r.WeightDecay)
	} else {
		o.encoder, o.head = optim.NewAdam(enc, o.encoderLR), optim.NewAdam(head, o.lr)
	}
	return o
}

// setScale sets both rates to scale times their value (warm-up).
func (o *optimizers) setScale(scale float64) {
	o.encoder.LR, o.head.LR = o.encoderLR*scale, o.lr*scale
}

// zeroGrad drops every gradient.
func (o *optimizers) zeroGrad() {
	o.encoder.ZeroGrad()
	o.head.ZeroGrad()
}

// step updates the parameters that have gradients: a frozen encoder has none.
func (o *optimizers) step() {
	o.encoder.Step()
	o.head.Step()
}

// free releases both optimisers' state.
func (o *optimizers) free() {
	o.encoder.Free()
	o.head.Free()
}

// warmupScale is the rate's factor at step (from 0) of a run with
// stepsPerEpoch steps an epoch: (step+1)/(W·stepsPerEpoch) during the
// first W epochs, then 1.
func (r Recipe) warmupScale(step, stepsPerEpoch int) float64 {
	total := r.WarmupEpochs * stepsPerEpoch
	if step >= total {
		return 1
	}
	return float64(step+1) / float64(total)
}

// fmtG writes x as %g does, in its shortest exact form.
func fmtG(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// evaluatedWeights put in place, for an evaluation, the weights a run
// evaluates, selects and saves, and put the trained ones back after it.
type evaluatedWeights interface {
	apply()
	restore()
	free()
}

// evaluatedWeights are the trained weights themselves, or with
// AverageWithStart their average with the classifier's weights now, at the
// start of training.
func (r Recipe) evaluatedWeights(clf *model.Classifier) evaluatedWeights {
	if r.AverageWithStart == 0 {
		return trainedWeights{}
	}
	a := &averagedWeights{share: r.AverageWithStart}
	for _, n := range clf.Store.State() {
		if n.Tensor.DType() != torch.Float32 {
			continue // batch norm's counter of batches stays the trained one
		}
		a.live = append(a.live, n.Tensor)
		a.start = append(a.start, copyOf(n.Tensor))
	}
	return a
}

// trainedWeights evaluate the model as trained.
type trainedWeights struct{}

func (trainedWeights) apply()   {}
func (trainedWeights) restore() {}
func (trainedWeights) free()    {}

// averagedWeights evaluate share·θ_start + (1−share)·θ (WiSE-FT).
type averagedWeights struct {
	share float64
	live  []*torch.Tensor // the classifier's float tensors
	start []*torch.Tensor // their values at the start of training
	held  []*torch.Tensor // their trained values while the average is in place
}

func (a *averagedWeights) apply() {
	for i, t := range a.live {
		a.held = append(a.held, copyOf(t))
		torch.ScopedValue(func() struct{} {
			torch.NoGrad(func() { t.CopyFrom(a.start[i].MulScalar(a.share).Add(a.held[i].MulScalar(1-a.share)), false) })
			return struct{}{}
		})
	}
}

func (a *averagedWeights) restore() {
	torch.NoGrad(func() {
		for i, t := range a.live {
			t.CopyFrom(a.held[i], false)
			a.held[i].Free()
		}
	})
	a.held = a.held[:0]
}

// copyOf is a copy of t's values, owned by the caller, outside any scope.
func copyOf(t *torch.Tensor) *torch.Tensor {
	return torch.Scoped(func() *torch.Tensor { return t.Detach().Clone() }).Unscope()
}

func (a *averagedWeights) free() {
	for _, t := range a.start {
		t.Free()
	}
}
