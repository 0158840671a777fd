package model

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// stopGradient cuts gradients where the method does (§2–§3): normally
// x.Detach(). A gradient check replaces it to hold the cut values fixed while
// it perturbs parameters; name says which cut it is.
type stopGradient func(name string, x *torch.Tensor) *torch.Tensor

func detach(_ string, x *torch.Tensor) *torch.Tensor { return x.Detach() }

// DeeperGCN is the res+ encoder of §2:
//
//	h = conv_0(AtomEncoder(x))
//	h = conv_l(dropout(ReLU(BN_{l−1}(h)))) + h        l = 1 … L−1
//	h = dropout(BN_{L−1}(h))
//
// Its tensors are named atom_encoder.*, bond_encoder.*, convs.<l>.*, norms.<l>.*.
type DeeperGCN struct {
	Config EncoderConfig
	Atom   *FeatureEncoder
	Bond   *FeatureEncoder // shared by every layer, or nil
	Convs  []*GENConv
	Norms  []*nn.BatchNorm1d

	bondCombos Combinations // every combination of bond features: the rows of a bond table

	cut stopGradient // also MicroGraph's cuts of M and the slot embeddings

	// NormAcross, when the batch is split across the processes of a
	// data-parallel job, is the job's group: training-mode batch norm then
	// uses the global batch's statistics (synchronised batch norm,
	// nn.BatchNorm1d.ForwardAcross). nil: each process's own.
	NormAcross *torch.ProcessGroup
}

// NewDeeperGCN registers an encoder at p.
func NewDeeperGCN(p nn.Path, c EncoderConfig) *DeeperGCN {
	d := int64(c.Hidden)
	m := &DeeperGCN{Config: c, cut: detach}
	m.Atom = NewFeatureEncoder(p.Sub("atom_encoder"), AtomFeatureDims, d)
	m.bondCombos = NewCombinations(BondFeatureDims, p.Options().Device)
	if !c.BondPerLayer {
		m.Bond = NewFeatureEncoder(p.Sub("bond_encoder"), BondFeatureDims, d)
	}
	for l := range c.Layers {
		m.Convs = append(m.Convs, NewGENConv(p.Sub("convs").Index(l), c))
	}
	for l := range c.Layers {
		m.Norms = append(m.Norms, nn.NewBatchNorm1d(p.Sub("norms").Index(l), d))
	}
	return m
}

// Forward computes node embeddings (N×d); train selects batch statistics and
// dropout.
func (m *DeeperGCN) Forward(g *graph.Graph, train bool) *torch.Tensor {
	return m.forward(g, ForwardProbe{BatchStats: train, Dropout: train}, train)
}

// ForwardProbe runs the encoder in a mixed mode for analysis: batch norm and
// dropout each on or off, and a look at every norm's input. Batch statistics
// here never update the running ones.
type ForwardProbe struct {
	BatchStats bool // normalise by the batch's mean and variance instead of the running ones
	Dropout    bool // apply dropout
	// NormInput, when set, sees the input of norm l (N×d) before it is
	// normalised; it must not keep the tensor.
	NormInput func(l int, x *torch.Tensor)
}

// Probe computes node embeddings as p says, without touching the running
// statistics.
func (m *DeeperGCN) Probe(g *graph.Graph, p ForwardProbe) *torch.Tensor {
	return m.forward(g, p, false)
}

// forward is the res+ stack; update says whether training-mode norms move
// their running statistics.
func (m *DeeperGCN) forward(g *graph.Graph, p ForwardProbe, update bool) *torch.Tensor {
	bonds := bondLookup{combos: m.bondCombos.All, index: m.bondCombos.Index(g.Bonds)}
	if m.Bond != nil {
		bonds.shared = m.Bond.Forward(bonds.combos)
	}
	drop := nn.Dropout{P: m.Config.Dropout}
	// normDrop is dropout(ReLU(BN_l(h))), or dropout(BN_l(h)) without relu;
	// a training step on one process makes it one fused kernel.
	normDrop := func(l int, h *torch.Tensor, relu bool) *torch.Tensor {
		if p.NormInput != nil {
			p.NormInput(l, h)
		}
		n := m.Norms[l]
		var y *torch.Tensor
		switch {
		case p.BatchStats && update && m.NormAcross == nil && p.Dropout:
			return n.ForwardDropout(h, torch.NormDropout{P: drop.P, ReLU: relu})
		case p.BatchStats && update && m.NormAcross != nil:
			y = n.ForwardAcross(h, m.NormAcross)
		case p.BatchStats && !update:
			y = torch.BatchNorm(h, n.Weight, n.Bias, nil, nil, true, n.Momentum, n.Eps)
		default:
			y = n.Forward(h, p.BatchStats)
		}
		if relu {
			return drop.ForwardReLU(y, p.Dropout)
		}
		return drop.Forward(y, p.Dropout)
	}
	// Each layer's temporaries go as soon as it is done (autograd keeps
	// what backpropagation needs), so that later layers reuse warm memory.
	h := torch.Scoped(func() *torch.Tensor { return m.Convs[0].Forward(m.Atom.Forward(g.Atoms), bonds, g, update, m.cut) })
	for l := 1; l < len(m.Convs); l++ {
		h = torch.Scoped(func() *torch.Tensor {
			return m.Convs[l].ForwardAdd(normDrop(l-1, h, true), h, bonds, g, update, m.cut)
		})
	}
	return normDrop(len(m.Norms)-1, h, false)
}

// Free releases the encoder's constants (its parameters belong to the store).
func (m *DeeperGCN) Free() {
	m.Atom.Free()
	m.bondCombos.Free()
	if m.Bond != nil {
		m.Bond.Free()
	}
	for _, c := range m.Convs {
		c.Free()
	}
}
