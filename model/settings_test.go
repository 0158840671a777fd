package model_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/model/internal/reference"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// The checks of this file run on the built-in synthetic molecules
// (data/synthetic, featurised by the RDKit shim into a temporary folder), so
// they need no ../shared; TestMatchesReference keeps the ogbg-molbace check.

// synthMolecules featurises n synthetic molecules into a temporary folder and
// loads them.
func synthMolecules(t testing.TB, n int) *data.Dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(dir, synthetic.Options{Molecules: n, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ds, _, err := data.Load(dir, data.LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Non-default weights and temperature, chosen so that every likely
// mis-wiring of the objective changes the total: λ_n ≠ λ_s (swapped
// weights), α ≠ 1−α (a misplaced α), λ_r ≠ 1, t ≠ 1 (a temperature
// ignored).
const (
	alphaX, lambdaNodeX, lambdaSubX, lambdaRegX, tempX = 0.3, 0.7, 1.9, 2.5, 0.3
)

func smallSynthConfig() model.Config {
	c := deterministic(model.DefaultConfig())
	c.Encoder.Hidden, c.Encoder.Layers, c.Motifs, c.Eta = 16, 3, 6, 2
	return c
}

func weighted(c model.Config) model.Config {
	c.Alpha, c.LambdaNode, c.LambdaSub, c.LambdaReg, c.Encoder.T = alphaX, lambdaNodeX, lambdaSubX, lambdaRegX, tempX
	return c
}

// Tolerances, relative to max(1, |want|): the float64 model agrees with the
// float64 reference to rounding; the float32 model carries float32 rounding
// through L layers and the cosine softmaxes at τ = 0.05 (logits up to 20).
type tolerances struct{ matrix, loss float64 }

var (
	tol64 = tolerances{matrix: 1e-6, loss: 1e-6}
	tol32 = tolerances{matrix: 1e-4, loss: 1e-5}
)

func tolFor(dt torch.DType) tolerances {
	if dt == torch.Float64 {
		return tol64
	}
	return tol32
}

// setRunningStatsToBatch makes every batch norm's running statistics the
// batch statistics (mean, biased variance) it sees on g, so that an
// evaluation-mode forward pass normalises exactly as the reference's
// training-mode batch norm does.
func setRunningStatsToBatch(t *testing.T, m *model.MicroGraph, g *graph.Graph) {
	t.Helper()
	type stat struct{ mean, variance []float64 }
	stats := map[int]stat{}
	torch.NoGrad(func() {
		m.Encoder.Probe(g, model.ForwardProbe{BatchStats: true, NormInput: func(l int, x *torch.Tensor) {
			rows := matrix(x)
			d := len(rows[0])
			s := stat{make([]float64, d), make([]float64, d)}
			for _, r := range rows {
				for ch, v := range r {
					s.mean[ch] += v
				}
			}
			for ch := range s.mean {
				s.mean[ch] /= float64(len(rows))
			}
			for _, r := range rows {
				for ch, v := range r {
					s.variance[ch] += (v - s.mean[ch]) * (v - s.mean[ch])
				}
			}
			for ch := range s.variance {
				s.variance[ch] /= float64(len(rows))
			}
			stats[l] = s
		}})
	})
	if len(stats) != len(m.Encoder.Norms) {
		t.Fatalf("saw %d norm inputs, want %d", len(stats), len(m.Encoder.Norms))
	}
	for l, n := range m.Encoder.Norms {
		d := int64(len(stats[l].mean))
		n.RunningMean.CopyFrom(torch.FromSlice(stats[l].mean, d), false)
		n.RunningVar.CopyFrom(torch.FromSlice(stats[l].variance, d), false)
	}
}

// compareWithReference checks a forward pass against the reference on the
// same weights and batch: every intermediate and loss part, and the total.
// With float32 the reference takes the model's motif assignment (its float32
// Sinkhorn may break a near tie otherwise), and the two assignments must
// agree on all but 2 % of the nodes.
func compareWithReference(t *testing.T, m *model.MicroGraph, out model.Output, b *feed.Batch, dt torch.DType) reference.Result {
	t.Helper()
	tol := tolFor(dt)
	w, rb, rc := referenceWeights(t, m), referenceBatch(b), referenceConfig(m.Config)
	ref, err := reference.Forward(w, rb, rc)
	if err != nil {
		t.Fatal(err)
	}
	motif := torch.ToSlice[int64](out.Motif)
	differ := 0
	for l, k := range ref.Motif {
		if motif[l] != int64(k) {
			differ++
		}
	}
	switch {
	case dt == torch.Float64 && differ > 0:
		t.Fatalf("%d of %d nodes have another motif than the reference's", differ, len(motif))
	case differ > len(motif)/50:
		t.Fatalf("%d of %d nodes have another motif than the reference's", differ, len(motif))
	case differ > 0:
		assigned := make([]int, len(motif))
		for l, k := range motif {
			assigned[l] = int(k)
		}
		if ref, err = reference.ForwardWithMotifs(w, rb, rc, assigned); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d nodes break a Sinkhorn tie otherwise: the reference takes the model's assignment", differ, len(motif))
	}
	compareMatrix(t, "H", matrix(out.H), ref.H, tol.matrix)
	compareMatrix(t, "E", matrix(out.E), ref.E, tol.matrix)
	compareMatrix(t, "Q", matrix(out.Q), ref.Q, tol.matrix)
	slots, members := liveSubgraphs(out.Subgraphs)
	if len(slots) != len(ref.Subgraphs) || len(slots) == 0 {
		t.Fatalf("%d subgraphs, reference %d", len(slots), len(ref.Subgraphs))
	}
	k := int64(m.Config.Motifs)
	for j, s := range ref.Subgraphs {
		if slots[j] != int64(s.Graph)*k+int64(s.Motif) || !slices.Equal(members[j], s.Nodes) {
			t.Fatalf("subgraph %d: slot %d members %v, reference graph %d motif %d members %v", j, slots[j], members[j], s.Graph, s.Motif, s.Nodes)
		}
	}
	compareMatrix(t, "S", matrix(out.S), ref.S, tol.matrix)
	compareMatrix(t, "P", matrix(out.LogP.Exp()), ref.P, tol.matrix)
	want := parts{ref.NodeMot, ref.MotSub, ref.Reg, ref.Contra, ref.Total}
	if m.Config.LambdaReg == 0 {
		want.reg = 0 // the reference computes L_reg regardless; its weight is 0
	}
	compareLosses(t, out, want, tol.loss)
	return ref
}

// parts are the loss parts and total of one forward pass.
type parts struct{ nodeMot, motSub, reg, contra, total float64 }

func compareLosses(t *testing.T, out model.Output, want parts, tol float64) {
	t.Helper()
	for _, p := range []struct {
		name      string
		got, want float64
	}{
		{"node_mot", out.Part("node_mot").Item(), want.nodeMot},
		{"mot_sub", out.Part("mot_sub").Item(), want.motSub},
		{"reg", out.Part("reg").Item(), want.reg},
		{"contra", out.Part("contra").Item(), want.contra},
		{"total", out.Total.Item(), want.total},
	} {
		if !closeRel(p.got, p.want, tol) {
			t.Errorf("%s = %.10g, reference %.10g (tolerance %g)", p.name, p.got, p.want, tol)
		}
	}
}

// mustDistinguish fails the test when the reference's total would not tell
// the settings' likely mis-wirings apart by ten times the comparison's
// tolerance tol: a check that cannot fail is worse than none.
func mustDistinguish(t *testing.T, c model.Config, p parts, tol float64) {
	t.Helper()
	a, ln, ls, lr := c.Alpha, c.LambdaNode, c.LambdaSub, c.LambdaReg
	for _, wrong := range []struct {
		name  string
		total float64
	}{
		{"λ_n and λ_s swapped", a*(ls*p.nodeMot+ln*p.motSub+lr*p.reg) + (1-a)*p.contra},
		{"α and 1−α swapped", (1-a)*(ln*p.nodeMot+ls*p.motSub+lr*p.reg) + a*p.contra},
		{"contrast weighted α", a*(ln*p.nodeMot+ls*p.motSub+lr*p.reg) + a*p.contra},
		{"λ_r on L_node-mot", a*(lr*p.nodeMot+ls*p.motSub+ln*p.reg) + (1-a)*p.contra},
		{"λ_r dropped", a*(ln*p.nodeMot+ls*p.motSub+p.reg) + (1-a)*p.contra},
	} {
		if closeRel(wrong.total, p.total, 10*tol) {
			t.Errorf("with %s the total would be %.10g, too close to %.10g: the settings cannot catch it", wrong.name, wrong.total, p.total)
		}
	}
}

// The libtorch model agrees with the float64 reference at settings other
// than the defaults — α, λ_n, λ_s, λ_r, a fixed t ≠ 1 through the fused and
// the composed aggregation, the restricted orthogonality term, λ_r = 0, and
// evaluation mode — in float64 (to 1e-6) and float32 (matrices 1e-4, losses
// 1e-5, relative to max(1, |x|); the errors seen are about a tenth), on synthetic molecules.
func TestMatchesReferenceAtOtherSettings(t *testing.T) {
	ds := synthMolecules(t, 24)
	b := collate(t, ds, span(0, 12))
	cases := []struct {
		name    string
		cfg     model.Config
		unfused bool
		eval    bool // train=false with dropout and perturbation configured
	}{
		{name: "weights and t=0.3, fused aggregation", cfg: weighted(smallSynthConfig())},
		{name: "weights and t=0.3, composed aggregation", cfg: weighted(smallSynthConfig()), unfused: true},
		{name: "t=2.5", cfg: func() model.Config { c := weighted(smallSynthConfig()); c.Encoder.T = 2.5; return c }()},
		{name: "ortho over selected motifs", cfg: func() model.Config { c := weighted(smallSynthConfig()); c.OrthoSelected = true; return c }()},
		{name: "without L_reg", cfg: func() model.Config { c := weighted(smallSynthConfig()); c.LambdaReg = 0; return c }()},
		{name: "evaluation mode", eval: true, cfg: func() model.Config {
			c := weighted(smallSynthConfig())
			c.Encoder.Dropout, c.PDrop, c.PAdd = 0.3, 0.3, 0.3
			return c
		}()},
	}
	for _, dt := range []torch.DType{torch.Float64, torch.Float32} {
		for _, tc := range cases {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				scope(t)
				torch.ManualSeed(17)
				m, err := model.New(tc.cfg, testdevice.Get(t), dt)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				model.SetUnfused(m.Encoder, tc.unfused)
				if tc.eval {
					setRunningStatsToBatch(t, m, b.Graph(testdevice.Get(t)))
				}
				out := m.Forward(b.Graph(testdevice.Get(t)), !tc.eval)
				ref := compareWithReference(t, m, out, b, dt)
				p := parts{ref.NodeMot, ref.MotSub, ref.Reg, ref.Contra, ref.Total}
				if tc.cfg.LambdaReg > 0 {
					mustDistinguish(t, tc.cfg, p, tolFor(dt).loss)
				}
				if ref.Reg == 0 && tc.cfg.LambdaReg > 0 {
					t.Error("L_reg is 0: the check would miss λ_r")
				}
				// The temperature matters at these weights: the reference
				// at t = 1 gives another total.
				if tc.cfg.Encoder.T != 1 {
					c := referenceConfig(tc.cfg)
					w := referenceWeights(t, m)
					for l := range w.Convs {
						w.Convs[l].T = 1
					}
					at1, err := reference.Forward(w, referenceBatch(b), c)
					if err != nil {
						t.Fatal(err)
					}
					if closeRel(at1.Total, ref.Total, 10*tolFor(dt).loss) {
						t.Errorf("t = %g and t = 1 give totals %.8g and %.8g: the check cannot see t", tc.cfg.Encoder.T, ref.Total, at1.Total)
					}
				}
				t.Logf("%d atoms, %d subgraphs; node_mot %.5f mot_sub %.5f reg %.5f contra %.5f total %.5f",
					b.NumAtoms(), len(ref.Subgraphs), ref.NodeMot, ref.MotSub, ref.Reg, ref.Contra, ref.Total)
			})
		}
	}
}

// With the ablation samplers (random walks, k-hop) the reference's
// sampler-independent parts — H, Q, L_node-mot, L_reg — must agree, and
// L_mot-sub, L_contra and the total are recomputed here in float64 from
// the model's own sampled subgraphs: each subgraph's target is the argmax
// of its P (§4), not a motif slot.
func TestAblationSamplersMatchReference(t *testing.T) {
	ds := synthMolecules(t, 24)
	b := collate(t, ds, span(0, 12))
	for _, dt := range []torch.DType{torch.Float64, torch.Float32} {
		for _, sampler := range []string{model.SamplerRandomWalk, model.SamplerKHop} {
			t.Run(dt.String()+"/"+sampler, func(t *testing.T) {
				scope(t)
				tol := tolFor(dt)
				cfg := weighted(smallSynthConfig())
				cfg.Sampler, cfg.SubgraphsPerGraph = sampler, 3
				torch.ManualSeed(23)
				m, err := model.New(cfg, testdevice.Get(t), dt)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				out := m.Forward(b.Graph(testdevice.Get(t)), true)
				w := referenceWeights(t, m)
				ref, err := reference.Forward(w, referenceBatch(b), referenceConfig(cfg))
				if err != nil {
					t.Fatal(err)
				}
				h := matrix(out.H)
				compareMatrix(t, "H", h, ref.H, tol.matrix)
				compareMatrix(t, "E", matrix(out.E), ref.E, tol.matrix)
				compareMatrix(t, "Q", matrix(out.Q), ref.Q, tol.matrix)

				// The subgraphs the model drew, rebuilt on the host.
				slots, members := liveSubgraphs(out.Subgraphs)
				if len(slots) == 0 {
					t.Fatal("no subgraphs")
				}
				per := out.Subgraphs.PerGraph
				s := make([][]float64, len(slots))
				graphOf := make([]int, len(slots))
				for j, mem := range members {
					if len(mem) < cfg.Eta {
						t.Fatalf("subgraph %d has %d members, fewer than η = %d", j, len(mem), cfg.Eta)
					}
					graphOf[j] = int(slots[j] / per)
					s[j] = make([]float64, cfg.Encoder.Hidden)
					for _, l := range mem {
						if b.NodeGraph[l] != int64(graphOf[j]) {
							t.Fatalf("subgraph %d (graph %d) holds node %d of graph %d", j, graphOf[j], l, b.NodeGraph[l])
						}
						for ch, v := range h[l] {
							s[j][ch] += v / float64(len(mem))
						}
					}
				}
				compareMatrix(t, "S", matrix(out.S), s, tol.matrix)
				logP := cosineLogSoftmax(project(w.Ws, s), w.Motifs, cfg.Tau)
				motSub := 0.0
				for _, row := range logP {
					motSub -= slices.Max(row)
				}
				motSub /= float64(len(logP))
				contra := contrastByHand(project(w.We, ref.E), s, graphOf, cfg.Tau)
				want := parts{ref.NodeMot, motSub, ref.Reg, contra,
					cfg.Alpha*(cfg.LambdaNode*ref.NodeMot+cfg.LambdaSub*motSub+cfg.LambdaReg*ref.Reg) + (1-cfg.Alpha)*contra}
				compareLosses(t, out, want, tol.loss)
				mustDistinguish(t, cfg, want, tol.loss)
			})
		}
	}
}

// project is W·x for every row x.
func project(w, rows [][]float64) [][]float64 {
	out := make([][]float64, len(rows))
	for i, x := range rows {
		out[i] = make([]float64, len(w))
		for o, wr := range w {
			for ch, v := range wr {
				out[i][o] += v * x[ch]
			}
		}
	}
	return out
}

func cosine(a, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * b[i]
		aa += a[i] * a[i]
		bb += b[i] * b[i]
	}
	return ab / math.Max(math.Sqrt(aa)*math.Sqrt(bb), 1e-8)
}

