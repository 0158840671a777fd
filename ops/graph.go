// Package ops holds the graph operations of MICRO-Graph as libtorch tensor
// graphs: segment reductions over destination-sorted edges, pooling, cosine
// similarities, Sinkhorn assignment, motif-like subgraphs and the losses of
// ../shared/docs/method.md §3–§6. Nothing here reads values back to the host,
// so a training step never waits for the device.
package ops

import "github.com/micrograph/micrograph/torch"

// Graph is a batch of B molecules as one disjoint graph, on the device.
// Directed edges are sorted by destination, so the incoming edges of node i
// are [RowPtr[i], RowPtr[i+1]); nodes of a molecule are contiguous, so its
// nodes are [GraphPtr[g], GraphPtr[g+1]) and, edges being grouped by
// destination, its edges are [RowPtr[GraphPtr[g]], RowPtr[GraphPtr[g+1]]).
// The sizes are known on the host without reading the device.
type Graph struct {
	NumGraphs, NumNodes, NumEdges int64

	Atoms     *torch.Tensor // N×9 int64 atom features
	Bonds     *torch.Tensor // E×3 int64 bond features of each directed edge
	Src, Dst  *torch.Tensor // E int64 endpoints, sorted by Dst
	RowPtr    *torch.Tensor // N+1 int64 CSR offsets of incoming edges
	NodeGraph *torch.Tensor // N int64 molecule of each node
	GraphPtr  *torch.Tensor // B+1 int64 node offsets of each molecule
}

// EdgePtr is the edge offsets of each molecule (B+1).
func (g *Graph) EdgePtr() *torch.Tensor { return g.RowPtr.IndexSelect(0, g.GraphPtr) }

// InDegree is the number of incoming edges of each node, as dtype dt (N).
func (g *Graph) InDegree(dt torch.DType) *torch.Tensor {
	return g.RowPtr.Narrow(0, 1, g.NumNodes).Sub(g.RowPtr.Narrow(0, 0, g.NumNodes)).ToDType(dt)
}
