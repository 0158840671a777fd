// Package optim holds optimisers over an nn.Store's parameters, with state
// that is saved and restored by name.
package optim

import (
	"fmt"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Adam is torch.optim.Adam, or torch.optim.AdamW when Decoupled is set:
//
//	g ← ∇θ (+ λθ for Adam)          θ ← θ(1 − ηλ) first, for AdamW
//	m ← β₁m + (1−β₁)g               v ← β₂v + (1−β₂)g²
//	θ ← θ − η/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)
//
// A parameter without a gradient (see ZeroGrad) is not updated and its step
// count t does not advance. The fields may be changed between steps.
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Decoupled                          bool

	vars      []nn.Var
	params    []*torch.Tensor
	expAvg    []*torch.Tensor
	expAvgSq  []*torch.Tensor
	steps     *torch.Tensor   // int64 on the CPU: updates of each parameter
	stepViews []*torch.Tensor // 0-d views of steps, one per parameter, for State
	fused     bool            // every parameter is one the fused kernel takes
}

// NewAdam is Adam over vars' trainable tensors with PyTorch's defaults
// (β = (0.9, 0.999), ε = 1e-8, no weight decay).
func NewAdam(vars []nn.Var, lr float64) *Adam {
	o := &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	for _, v := range vars {
		if !v.Trainable {
			continue
		}
		o.vars = append(o.vars, v)
		o.params = append(o.params, v.Tensor)
		o.expAvg = append(o.expAvg, zerosLike(v.Tensor))
		o.expAvgSq = append(o.expAvgSq, zerosLike(v.Tensor))
	}
	o.fused = true
	for _, p := range o.params {
		o.fused = o.fused && torch.FusedKernelsFor(p)
	}
	o.steps = torch.Zeros([]int64{int64(len(o.params))}, torch.Options{DType: torch.Int64}).Unscope()
	for i := range o.params {
		row := o.steps.Narrow(0, int64(i), 1)
		o.stepViews = append(o.stepViews, row.Reshape().Unscope())
		row.Free()
	}
	return o
}

// NewAdamW is AdamW (decoupled weight decay) with PyTorch's defaults.
func NewAdamW(vars []nn.Var, lr, weightDecay float64) *Adam {
	o := NewAdam(vars, lr)
	o.WeightDecay, o.Decoupled = weightDecay, true
	return o
}

func zerosLike(t *torch.Tensor) *torch.Tensor {
	return torch.Zeros(t.Shape(), t.Options()).Unscope()
}

// Step updates every parameter that has a gradient, in the fused kernel
// (torch.FusedAdamStep) where it takes every parameter.
func (o *Adam) Step() {
	if o.fused {
		torch.FusedAdamStep(o.params, o.expAvg, o.expAvgSq, torch.HostData[int64](o.steps), o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.Decoupled)
		return
	}
	torch.AdamStep(o.params, o.expAvg, o.expAvgSq, torch.HostData[int64](o.steps), o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.Decoupled)
}

// ZeroGrad drops every parameter's gradient, so that the next backward pass
// starts afresh and parameters it does not reach are left alone by Step.
func (o *Adam) ZeroGrad() { torch.ZeroGrad(o.params) }

// State is the optimiser's live state by parameter name: "<name>.exp_avg",
// "<name>.exp_avg_sq" and "<name>.step" (int64, 0-d, on the CPU).
func (o *Adam) State() []torch.Named {
	out := make([]torch.Named, 0, 3*len(o.vars))
	for i, v := range o.vars {
		out = append(out,
			torch.Named{Name: v.Name + ".exp_avg", Tensor: o.expAvg[i]},
			torch.Named{Name: v.Name + ".exp_avg_sq", Tensor: o.expAvgSq[i]},
			torch.Named{Name: v.Name + ".step", Tensor: o.stepViews[i]})
	}
	return out
}

// LoadState restores what State saved, with torch.LoadState's checks.
func (o *Adam) LoadState(src []torch.Named) error {
	if err := torch.LoadState(o.State(), src); err != nil {
		return fmt.Errorf("optimizer: %w", err)
	}
	return nil
}

// Free releases the optimiser's state.
func (o *Adam) Free() {
	for i := range o.params {
		o.expAvg[i].Free()
		o.expAvgSq[i].Free()
		o.stepViews[i].Free()
	}
	o.steps.Free()
}
