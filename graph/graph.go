// Package graph is the device batch: a batch of molecules as one disjoint
// graph in libtorch tensors (Graph), with its structure also on the host
// (HostGraph). data produces it (feed.Batch.Graph); ops, model and the
// trainers consume it.
package graph

import "github.com/micrograph/micrograph/torch"

// Graph is a batch of B molecules as one disjoint graph, on the device.
// Directed edges are sorted by destination, so the incoming edges of node i
// are [RowPtr[i], RowPtr[i+1]); nodes of a molecule are contiguous, so its
// nodes are [GraphPtr[g], GraphPtr[g+1]) and, edges being grouped by
// destination, its edges are [RowPtr[GraphPtr[g]], RowPtr[GraphPtr[g+1]]).
// The sizes are known on the host without reading the device, and so is
// what follows from the structure alone (Nodes, Degree, PadIndex, the edge
// pairs): the collator computes it once per batch, not the step.
type Graph struct {
	NumGraphs, NumNodes, NumEdges int64
	MaxNodes                      int64 // atoms of the largest molecule

	Atoms     *torch.Tensor // N×9 int64 atom features
	Bonds     *torch.Tensor // E×3 int64 bond features of each directed edge
	Src, Dst  *torch.Tensor // E int64 endpoints, sorted by Dst
	RowPtr    *torch.Tensor // N+1 int64 CSR offsets of incoming edges
	NodeGraph *torch.Tensor // N int64 molecule of each node
	GraphPtr  *torch.Tensor // B+1 int64 node offsets of each molecule

	Nodes    *torch.Tensor // N int64: 0 … N−1
	Degree   *torch.Tensor // N int64 incoming edges of each node (RowPtr differences)
	PadIndex *torch.Tensor // N int64 row of each node in the B×MaxNodes layout of Padded
	// Every pair of edges e' < e with the same destination, e in PairLater and
	// e' in PairEarlier (P int64 each).
	PairLater, PairEarlier *torch.Tensor

	// Host is the same structure in host memory, for the samplers that run
	// there (package ops/sample); nil when the graph was made without it.
	Host *HostGraph
}

// HostGraph is a batch's structure on the host, laid out as Graph's tensors
// of the same names. Its slices belong to the batch, whose loader reuses them
// once the step is done: a step reads them and keeps none.
type HostGraph struct {
	Src, RowPtr, GraphPtr []int64
}

// EdgePtr is the edge offsets of each molecule (B+1).
func (g *Graph) EdgePtr() *torch.Tensor { return g.RowPtr.IndexSelect(0, g.GraphPtr) }

// Padded lays out node rows x (N×c) as B×MaxNodes×c, molecule by molecule,
// zero-filled after each molecule's last node, for batched matrix products
// over molecules.
func (g *Graph) Padded(x *torch.Tensor) *torch.Tensor {
	c := x.Size(1)
	zeros := torch.Zeros([]int64{g.NumGraphs * g.MaxNodes, c}, x.Options())
	return zeros.IndexAdd(0, g.PadIndex, x).Reshape(g.NumGraphs, g.MaxNodes, c)
}
