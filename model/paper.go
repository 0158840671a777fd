package model

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// PaperObjective is MICRO-Graph as the paper defines it (§3): the
// projections W_h, W_s, W_e ("W_h.weight", … d×d, no bias) beside the
// encoder and the motif table, and the loss
//
//	L = α·(λ_n·L_node-mot + λ_s·L_mot-sub + λ_r·L_reg) + (1−α)·L_contra
//
// Diagnoses read its projections and its assignment (Assign).
type PaperObjective struct {
	Wh, Ws, We *nn.Linear

	c Config
	m *MicroGraph
}

// paperKind is the paper objective's entry in Objectives: the default.
var paperKind = ObjectiveKind{
	Name:     ObjectivePaper,
	About:    "the paper's (docs/method.md §3)",
	Model:    DefaultConfig,
	Training: Training{BatchSize: 512},
	Samplers: []SamplerKind{
		{Name: SamplerMotif, new: func(c Config) Sampler {
			return motifSampler{motifs: c.Motifs, eta: c.Eta, pDrop: c.PDrop, pAdd: c.PAdd}
		}},
		{Name: SamplerRandomWalk, new: func(c Config) Sampler { return randomWalkSampler{perGraph: c.SubgraphsPerGraph, eta: c.Eta} }},
		{Name: SamplerKHop, new: func(c Config) Sampler { return kHopSampler{perGraph: c.SubgraphsPerGraph, eta: c.Eta} }},
	},
	new: func(c Config) Objective { return &PaperObjective{c: c} },
}

// Name is ObjectivePaper.
func (o *PaperObjective) Name() string { return ObjectivePaper }

// Check judges the paper's own settings: the sampler, the ablation
// samplers' subgraph count, the orthogonality over selected motifs, and
// the probabilities α, p_drop and p_add.
func (o *PaperObjective) Check() error {
	c := o.c
	s, err := o.Sampler(c.Sampler)
	switch {
	case err != nil:
		return err
	case !s.Needs().Motifs && c.SubgraphsPerGraph < 1:
		return field.Errorf("subgraphs_per_graph", c.SubgraphsPerGraph, "must be positive")
	case c.OrthoSelected && !s.Needs().Motifs:
		return field.Errorf("ortho_selected", c.OrthoSelected, "needs the motif sampler")
	}
	return field.First(probability("alpha", c.Alpha), probability("p_drop", c.PDrop), probability("p_add", c.PAdd))
}

// Sampler is the motif-guided sampler (§4) or one of its ablations, drawn
// on the device (paperKind.Samplers).
func (o *PaperObjective) Sampler(name string) (Sampler, error) { return paperKind.sampler(o.c, name) }

// Register adds W_h, W_s and W_e.
func (o *PaperObjective) Register(m *MicroGraph, p nn.Path) {
	d := int64(o.c.Encoder.Hidden)
	o.m = m
	o.Wh = o.AssignmentHead(p).(*nn.Linear)
	o.Ws = nn.NewLinear(p.Sub("W_s"), d, d, false)
	o.We = nn.NewLinear(p.Sub("W_e"), d, d, false)
}

// Initialise does nothing: the paper's parameters start from their
// initialisation.
func (o *PaperObjective) Initialise(func(n int) ([]*graph.Graph, error)) (string, error) {
	return "", nil
}

// Describe is "": the paper's objective is the default.
func (o *PaperObjective) Describe() string { return "" }

// Assign encodes a batch and assigns its nodes to motifs (§3):
//
//	Q = softmax_k(cos(W_h h, M̄)/τ),  M̄ = M cut from the gradient
//	motif = argmax of Sinkhorn(Q)
func (o *PaperObjective) Assign(g *graph.Graph, train bool) Assignment {
	m, c := o.m, o.c
	h := m.Encoder.Forward(g, train)
	logQ := ops.Cosine(o.Wh.Forward(h), m.Encoder.cut("motif_embeddings@Q", m.Motifs)).DivScalar(c.Tau).LogSoftmax(1)
	q := logQ.Exp()
	motif, balanced := ops.SinkhornAssign(q, c.SinkhornLambda, c.SinkhornIters, m.Across)
	return Assignment{H: h, LogQ: logQ, Q: q, Motif: motif, Balanced: balanced}
}

