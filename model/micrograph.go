package model

import (
	"strings"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// MicroGraph is the pre-training model of §3: a DeeperGCN encoder ("encoder.*"),
// the motif embedding table M ("motif_embeddings", K×d) and the projections
// W_h, W_s, W_e ("W_h.weight", … d×d, no bias). Under the released objective
// (§12) the projections are replaced by one projection head
// ("projection_head.*").
type MicroGraph struct {
	Config  Config
	Store   *nn.Store
	Encoder *DeeperGCN
	Motifs  *torch.Tensor
	Wh      *nn.Linear      // paper objective only
	Ws      *nn.Linear      // paper objective only
	We      *nn.Linear      // paper objective only
	Head    *ProjectionHead // released objective only

	// Across, when the batch is split across the processes of a
	// data-parallel job, completes sums over this process's nodes into sums
	// over the global batch, so that Sinkhorn balances the global batch
	// (docs/method.md §3); nil for one process.
	Across ops.SumReducer
	// Gather, when the batch is split across processes and the run
	// contrasts against the global batch (docs/method.md §3.3), stacks every
	// process's subgraph embeddings so that L_contra's negatives are the
	// whole batch's; nil for one process, or for negatives from this
	// process's part only.
	Gather ops.RowGatherer
}

// New builds a model with fresh parameters on dev, of floating dtype dt
// (Float32 to train; Float64 for reference checks). M starts from N(0, 1).
func New(cfg Config, dev torch.Device, dt torch.DType) (*MicroGraph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := nn.NewStore(dev, dt)
	root := s.Root()
	d := int64(cfg.Encoder.Hidden)
	m := &MicroGraph{Config: cfg, Store: s}
	m.Encoder = NewDeeperGCN(root.Sub("encoder"), cfg.Encoder)
	m.Motifs = root.Param("motif_embeddings", torch.Empty([]int64{int64(cfg.Motifs), d}, root.Options()))
	nn.Normal(m.Motifs, 0, 1)
	if cfg.Released != nil {
		m.Head = NewProjectionHead(root.Sub("projection_head"), d)
		return m, nil
	}
	m.Wh = nn.NewLinear(root.Sub("W_h"), d, d, false)
	m.Ws = nn.NewLinear(root.Sub("W_s"), d, d, false)
	m.We = nn.NewLinear(root.Sub("W_e"), d, d, false)
	return m, nil
}

// Free releases every tensor of the model.
func (m *MicroGraph) Free() {
	m.Encoder.Free()
	m.Store.Free()
}

// Losses are the loss of one step and its unweighted parts, as 0-d tensors
// on the device (reading them waits for it). The parts are named as the log
// names them, in the objective's order: node_mot, mot_sub, reg, contra for
// the paper's (§3), motif, contra, sampler for the released one (§12).
type Losses struct {
	Total     *torch.Tensor // the objective
	Parts     []torch.Named // its unweighted parts
	Subgraphs *torch.Tensor // number of subgraphs (int64)
}

// Part is the part named name; it panics on a name the objective lacks.
func (l Losses) Part(name string) *torch.Tensor {
	for _, p := range l.Parts {
		if p.Name == name {
			return p.Tensor
		}
	}
	panic("model: the objective has no loss part " + name)
}

// Named lists the losses under their log names: "loss", the parts,
// "subgraphs".
func (l Losses) Named() []torch.Named {
	out := append([]torch.Named{{Name: "loss", Tensor: l.Total}}, l.Parts...)
	return append(out, torch.Named{Name: "subgraphs", Tensor: l.Subgraphs})
}

// PartNames are the names of the parts of the objective c trains, in order.
func PartNames(c Config) []string {
	if c.Released != nil {
		return []string{"motif", "contra", "sampler"}
	}
	return []string{"node_mot", "mot_sub", "reg", "contra"}
}

// Assignment is what the model makes of a batch's nodes.
type Assignment struct {
	H        *torch.Tensor // node embeddings, N×d
	LogQ     *torch.Tensor // log node-to-motif probabilities, N×K
	Q        *torch.Tensor // exp(LogQ)
	Motif    *torch.Tensor // Sinkhorn-balanced motif of each node, N int64
	Balanced *torch.Tensor // Sinkhorn's A, K×N float32
}

// Assign encodes a batch and assigns its nodes to motifs (§3):
//
//	Q = softmax_k(cos(W_h h, M̄)/τ),  M̄ = M cut from the gradient
//	motif = argmax of Sinkhorn(Q)
func (m *MicroGraph) Assign(g *graph.Graph, train bool) Assignment {
	c := m.Config
	h := m.Encoder.Forward(g, train)
	logQ := ops.Cosine(m.Wh.Forward(h), m.Encoder.cut("motif_embeddings@Q", m.Motifs)).DivScalar(c.Tau).LogSoftmax(1)
	q := logQ.Exp()
	motif, balanced := ops.SinkhornAssign(q, c.SinkhornLambda, c.SinkhornIters, m.Across)
	return Assignment{H: h, LogQ: logQ, Q: q, Motif: motif, Balanced: balanced}
}

// Subgraphs samples subgraphs with the configured sampler (§4); perturb
// applies the motif sampler's random drops and additions.
func (m *MicroGraph) Subgraphs(g *graph.Graph, a Assignment, perturb bool) *ops.Subgraphs {
	c := m.Config
	dt := m.Store.DType()
	switch c.Sampler {
	case SamplerRandomWalk:
		return ops.RandomWalkSubgraphs(g, int64(c.SubgraphsPerGraph), 10, 40, c.Eta, dt)
	case SamplerKHop:
		return ops.KHopSubgraphs(g, int64(c.SubgraphsPerGraph), c.Eta, dt)
	}
	pDrop, pAdd := c.PDrop, c.PAdd
	if !perturb {
		pDrop, pAdd = 0, 0
	}
	return ops.MotifSubgraphs(g, a.Motif, int64(c.Motifs), c.Eta, pDrop, pAdd, dt)
}

// Output is everything a forward pass computes: the losses and the
// intermediate tensors, for analysis (motif reports, reference checks).
type Output struct {
	Losses
	Assignment
	E         *torch.Tensor  // graph embeddings, B×d
	Subgraphs *ops.Subgraphs // the sampled subgraphs
	S         *torch.Tensor  // subgraph embeddings, J×d, rows in Subgraphs.LiveSlots order
	LogP      *torch.Tensor  // log subgraph-to-motif probabilities, J×K, rows in Subgraphs.LiveSlots order
}

// Forward computes the objective of §3 on a batch. train selects batch
// statistics, dropout and the subgraph perturbation; call Backward on
// Total. It reads one value back to the host: the number of subgraphs
// (ops.Subgraphs.LiveSlots).
func (m *MicroGraph) Forward(g *graph.Graph, train bool) Output {
	if m.Config.Released != nil {
		return m.forwardReleased(g, train)
	}
	c := m.Config
	dt := m.Store.DType()
	a := m.Assign(g, train)
	e := ops.GraphPool(a.H, g, ops.MeanPool)
	sub := m.Subgraphs(g, a, train)
	s := sub.Pool(a.H)
	// P sees the subgraphs' embeddings cut from the gradient: only M and W_s
	// learn from L_mot-sub.
	sLive := sub.LiveRows(s)
	logP := ops.Cosine(m.Ws.Forward(m.Encoder.cut("subgraph_embeddings@P", sLive)), m.Motifs).DivScalar(c.Tau).LogSoftmax(1)
	var target *torch.Tensor
	if c.Sampler == SamplerMotif {
		// Slot graph·K + k holds motif k.
		target = sub.LiveSlots.RemainderScalar(float64(c.Motifs))
	} else {
		torch.NoGrad(func() { target = logP.Argmax(1, false) })
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
		reg = torch.Zeros(nil, torch.Options{DType: dt, Device: s.Device()})
	}
	l := Losses{
		Parts: []torch.Named{
			{Name: "node_mot", Tensor: ops.NLL(a.LogQ, a.Motif)},
			{Name: "mot_sub", Tensor: ops.NLL(logP, target)},
			{Name: "reg", Tensor: reg},
			{Name: "contra", Tensor: ops.GraphSubgraphContrast(m.We.Forward(e), sContra, sub, c.Tau, m.Gather)},
		},
		Subgraphs: sub.Count(),
	}
	l.Total = m.Objective(l)
	return Output{Losses: l, Assignment: a, E: e, Subgraphs: sub, S: sLive, LogP: logP}
}

// Objective is the loss from its parts (l.Total is ignored): §3's
// α·(λ_n·L_node-mot + λ_s·L_mot-sub + λ_r·L_reg) + (1−α)·L_contra, or §12's
// w_m·L_motif + w_c·L_contra + w_s·L_sampler.
func (m *MicroGraph) Objective(l Losses) *torch.Tensor {
	c := m.Config
	if r := c.Released; r != nil {
		return scaled(l.Part("motif"), r.MotifWeight).Add(scaled(l.Part("contra"), r.ContraWeight)).Add(scaled(l.Part("sampler"), r.SamplerWeight))
	}
	motif := scaled(l.Part("node_mot"), c.LambdaNode).Add(scaled(l.Part("mot_sub"), c.LambdaSub)).Add(scaled(l.Part("reg"), c.LambdaReg))
	return scaled(motif, c.Alpha).Add(scaled(l.Part("contra"), 1-c.Alpha))
}

// scaled is x·w; a weight of 1 costs no operation, forward or backward
// (x·1 is x exactly).
func scaled(x *torch.Tensor, w float64) *torch.Tensor {
	if w == 1 {
		return x
	}
	return x.MulScalar(w)
}

// ClipGroups are the groups of trainable parameters whose gradients are
// clipped each to the norm bound: all of them together under the paper
// objective, the motif table apart from the rest under the released one
// (§12.5).
func (m *MicroGraph) ClipGroups() [][]*torch.Tensor {
	var rest []*torch.Tensor
	for _, v := range m.Store.Trainable() {
		if m.Config.Released == nil || v.Tensor != m.Motifs {
			rest = append(rest, v.Tensor)
		}
	}
	if m.Config.Released == nil {
		return [][]*torch.Tensor{rest}
	}
	return [][]*torch.Tensor{rest, {m.Motifs}}
}

// EncoderState is the encoder's tensors named without the "encoder." prefix,
// as an exported encoder file holds them.
func (m *MicroGraph) EncoderState() []torch.Named { return encoderState(m.Store) }

func encoderState(s *nn.Store) []torch.Named { return EncoderTensors(s.State()) }

// EncoderTensors picks the encoder's tensors ("encoder.*") out of a model's
// state, a store's or a checkpoint's, named without the prefix as an
// exported encoder file holds them.
func EncoderTensors(state []torch.Named) []torch.Named {
	var out []torch.Named
	for _, n := range state {
		if name, ok := strings.CutPrefix(n.Name, "encoder."); ok {
			out = append(out, torch.Named{Name: name, Tensor: n.Tensor})
		}
	}
	return out
}
