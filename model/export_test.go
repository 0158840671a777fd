package model

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// SetStopGradient replaces how m cuts gradients, for gradient checks that
// must hold the cut values fixed.
func SetStopGradient(m *MicroGraph, f func(name string, x *torch.Tensor) *torch.Tensor) {
	m.Encoder.cut = f
}

// SetUnfused makes every layer compose its aggregation from tensor ops, as on
// devices without a fused kernel.
func SetUnfused(m *DeeperGCN, unfused bool) {
	for _, c := range m.Convs {
		c.unfused = unfused
	}
}

// ConvForward is layer l's GENConv alone on h (GENConv.Forward, in
// evaluation mode: no residual added), with m's bond table for g.
func ConvForward(m *DeeperGCN, l int, h *torch.Tensor, g *graph.Graph) *torch.Tensor {
	bonds := bondLookup{combos: m.bondCombos.All, index: m.bondCombos.Index(g.Bonds)}
	if m.Bond != nil {
		bonds.shared = m.Bond.Forward(bonds.combos)
	}
	return m.Convs[l].Forward(h, bonds, g, false, m.cut)
}
