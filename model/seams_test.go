package model_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// The tests of this file plug a sampler and an objective that exist only
// here into the model through model.Sampler and model.Objective alone: the
// proof that those are the seams.

// wholeMolecules is a test-only sampler: each molecule's one subgraph is
// the whole molecule, so that a subgraph's embedding is its molecule's.
// It records what the objective gave it.
type wholeMolecules struct {
	needs model.SamplerNeeds
	seen  *model.SampleInput
}

func (s wholeMolecules) Name() string              { return "whole-molecules" }
func (s wholeMolecules) Needs() model.SamplerNeeds { return s.needs }

func (s wholeMolecules) Sample(in model.SampleInput) *ops.Subgraphs {
	if s.seen != nil {
		*s.seen = in
	}
	g := in.Graph
	lists := make([][][]int, g.NumGraphs)
	for gi := range lists {
		n := int(g.Host.GraphPtr[gi+1] - g.Host.GraphPtr[gi])
		atoms := make([]int, n)
		for a := range atoms {
			atoms[a] = a
		}
		lists[gi] = [][]int{atoms}
	}
	return ops.ListedSubgraphs(g, lists, in.DType)
}

// A sampler of the test's own trains under both objectives: each gives it
// what it says it needs (the paper's the nodes' motifs, the released one
// embeddings from a pass without gradient), and each reads its subgraphs.
// With whole molecules as subgraphs, S is E, and the paper's L_mot-sub
// takes as each subgraph's target its slot's motif when the sampler says
// its slots are motifs (slot j, molecule j, motif j mod K), else its
// closest motif: −mean_j log P[j, j mod K], or −mean_j max_k log P[j, k].
func TestTestOnlySamplerPlugsIn(t *testing.T) {
	ds := synthMolecules(t, 24)
	for _, tc := range []struct {
		objective string
		needs     model.SamplerNeeds
	}{
		{model.ObjectivePaper, model.SamplerNeeds{}},
		{model.ObjectivePaper, model.SamplerNeeds{Motifs: true}},
		{model.ObjectiveReleased, model.SamplerNeeds{Embeddings: true}},
	} {
		t.Run(fmt.Sprintf("%s/%+v", tc.objective, tc.needs), func(t *testing.T) {
			scope(t)
			cfg := smallSynthConfig()
			if tc.objective == model.ObjectiveReleased {
				cfg = releasedConfig(model.SamplerSpectral)
			}
			torch.ManualSeed(4)
			m, err := model.New(cfg, torch.CPU, torch.Float64)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			b := collate(t, ds, span(0, 12))
			g := b.Graph(torch.CPU)
			var seen model.SampleInput
			out := m.Objective.Forward(g, wholeMolecules{needs: tc.needs, seen: &seen}, true)

			if n := out.Subgraphs.Count().ItemInt(); n != g.NumGraphs {
				t.Fatalf("%d subgraphs, want one per molecule, %d", n, g.NumGraphs)
			}
			assertClose(t, "S against E", vector(out.S), vector(out.E), 1e-12)
			if seen.Graph != g || seen.DType != torch.Float64 || !seen.Perturb {
				t.Errorf("the sampler saw graph %p, dtype %v, perturb %v; want the batch's, float64, true", seen.Graph, seen.DType, seen.Perturb)
			}
			if tc.needs.Motifs && (seen.Motif == nil || !slices.Equal(vector(seen.Motif), vector(out.Motif))) {
				t.Error("the sampler was not given the nodes' Sinkhorn motifs")
			}
			if tc.needs.Embeddings {
				if seen.Embeddings == nil || !slices.Equal(seen.Embeddings.Shape(), out.H.Shape()) {
					t.Fatalf("the sampler was given embeddings %v, want N×d like H %v", seen.Embeddings, out.H.Shape())
				}
				// The released objective's own pass, in training mode
				// without gradient (§12.1).
				if seen.Embeddings.RequiresGrad() || seen.Embeddings == out.H {
					t.Error("the sampler was given the loss pass's embeddings, not a pass of their own without gradient")
				}
			}
			if tc.objective == model.ObjectivePaper {
				var want float64
				logP := matrix(out.LogP)
				for j, row := range logP {
					target := slices.Max(row)
					if tc.needs.Motifs {
						target = row[j%cfg.Motifs]
					}
					want -= target / float64(len(logP))
				}
				assertClose(t, "L_mot-sub", []float64{out.Part("mot_sub").Item()}, []float64{want}, 1e-12)
			}
			out.Total.Backward()
			if m.Store.Get("encoder.convs.0.lin.weight").Grad() == nil {
				t.Error("no gradient reached the encoder through the test sampler's subgraphs")
			}
		})
	}
}

// centreObjective is a test-only objective: one parameter of its own,
// W_c (d×d, "W_c.weight"), and one loss part pulling each subgraph's
// projection onto its molecule's embedding:
//
//	pull = mean_j ‖W_c s_j − e_graph(j)‖²,  L = 2·pull
type centreObjective struct {
	wc *nn.Linear
	m  *model.MicroGraph
}

func (o *centreObjective) Name() string                          { return "centre" }
func (o *centreObjective) Check() error                          { return nil }
func (o *centreObjective) Sampler(string) (model.Sampler, error) { return wholeMolecules{}, nil }
func (o *centreObjective) Describe() string                      { return "" }
func (o *centreObjective) PartNames() []string                   { return []string{"pull"} }
func (o *centreObjective) Total(parts []torch.Named) *torch.Tensor {
	return parts[0].Tensor.MulScalar(2)
}

func (o *centreObjective) Register(m *model.MicroGraph, p nn.Path) {
	o.m = m
	o.wc = o.AssignmentHead(p).(*nn.Linear)
}

