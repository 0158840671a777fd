package ops

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// Pooling is how GraphPool reduces a molecule's node embeddings.
type Pooling int

// Graph readouts.
const (
	MeanPool Pooling = iota
	SumPool
	MaxPool
)

// GraphPool reads out one embedding per molecule from node embeddings h (N×d):
//
//	e_g = mean / sum / max of h_l over the nodes l of molecule g   (B×d)
func GraphPool(h *torch.Tensor, g *graph.Graph, p Pooling) *torch.Tensor {
	switch p {
	case SumPool:
		return h.SegmentReduce(g.GraphPtr, torch.ReduceSum)
	case MaxPool:
		return SegmentMax(h, g.GraphPtr)
	default:
		if torch.FusedKernelsFor(h) {
			return torch.FusedGroupMean(h, g.Nodes, g.NodeGraph, ones(g, h.DType()), g.NumGraphs)
		}
		return SegmentMean(h, g.GraphPtr)
	}
}

// ones is N ones of dtype dt, on g's device.
func ones(g *graph.Graph, dt torch.DType) *torch.Tensor {
	return torch.Ones([]int64{g.NumNodes}, torch.Options{DType: dt, Device: g.NodeGraph.Device()})
}
