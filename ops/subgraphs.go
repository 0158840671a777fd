package ops

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// Subgraphs are node subsets of a batch, PerGraph "slots" for each molecule:
// slot s belongs to molecule s / PerGraph. Membership is a list of
// (node, slot, weight) triples whose length depends only on the batch's sizes;
// weight 0 marks a candidate that is not a member. So the step never asks the
// host how many members or subgraphs there are (docs/method.md §4).
type Subgraphs struct {
	PerGraph int64 // slots per molecule
	NumSlots int64 // B·PerGraph

	Node, Slot *torch.Tensor // P int64 candidate memberships
	Weight     *torch.Tensor // P, 1 for a member and 0 otherwise (float)
	Size       *torch.Tensor // NumSlots: members of each slot (float)
	Live       *torch.Tensor // NumSlots bool: slots with at least η members, the subgraphs
	LiveWeight *torch.Tensor // NumSlots, Live as 1/0 in Weight's dtype
	// LiveSlots lists the live slots, ascending (int64): the subgraphs.
	// The losses run over these rows only; most slots are empty (a molecule
	// has about 3 subgraphs in K = 20 slots).
	LiveSlots *torch.Tensor
}

// LiveRows is the rows of x (NumSlots×d) of the live slots, J×d in
// LiveSlots order.
func (s *Subgraphs) LiveRows(x *torch.Tensor) *torch.Tensor { return x.IndexSelect(0, s.LiveSlots) }

func newSubgraphs(node, slot, weight *torch.Tensor, perGraph, numSlots int64, eta int) *Subgraphs {
	size := torch.Zeros([]int64{numSlots}, weight.Options()).IndexAdd(0, slot, weight)
	live := size.GeScalar(float64(eta))
	return &Subgraphs{
		PerGraph: perGraph, NumSlots: numSlots,
		Node: node, Slot: slot, Weight: weight,
		Size: size, Live: live, LiveWeight: live.ToDType(weight.DType()), LiveSlots: live.Nonzero(),
	}
}

// MotifSubgraphs builds the motif-like subgraphs of §4 from each node's motif
// (N, int64). Node l goes to slot graph(l)·K + motif(l); then each member
// leaves with probability pDrop, and each node adjacent (one hop) to a slot it
// is not in joins that slot with probability pAdd, once per (node, slot) pair
// however many edges connect them. A node may so be in two slots. Slots with
// at least η members after this are the subgraphs. pDrop = pAdd = 0 gives the
// unperturbed partition. Weights have dtype dt.
func MotifSubgraphs(g *graph.Graph, motif *torch.Tensor, k int64, eta int, pDrop, pAdd float64, dt torch.DType) *Subgraphs {
	return torch.NoGradValue(func() *Subgraphs {
		opts := torch.Options{DType: dt, Device: motif.Device()}
		slot := g.NodeGraph.MulScalar(float64(k)).Add(motif)
		node := g.Nodes
		weight := keepWithProbability(g.NumNodes, 1-pDrop, opts)
		if pAdd > 0 && g.NumEdges > 0 {
			// Candidate: the destination of each edge joins its source's slot,
			// once per (destination, slot): not where an earlier edge into the
			// same destination brings the same slot (a repeat).
			cand := slot.IndexSelect(0, g.Src)
			ints := torch.Options{DType: torch.Int64, Device: motif.Device()}
			same := cand.IndexSelect(0, g.PairLater).Ne(cand.IndexSelect(0, g.PairEarlier)).LogicalNot().ToDType(torch.Int64)
			repeats := torch.Zeros([]int64{g.NumEdges}, ints).IndexAdd(0, g.PairLater, same)
			eligible := cand.Ne(slot.IndexSelect(0, g.Dst)).ToDType(dt).MaskedFill(repeats.GtScalar(0), 0)
			node = torch.Cat([]*torch.Tensor{node, g.Dst}, 0)
			slot = torch.Cat([]*torch.Tensor{slot, cand}, 0)
			weight = torch.Cat([]*torch.Tensor{weight, keepWithProbability(g.NumEdges, pAdd, opts).Mul(eligible)}, 0)
		}
		return newSubgraphs(node, slot, weight, k, g.NumGraphs*k, eta)
	})
}