// cosineLogSoftmax is log softmax_k(cos(x_i, m_k)/τ) for every row x_i.
func cosineLogSoftmax(x, m [][]float64, tau float64) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		logits := make([]float64, len(m))
		for k, mk := range m {
			logits[k] = cosine(row, mk) / tau
		}
		lse := logSumExp(logits)
		for k := range logits {
			logits[k] -= lse
		}
		out[i] = logits
	}
	return out
}

func logSumExp(v []float64) float64 {
	mx := slices.Max(v)
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - mx)
	}
	return mx + math.Log(s)
}

// contrastByHand is §6's L_contra: Y_ij = cos(z_i, s_j)/τ over every
// subgraph j of the batch; minus the sum over j of log softmax(Y_{g(j)·})_j,
// over the number of molecules with a subgraph.
func contrastByHand(z, s [][]float64, graphOf []int, tau float64) float64 {
	sum := 0.0
	has := map[int]bool{}
	for i := range z {
		y := make([]float64, len(s))
		for j := range s {
			y[j] = cosine(z[i], s[j]) / tau
		}
		lse := logSumExp(y)
		for j, g := range graphOf {
			if g == i {
				sum += y[j] - lse
				has[i] = true
			}
		}
	}
	return -sum / float64(len(has))
}

// At non-default weights and t = 0.3, on synthetic molecules, the gradient
// of the total agrees with float64 central differences for samples of every
// parameter tensor, through the composed aggregation with t fixed (its cut
// weights pinned) and the fused one with t learned.
func TestGradientAtOtherSettings(t *testing.T) {
	ds := synthMolecules(t, 8)
	b := collate(t, ds, span(0, 4))
	fixed := weighted(smallSynthConfig())
	fixed.Encoder.Hidden, fixed.Encoder.Layers, fixed.Motifs = 8, 2, 4
	learned := fixed
	learned.Encoder.LearnT, learned.OrthoSelected = true, true
	for _, tc := range []struct {
		name string
		cfg  model.Config
	}{{"fixed t, composed", fixed}, {"learned t, fused, selected ortho", learned}} {
		t.Run(tc.name, func(t *testing.T) {
			checkGradients(t, tc.cfg, b.Graph(testdevice.Get(t)), 29, rand.New(rand.NewPCG(3, 4)))
		})
	}
}