func (o *centreObjective) AssignmentHead(p nn.Path) model.Projection {
	d := int64(o.m.Config.Encoder.Hidden)
	return nn.NewLinear(p.Sub("W_c"), d, d, false)
}

func (o *centreObjective) Initialise(func(int) ([]*graph.Graph, error)) (string, error) {
	return "", nil
}

func (o *centreObjective) ClipGroups() [][]*torch.Tensor {
	var all []*torch.Tensor
	for _, v := range o.m.Store.Trainable() {
		all = append(all, v.Tensor)
	}
	return [][]*torch.Tensor{all}
}

func (o *centreObjective) Forward(g *graph.Graph, s model.Sampler, train bool) model.Output {
	h := o.m.Encoder.Forward(g, train)
	sub := s.Sample(model.SampleInput{Graph: g, Embeddings: h, Perturb: train, DType: o.m.Store.DType()})
	e := ops.GraphPool(h, g, ops.MeanPool)
	live := sub.LiveRows(sub.Pool(h))
	mine := sub.LiveSlots.FloorDivideScalar(float64(sub.PerGraph))
	d := o.wc.Forward(live).Sub(e.IndexSelect(0, mine))
	pull := d.Mul(d).SumDim(1, false).Mean()
	l := model.Losses{Parts: []torch.Named{{Name: "pull", Tensor: pull}}, Subgraphs: sub.Count()}
	l.Total = o.Total(l.Parts)
	return model.Output{Losses: l, Assignment: model.Assignment{H: h}, E: e, Subgraphs: sub, S: live}
}

func (o *centreObjective) ReadMotifs(g *graph.Graph) model.MotifReading {
	out := o.Forward(g, wholeMolecules{}, false)
	r := model.MotifReading{Output: out, Cosine: ops.Cosine(o.wc.Forward(out.S), o.m.Motifs)}
	for _, row := range matrix(r.Cosine) {
		r.SubgraphMotif = append(r.SubgraphMotif, slices.Index(row, slices.Max(row)))
	}
	for _, mol := range torch.ToSlice[int64](g.NodeGraph) {
		r.AtomMotif = append(r.AtomMotif, r.SubgraphMotif[mol])
	}
	return r
}

// An objective of the test's own builds a model (its parameter beside the
// encoder and motif table, none of the paper's or the released one's),
// trains through MicroGraph.Forward with its own sampler, computes the loss
// its definition gives by hand, sends gradients into its parameter and the
// encoder, and answers the analyses' questions.
func TestTestOnlyObjectivePlugsIn(t *testing.T) {
	scope(t)
	ds := synthMolecules(t, 24)
	cfg := smallSynthConfig()
	torch.ManualSeed(6)
	o := &centreObjective{}
	m, err := model.NewWith(cfg, o, torch.CPU, torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	var names []string
	for _, n := range m.Store.State() {
		names = append(names, n.Name)
	}
	if !slices.Contains(names, "W_c.weight") || slices.Contains(names, "W_h.weight") || slices.Contains(names, "projection_head.0.weight") {
		t.Fatalf("state %v: want W_c.weight and neither objective's projections", names)
	}

	b := collate(t, ds, span(0, 10))
	g := b.Graph(torch.CPU)
	out := m.Forward(g, true)
	e, w := matrix(out.E), matrix(m.Store.Get("W_c.weight"))
	var pull float64
	for _, row := range e {
		for i := range w {
			var z float64
			for j, v := range row {
				z += w[i][j] * v
			}
			pull += (z - row[i]) * (z - row[i]) / float64(len(e))
		}
	}
	assertClose(t, "total", []float64{out.Total.Item()}, []float64{2 * pull}, 1e-10)
	out.Total.Backward()
	for _, name := range []string{"W_c.weight", "encoder.convs.1.lin.weight"} {
		if m.Store.Get(name).Grad() == nil {
			t.Errorf("no gradient reached %s", name)
		}
	}

	// It reads motifs, as an optional interface: each molecule's one
	// subgraph (in evaluation mode) stands for its closest motif.
	reader, err := model.AsMotifReader(m.Objective)
	if err != nil {
		t.Fatal(err)
	}
	read := reader.ReadMotifs(g)
	if len(read.AtomMotif) != int(g.NumNodes) || len(read.SubgraphMotif) != int(g.NumGraphs) {
		t.Fatalf("ReadMotifs: %d atom motifs for %d atoms, %d subgraph motifs for %d molecules",
			len(read.AtomMotif), g.NumNodes, len(read.SubgraphMotif), g.NumGraphs)
	}
	motifs := matrix(m.Motifs)
	for j, row := range matrix(read.E) {
		z := make([]float64, len(w))
		for i := range w {
			for k, v := range row {
				z[i] += w[i][k] * v
			}
		}
		closest, best := 0, math.Inf(-1)
		for k, motif := range motifs {
			if c := cosine(z, motif); c > best {
				closest, best = k, c
			}
		}
		if read.SubgraphMotif[j] != closest {
			t.Errorf("molecule %d: motif %d, want the closest to W_c e, %d", j, read.SubgraphMotif[j], closest)
		}
	}
	if _, err := model.AsMotifReader(motiflessObjective{o}); err == nil {
		t.Error("an objective without ReadMotifs passed as a MotifReader")
	}
}

// motiflessObjective is centreObjective without its motif reading.
type motiflessObjective struct{ model.Objective }

// assertClose compares two float slices entry by entry, relative to
// max(1, |want|).
func assertClose(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %.15g, want %.15g", name, i, got[i], want[i])
		}
	}
}