// ListedSubgraphs makes Subgraphs of subgraphs drawn on the host:
// lists[g] holds molecule g's subgraphs, each a list of its atoms numbered
// from 0 within the molecule. Every molecule gets as many slots as the most
// any molecule has (at least one); the slots it does not fill stay empty,
// and every listed subgraph is live, whatever its size (the sampler has
// applied its own threshold). Weights have dtype dt.
func ListedSubgraphs(g *graph.Graph, lists [][][]int, dt torch.DType) *Subgraphs {
	perGraph := 1
	for _, l := range lists {
		perGraph = max(perGraph, len(l))
	}
	var node, slot []int64
	for gi, l := range lists {
		first := g.Host.GraphPtr[gi]
		for j, members := range l {
			for _, a := range members {
				node = append(node, first+int64(a))
				slot = append(slot, int64(gi*perGraph+j))
			}
		}
	}
	dev := g.NodeGraph.Device()
	return torch.NoGradValue(func() *Subgraphs {
		upload := func(x []int64) *torch.Tensor {
			t := torch.FromSlice(x, int64(len(x)))
			if dev.IsCUDA() {
				return t.To(dev, false)
			}
			return t
		}
		n := int64(len(node))
		weight := torch.Ones([]int64{n}, torch.Options{DType: dt, Device: dev})
		return newSubgraphs(upload(node), upload(slot), weight, int64(perGraph), g.NumGraphs*int64(perGraph), 1)
	})
}

// keepWithProbability is n independent draws of 1 with probability p, else 0.
func keepWithProbability(n int64, p float64, o torch.Options) *torch.Tensor {
	switch {
	case p >= 1:
		return torch.Ones([]int64{n}, o)
	case p <= 0:
		return torch.Zeros([]int64{n}, o)
	}
	return torch.Bernoulli(torch.Full([]int64{n}, p, o))
}

// firstOccurrence is 1 at the first position of each distinct key and 0 at
// its repeats (as dtype dt), found by a stable sort on the device.
func firstOccurrence(key *torch.Tensor, dt torch.DType) *torch.Tensor {
	n := key.Size(0)
	sorted, order := key.Sort(0, false)
	first := torch.Ones([]int64{n}, torch.Options{DType: dt, Device: key.Device()})
	if n > 1 {
		differs := sorted.Narrow(0, 1, n-1).Ne(sorted.Narrow(0, 0, n-1)).ToDType(dt)
		first = torch.Cat([]*torch.Tensor{first.Narrow(0, 0, 1), differs}, 0)
	}
	// Back from sorted order to the keys' order.
	return torch.Zeros([]int64{n}, torch.Options{DType: dt, Device: key.Device()}).Scatter(0, order, first)
}

// Pool is the mean of the member embeddings of each slot (NumSlots×d), 0 for
// an empty slot; gradients flow into h. It is deterministic on every device:
// the CPU kernel accumulates memberships in order; elsewhere they are sorted
// by slot and summed as segments.
func (s *Subgraphs) Pool(h *torch.Tensor) *torch.Tensor {
	if torch.FusedKernelsFor(h) {
		return torch.FusedGroupMean(h, s.Node, s.Slot, s.Weight, s.NumSlots)
	}
	return s.poolSorted(h)
}

// poolSorted is Pool for devices without the kernel.
func (s *Subgraphs) poolSorted(h *torch.Tensor) *torch.Tensor {
	// The memberships are constants (made without gradient): sorting them
	// records nothing.
	_, order := s.Slot.Sort(0, false)
	node, weight := s.Node.IndexSelect(0, order), s.Weight.IndexSelect(0, order)
	ints := s.Slot.Options()
	counts := torch.Zeros([]int64{s.NumSlots}, ints).IndexAdd(0, s.Slot, torch.Ones(s.Slot.Shape(), ints))
	offsets := torch.Cat([]*torch.Tensor{torch.Zeros([]int64{1}, ints), counts.Cumsum(0)}, 0)
	sum := h.IndexSelect(0, node).Mul(weight.Unsqueeze(1)).SegmentReduce(offsets, torch.ReduceSum)
	return sum.Div(s.Size.ClampMin(1).Unsqueeze(1))
}

// Count is the number of subgraphs (0-d int64).
func (s *Subgraphs) Count() *torch.Tensor { return s.Live.ToDType(torch.Int64).Sum() }

// SlotGraph is the molecule of each slot (NumSlots, int64).
func (s *Subgraphs) SlotGraph() *torch.Tensor {
	return torch.Arange(0, float64(s.NumSlots), 1, torch.Options{DType: torch.Int64, Device: s.Slot.Device()}).
		FloorDivideScalar(float64(s.PerGraph))
}
