package optim_test

import (
	"math"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// adamReference is Adam/AdamW on one scalar, written from the update rule
// with plain float64 arithmetic.
type adamReference struct {
	lr, b1, b2, eps, wd float64
	decoupled           bool
	p, m, v             float64
	t                   int
}

func (r *adamReference) step(g float64) {
	r.t++
	if r.decoupled {
		r.p *= 1 - r.lr*r.wd
	} else {
		g += r.wd * r.p
	}
	r.m = r.b1*r.m + (1-r.b1)*g
	r.v = r.b2*r.v + (1-r.b2)*g*g
	mHat := r.m / (1 - math.Pow(r.b1, float64(r.t)))
	vHat := r.v / (1 - math.Pow(r.b2, float64(r.t)))
	r.p -= r.lr * mHat / (math.Sqrt(vHat) + r.eps)
}

// setGrad makes p's gradient equal g, through autograd: loss = Σ g·p.
func setGrad(p *torch.Tensor, g []float64) {
	s := torch.NewScope()
	defer s.Close()
	p.Mul(torch.FromSlice(g).To(p.Device(), false)).Sum().Backward()
}

// onTestDevice is v as a float64 tensor on the test device.
func onTestDevice(t *testing.T, v ...float64) *torch.Tensor {
	return torch.FromSlice(v).To(testdevice.Get(t), false)
}

func TestAdamMatchesReference(t *testing.T) {
	grads := [][]float64{{0.5, -2, 1e-3}, {0.4, -1, 3}, {-0.7, 0, 2}, {1, 1, 1}, {-3, 0.5, 0.1}}
	for _, tc := range []struct {
		name      string
		wd        float64
		decoupled bool
	}{{"adam", 0, false}, {"adam_l2", 0.1, false}, {"adamw", 0.1, true}} {
		s := nn.NewStore(testdevice.Get(t), torch.Float64)
		p := s.Root().Param("p", onTestDevice(t, 1, -0.5, 2))
		var o *optim.Adam
		if tc.decoupled {
			o = optim.NewAdamW(s.Trainable(), 0.01, tc.wd)
		} else {
			o = optim.NewAdam(s.Trainable(), 0.01)
			o.WeightDecay = tc.wd
		}
		refs := make([]adamReference, 3)
		for i, v := range []float64{1, -0.5, 2} {
			refs[i] = adamReference{lr: 0.01, b1: 0.9, b2: 0.999, eps: 1e-8, wd: tc.wd, decoupled: tc.decoupled, p: v}
		}
		for k, g := range grads {
			if k == 3 { // the learning rate can change between steps
				o.LR = 0.02
				for i := range refs {
					refs[i].lr = 0.02
				}
			}
			o.ZeroGrad()
			setGrad(p, g)
			o.Step()
			for i := range refs {
				refs[i].step(g[i])
			}
		}
		got := torch.ToSlice[float64](p)
		for i := range refs {
			if math.Abs(got[i]-refs[i].p) > 1e-12 {
				t.Errorf("%s: p[%d] = %.15g, reference %.15g", tc.name, i, got[i], refs[i].p)
			}
		}
		o.Free()
		s.Free()
	}
}

// A parameter without a gradient is not updated and its step count stays.
func TestAdamSkipsParametersWithoutGradient(t *testing.T) {
	s := nn.NewStore(testdevice.Get(t), torch.Float64)
	defer s.Free()
	a := s.Root().Param("a", onTestDevice(t, 1))
	b := s.Root().Param("b", onTestDevice(t, 1))
	o := optim.NewAdam(s.Trainable(), 0.1)
	defer o.Free()
	o.ZeroGrad()
	setGrad(a, []float64{1})
	o.Step()
	if got := torch.ToSlice[float64](b)[0]; got != 1 {
		t.Errorf("b moved to %v without a gradient", got)
	}
	if got := torch.ToSlice[float64](a)[0]; math.Abs(got-0.9) > 1e-9 {
		t.Errorf("a = %v, want 0.9 (first Adam step is −lr·sign)", got)
	}
	steps := map[string]int64{}
	for _, n := range o.State() {
		if strings.HasSuffix(n.Name, ".step") {
			steps[n.Name] = n.Tensor.ItemInt()
		}
	}
	if steps["a.step"] != 1 || steps["b.step"] != 0 {
		t.Errorf("step counts %v, want a 1 and b 0", steps)
	}
}

func TestClipGradNorm(t *testing.T) {
	s := nn.NewStore(testdevice.Get(t), torch.Float64)
	defer s.Free()
	a := s.Root().Param("a", onTestDevice(t, 0, 0))
	b := s.Root().Param("b", onTestDevice(t, 0))
	setGrad(a, []float64{3, 0})
	setGrad(b, []float64{4})
	sc := torch.NewScope()
	defer sc.Close()
	params := []*torch.Tensor{a, b} // one clipping group, as an objective's ClipGroups gives them
	if norm := torch.ClipGradNorm(params, 1).Item(); math.Abs(norm-5) > 1e-12 {
		t.Errorf("norm %v, want 5", norm)
	}
	scale := 1 / (5 + 1e-6)
	if g := torch.ToSlice[float64](a.Grad()); math.Abs(g[0]-3*scale) > 1e-12 {
		t.Errorf("clipped grad %v, want %v", g[0], 3*scale)
	}
	// Under the limit nothing changes.
	torch.ClipGradNorm(params, 10)
	if g := torch.ToSlice[float64](b.Grad()); math.Abs(g[0]-4*scale) > 1e-12 {
		t.Errorf("grad changed under the limit: %v", g[0])
	}
}

// Optimizer state saves and restores by name; a mismatch lists the keys.
func TestAdamStateRoundTrip(t *testing.T) {
	run := func(steps int, from []torch.Named) (*nn.Store, *optim.Adam) {
		s := nn.NewStore(testdevice.Get(t), torch.Float64)
		p := s.Root().Param("w", onTestDevice(t, 1, 2))
		o := optim.NewAdam(s.Trainable(), 0.05)
		if from != nil {
			if err := o.LoadState(from); err != nil {
				t.Fatal(err)
			}
		}
		for range steps {
			o.ZeroGrad()
			setGrad(p, []float64{0.3, -0.6})
			o.Step()
		}
		return s, o
	}
	sc := torch.NewScope()
	defer sc.Close()
	s1, o1 := run(3, nil)
	defer s1.Free()
	defer o1.Free()
	s2, o2 := run(0, o1.State())
	defer s2.Free()
	defer o2.Free()
	for i, n := range o2.State() {
		want := torch.ToSlice[float64](o1.State()[i].Tensor.ToDType(torch.Float64))
		got := torch.ToSlice[float64](n.Tensor.ToDType(torch.Float64))
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("%s[%d] = %v, want %v", n.Name, j, got[j], want[j])
			}
		}
	}
	bad := []torch.Named{
		{Name: "w.exp_avg", Tensor: torch.Zeros([]int64{3}, torch.Options{})},
		{Name: "w.step", Tensor: torch.Zeros(nil, torch.Options{DType: torch.Int64})},
		{Name: "v.exp_avg", Tensor: torch.Zeros([]int64{2}, torch.Options{})},
	}
	err := o2.LoadState(bad)
	for _, want := range []string{"missing keys: w.exp_avg_sq", "unexpected keys: v.exp_avg", "shape mismatch: w.exp_avg (want [2], file has [3])"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
