package pretrain_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// oneStep pre-trains cfg for one step in a new run folder and returns what
// its checkpoint holds, by name: the parameters ("model.<name>") and Adam's
// moments ("optim.<name>.exp_avg", …), in float64.
func oneStep(t *testing.T, cfg runfolder.Config) map[string][]float64 {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	cfg.MaxSteps = 1
	run := filepath.Join(t.TempDir(), "run")
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	if ck.Step != 1 {
		t.Fatalf("checkpoint at step %d, want 1", ck.Step)
	}
	out := map[string][]float64{}
	for _, n := range ck.Model {
		out["model."+n.Name] = torch.ToSlice[float64](n.Tensor.ToDType(torch.Float64))
	}
	for _, n := range ck.Optim {
		if !strings.HasSuffix(n.Name, ".step") {
			out["optim."+n.Name] = torch.ToSlice[float64](n.Tensor.ToDType(torch.Float64))
		}
	}
	return out
}

// releasedStepConfig is the released objective's pre-training (AdamW,
// clipping per group) at a test size.
func releasedStepConfig(t *testing.T) runfolder.Config {
	cfg, err := runfolder.DefaultConfigOf(model.ObjectiveReleased)
	if err != nil {
		t.Fatal(err)
	}
	small := smallConfig(t)
	cfg.Data, cfg.Seed = small.Data, small.Seed
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs, cfg.Model.Sampler = 32, 2, 8, model.SamplerKHop
	cfg.BatchSize = 32
	return cfg
}

// trainable lists the parameters a step updates: those with Adam moments.
func trainable(state map[string][]float64) []string {
	var names []string
	for key := range state {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(key, "optim."), ".exp_avg"); ok && strings.HasPrefix(key, "optim.") {
			names = append(names, name)
		}
	}
	return names
}

// ulp is the spacing of float32 numbers at |x|.
func ulp(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// The weight decay reaches the optimiser as AdamW's (docs/method.md §12.5):
// one step from the same seed with decay λ and without differs, in every
// parameter entry, by exactly −lr·λ·θ₀ (θ₀ the weights before the step;
// decoupled: the gradient and so Adam's moments are the same in both). θ₀
// is recovered from the run without decay: θ₀ = θ₁ + lr·m̂/(√v̂ + ε), with
// m̂ = m/(1−β₁) and v̂ = v/(1−β₂) after one step. Adam with an L2 term
// instead, or no decay, fails.
func TestWeightDecayIsAdamWs(t *testing.T) {
	const lambda = 0.3
	cfg := releasedStepConfig(t)
	cfg.WeightDecay = lambda
	with := oneStep(t, cfg)
	cfg.WeightDecay = 0
	without := oneStep(t, cfg)
	names := trainable(without)
	if len(names) < 10 {
		t.Fatalf("only %d parameters with optimiser state: %v", len(names), names)
	}
	const beta1, beta2, eps = 0.9, 0.999, 1e-8
	lr := cfg.LR
	checked := 0
	for _, name := range names {
		m, v := without["optim."+name+".exp_avg"], without["optim."+name+".exp_avg_sq"]
		if mw := with["optim."+name+".exp_avg"]; !equal(mw, m) {
			t.Errorf("%s: the first moment differs with weight decay: the decay reached the gradient (Adam's L2), not the weights", name)
			continue
		}
		a, b := with["model."+name], without["model."+name]
		bad := 0
		for i := range b {
			theta0 := b[i] + lr*(m[i]/(1-beta1))/(math.Sqrt(v[i]/(1-beta2))+eps)
			want := -lr * lambda * theta0
			tol := 4 * max(ulp(theta0), ulp(a[i]), ulp(b[i]))
			if got := a[i] - b[i]; math.Abs(got-want) > tol {
				if bad < 3 {
					t.Errorf("%s[%d]: θ(λ) − θ(0) = %.9g, AdamW's −lr·λ·θ₀ = %.9g (θ₀ %.9g, tolerance %.2g)", name, i, got, want, theta0, tol)
				}
				bad++
			}
			checked++
		}
	}
	t.Logf("%d entries of %d parameters checked", checked, len(names))
}

// The released objective clips the motif table's gradient and the other
// parameters' gradient each to the bound, apart (docs/method.md §12.5), so
// that a large motif-table gradient does not shrink the encoder's. One step
// from the same seed with --clip-grad-norm 0.5 and without (Adam's first
// moment after one step is (1−β₁) times the gradient) gives, in each group
// G, clipped = raw · min(1, 0.5/(‖raw_G‖ + 1e-6)). Here both groups' norms
// exceed the bound and the motif table's is large enough that clipping it
// with the rest would scale the rest by over 1 % less: clipping one group
// only, or both together, fails.
func TestReleasedClipsTheMotifTableApart(t *testing.T) {
	const bound = 0.5
	cfg := releasedStepConfig(t)
	cfg.WeightDecay = 0
	cfg.ClipGradNorm = bound
	clipped := oneStep(t, cfg)
	cfg.ClipGradNorm = 0
	raw := oneStep(t, cfg)
	names := trainable(raw)
	norm := func(state map[string][]float64, motifs bool) float64 {
		var s float64
		for _, name := range names {
			if (name == "motif_embeddings") == motifs {
				for _, m := range state["optim."+name+".exp_avg"] {
					s += m * m
				}
			}
		}
		return math.Sqrt(s) / 0.1 // m = (1−β₁)·g
	}
	motifNorm, restNorm := norm(raw, true), norm(raw, false)
	t.Logf("raw gradient norms: motif table %.4g, the rest %.4g", motifNorm, restNorm)
	together := bound / (math.Hypot(motifNorm, restNorm) + 1e-6)
	if motifNorm < 2*bound || restNorm < 2*bound || together > 0.99*bound/(restNorm+1e-6) {
		t.Fatalf("motif table %.3g, rest %.3g: the case cannot tell clipping apart from clipping together", motifNorm, restNorm)
	}
	for _, name := range names {
		groupNorm := restNorm
		if name == "motif_embeddings" {
			groupNorm = motifNorm
		}
		scale := min(1, bound/(groupNorm+1e-6))
		got, want := clipped["optim."+name+".exp_avg"], raw["optim."+name+".exp_avg"]
		for i := range want {
			if math.Abs(got[i]-scale*want[i]) > 1e-5*math.Abs(scale*want[i])+1e-12 {
				t.Errorf("%s[%d]: clipped gradient %.6g, want %.6g (raw %.6g × %.4g, its group's norm %.4g)", name, i, got[i]/0.1, scale*want[i]/0.1, want[i]/0.1, scale, groupNorm)
				break
			}
		}
	}
	if got := norm(clipped, true); math.Abs(got-bound) > 1e-4 {
		t.Errorf("the motif table's clipped gradient has norm %v, want %v", got, bound)
	}
	if got := norm(clipped, false); math.Abs(got-bound) > 1e-4 {
		t.Errorf("the other parameters' clipped gradient has norm %v, want %v", got, bound)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
