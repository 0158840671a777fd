package model

import "github.com/micrograph/micrograph/torch"

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