// Forward computes §3's losses on a batch. It reads one value back to the
// host: the number of subgraphs (ops.Subgraphs.LiveSlots).
func (o *PaperObjective) Forward(g *graph.Graph, s Sampler, train bool) Output {
	m, c := o.m, o.c
	a := o.Assign(g, train)
	e := ops.GraphPool(a.H, g, ops.MeanPool)
	sub := s.Sample(SampleInput{Graph: g, Motif: a.Motif, Embeddings: a.H, Perturb: train, DType: m.Store.DType()})
	pooled := sub.Pool(a.H)
	// P sees the subgraphs' embeddings cut from the gradient: only M and W_s
	// learn from L_mot-sub.
	sLive := sub.LiveRows(pooled)
	logP := ops.Cosine(o.Ws.Forward(m.Encoder.cut("subgraph_embeddings@P", sLive)), m.Motifs).DivScalar(c.Tau).LogSoftmax(1)
	var target *torch.Tensor
	if s.Needs().Motifs {
		target = subgraphMotifSlots(sub, c.Motifs)
	} else {
		target = torch.NoGradValue(func() *torch.Tensor { return logP.Argmax(1, false) })
	}
	sContra := sLive
	if c.ContrastDetached {
		sContra = m.Encoder.cut("subgraph_embeddings@contra", sLive)
	}

	var reg *torch.Tensor
	if c.LambdaReg > 0 {
		var selected *torch.Tensor
		if c.OrthoSelected {
			selected = sub.Live.Reshape(g.NumGraphs, int64(c.Motifs))
		}
		cut, ortho := ops.MinCut(a.Q, g, selected)
		reg = cut.Add(ortho)
	} else {
		reg = torch.Zeros(nil, pooled.Options())
	}
	l := Losses{
		Parts: []torch.Named{
			{Name: "node_mot", Tensor: ops.NLL(a.LogQ, a.Motif)},
			{Name: "mot_sub", Tensor: ops.NLL(logP, target)},
			{Name: "reg", Tensor: reg},
			{Name: "contra", Tensor: ops.GraphSubgraphContrast(o.We.Forward(e), sContra, sub, c.Tau, m.Gather)},
		},
		Subgraphs: sub.Count(),
	}
	l.Total = o.Total(l.Parts)
	return Output{Losses: l, Assignment: a, E: e, Subgraphs: sub, S: sLive, LogP: logP}
}

// PartNames are node_mot, mot_sub, reg and contra.
func (o *PaperObjective) PartNames() []string {
	return []string{"node_mot", "mot_sub", "reg", "contra"}
}

// Total is §3's α·(λ_n·L_node-mot + λ_s·L_mot-sub + λ_r·L_reg) +
// (1−α)·L_contra.
func (o *PaperObjective) Total(parts []torch.Named) *torch.Tensor {
	c := o.c
	motif := scaled(part(parts, "node_mot"), c.LambdaNode).Add(scaled(part(parts, "mot_sub"), c.LambdaSub)).Add(scaled(part(parts, "reg"), c.LambdaReg))
	return scaled(motif, c.Alpha).Add(scaled(part(parts, "contra"), 1-c.Alpha))
}

// MeansOver: L_node-mot is a mean over nodes, L_mot-sub over subgraphs,
// L_reg over molecules, L_contra over the molecules with a subgraph.
func (o *PaperObjective) MeansOver() []MeanOver {
	return []MeanOver{OverNodes, OverSubgraphs, OverMolecules, OverMoleculesWithSubgraphs}
}

// ClipGroups is every trainable parameter, in one group.
func (o *PaperObjective) ClipGroups() [][]*torch.Tensor {
	var all []*torch.Tensor
	for _, v := range o.m.Store.Trainable() {
		all = append(all, v.Tensor)
	}
	return [][]*torch.Tensor{all}
}

// AssignmentHead registers W_h.
func (o *PaperObjective) AssignmentHead(p nn.Path) Projection {
	d := int64(o.c.Encoder.Hidden)
	return nn.NewLinear(p.Sub("W_h"), d, d, false)
}

// ReadMotifs reads the motif-guided sampler's subgraphs without
// perturbation: exactly the (molecule, motif) groups of at least η atoms.
func (o *PaperObjective) ReadMotifs(g *graph.Graph) MotifReading {
	return torch.NoGradValue(func() MotifReading {
		out := o.Forward(g, motifSampler{motifs: o.c.Motifs, eta: o.c.Eta}, false)
		r := MotifReading{Output: out, Cosine: ops.Cosine(o.Ws.Forward(out.S), o.m.Motifs)}
		for _, k := range torch.ToSlice[int64](subgraphMotifSlots(out.Subgraphs, o.c.Motifs)) {
			r.SubgraphMotif = append(r.SubgraphMotif, int(k))
		}
		for _, k := range torch.ToSlice[int64](out.Motif) {
			r.AtomMotif = append(r.AtomMotif, int(k))
		}
		return r
	})
}
