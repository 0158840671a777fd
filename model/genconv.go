package model

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// GENConv is DeeperGCN's generalised graph convolution with softmax
// aggregation (§2). For an edge j→i with bond embedding e_ji:
//
//	m_ji  = ReLU(h_j + e_ji) + ε               (ε = torch.GENMessageEpsilon)
//	a_ji  = softmax over the edges k→i of t·m_ki, per channel
//	agg_i = Σ_{j→i} a_ji ⊙ m_ji            (0 without incoming edges)
//	h'_i  = MLP(h_i + agg_i)
//
// With t fixed the weights a are constants in backpropagation, as in
// DeeperGCN; with a learned t they are differentiable. Where the shim has a
// fused kernel for the device (torch.FusedGENAggregate) the whole aggregation is
// one pass per node; elsewhere it is composed from tensor ops. The MLP is one
// Linear(d, d) ("lin"), or for n > 1 layers PyTorch's Sequential of
// Linear(d, 2d), BatchNorm1d, ReLU, …, Linear(2d, d) ("mlp.<index>").
type GENConv struct {
	Lin  *nn.Linear        // the one-layer MLP, or nil
	MLP  []*nn.Linear      // the layers of a deeper MLP
	Norm []*nn.BatchNorm1d // between MLP layers
	T    *torch.Tensor     // learned temperature (0-d), or nil
	Bond *FeatureEncoder   // this layer's BondEncoder, or nil when shared

	t       float64       // fixed temperature
	fixedT  *torch.Tensor // t as a 0-d tensor, for the fused kernel
	unfused bool          // compose the aggregation from tensor ops even where a fused kernel exists
	name    string        // path, naming the cut softmax weights
}

// NewGENConv registers a layer of width d at p.
func NewGENConv(p nn.Path, c EncoderConfig) *GENConv {
	d := int64(c.Hidden)
	conv := &GENConv{t: c.T, name: p.Name("softmax")}
	if c.MLPLayers == 1 {
		conv.Lin = nn.NewLinear(p.Sub("lin"), d, d, true)
	} else {
		mlp := p.Sub("mlp")
		index := 0
		for i := range c.MLPLayers {
			in, out := 2*d, 2*d
			if i == 0 {
				in = d
			}
			if i == c.MLPLayers-1 {
				out = d
			}
			conv.MLP = append(conv.MLP, nn.NewLinear(mlp.Index(index), in, out, true))
			if i < c.MLPLayers-1 {
				conv.Norm = append(conv.Norm, nn.NewBatchNorm1d(mlp.Index(index+1), out))
			}
			index += 3 // Linear, BatchNorm1d, ReLU
		}
	}
	if c.LearnT {
		conv.T = p.Param("t", torch.Full(nil, c.T, p.Options()))
	} else {
		conv.fixedT = torch.Full(nil, c.T, p.Options()).Unscope()
	}
	if c.BondPerLayer {
		conv.Bond = NewFeatureEncoder(p.Sub("bond_encoder"), BondFeatureDims, d)
	}
	return conv
}

// bondLookup is where the layers find a batch's bond embeddings: a table
// with a row per combination of bond features, and each edge's row in it.
type bondLookup struct {
	combos *torch.Tensor // C×3 int64: every combination of bond features
	index  *torch.Tensor // E int64: each edge's row of combos
	shared *torch.Tensor // C×d: the shared BondEncoder applied to combos, or nil
}

// Forward maps node embeddings h (N×d) to the next layer's, given the
// batch's bonds (the shared table is ignored when the layer has its own
// encoder).
func (c *GENConv) Forward(h *torch.Tensor, bonds bondLookup, g *graph.Graph, train bool, cut stopGradient) *torch.Tensor {
	return c.update(c.aggregate(h, bonds, g, cut), train, (*nn.Linear).Forward)
}

// ForwardAdd is Forward(h, …).Add(residual), the res+ block's sum, made by
// the MLP's last layer (nn.Linear.ForwardAdd).
func (c *GENConv) ForwardAdd(h, residual *torch.Tensor, bonds bondLookup, g *graph.Graph, train bool, cut stopGradient) *torch.Tensor {
	last := func(l *nn.Linear, x *torch.Tensor) *torch.Tensor { return l.ForwardAdd(x, residual) }
	return c.update(c.aggregate(h, bonds, g, cut), train, last)
}

// aggregate is h + agg, the MLP's input.
func (c *GENConv) aggregate(h *torch.Tensor, bonds bondLookup, g *graph.Graph, cut stopGradient) *torch.Tensor {
	table := bonds.shared
	if c.Bond != nil {
		table = c.Bond.Forward(bonds.combos)
	}
	if !c.unfused && torch.FusedAggregation(h.Device()) {
		t := c.T
		if t == nil {
			t = c.fixedT
		}
		return torch.FusedGENAggregate(h, table, bonds.index, t, g.Src, g.RowPtr, c.T != nil)
	}
	e := table.IndexSelect(0, bonds.index)
	m := h.IndexSelect(0, g.Src).Add(e).Relu().AddScalar(torch.GENMessageEpsilon)
	var a *torch.Tensor
	if c.T != nil {
		a = ops.SegmentSoftmax(m.Mul(c.T), g.RowPtr, g.Dst)
	} else {
		a = cut(c.name, torch.NoGradValue(func() *torch.Tensor { return ops.SegmentSoftmax(m.MulScalar(c.t), g.RowPtr, g.Dst) }))
	}
	return h.Add(m.Mul(a).SegmentReduce(g.RowPtr, torch.ReduceSum))
}

// update is the MLP on x, its last Linear applied by last.
func (c *GENConv) update(x *torch.Tensor, train bool, last func(*nn.Linear, *torch.Tensor) *torch.Tensor) *torch.Tensor {
	if c.Lin != nil {
		return last(c.Lin, x)
	}
	n := len(c.MLP) - 1
	for i, l := range c.MLP[:n] {
		x = c.Norm[i].Forward(l.Forward(x), train).Relu()
	}
	return last(c.MLP[n], x)
}

// Free releases the layer's constants.
func (c *GENConv) Free() {
	if c.Bond != nil {
		c.Bond.Free()
	}
	c.fixedT.Free()
}
