package ops

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// randomNodes draws, for each of perGraph slots of every molecule, a node of
// that molecule uniformly (B·perGraph, int64).
func randomNodes(g *graph.Graph, perGraph int64) *torch.Tensor {
	dev := g.GraphPtr.Device()
	slots := g.NumGraphs * perGraph
	graph := torch.Arange(0, float64(slots), 1, torch.Options{DType: torch.Int64, Device: dev}).FloorDivideScalar(float64(perGraph))
	lo := g.GraphPtr.IndexSelect(0, graph)
	n := g.GraphPtr.IndexSelect(0, graph.AddScalar(1)).Sub(lo)
	r := torch.Rand([]int64{slots}, torch.Options{DType: torch.Float64, Device: dev})
	return lo.Add(r.Mul(n.ToDType(torch.Float64)).ToDType(torch.Int64).Minimum(n.SubScalar(1)))
}

// uniformInts draws n integers uniformly from [lo, hi] (int64).
func uniformInts(n, lo, hi int64, dev torch.Device) *torch.Tensor {
	r := torch.Rand([]int64{n}, torch.Options{DType: torch.Float64, Device: dev})
	return r.MulScalar(float64(hi - lo + 1)).ToDType(torch.Int64).ClampMax(float64(hi - lo)).AddScalar(float64(lo))
}

// RandomWalkSubgraphs is the random-walk ablation sampler of §4: perGraph
// walks per molecule, each from a uniformly drawn node, of a length drawn
// uniformly from [minLen, maxLen] steps, each step to a uniformly drawn
// neighbour (a node without neighbours stays); a subgraph is the set of nodes
// a walk visits. Weights have dtype dt.
func RandomWalkSubgraphs(g *graph.Graph, perGraph int64, minLen, maxLen int64, eta int, dt torch.DType) *Subgraphs {
	return torch.NoGradValue(func() *Subgraphs {
		dev := g.GraphPtr.Device()
		walks := g.NumGraphs * perGraph
		slot := torch.Arange(0, float64(walks), 1, torch.Options{DType: torch.Int64, Device: dev})
		length := uniformInts(walks, minLen, maxLen, dev)
		cur := randomNodes(g, perGraph)
		degree := g.Degree
		visited := []*torch.Tensor{cur}
		valid := []*torch.Tensor{length.GeScalar(0)}
		for step := int64(1); step <= maxLen; step++ {
			deg := degree.IndexSelect(0, cur)
			pick := torch.Rand([]int64{walks}, torch.Options{DType: torch.Float64, Device: dev}).
				Mul(deg.ToDType(torch.Float64)).ToDType(torch.Int64).Minimum(deg.SubScalar(1).ClampMin(0))
			// Incoming edges of cur come from its neighbours (edges go both ways).
			edge := g.RowPtr.IndexSelect(0, cur).Add(pick).ClampMax(float64(max(g.NumEdges-1, 0)))
			if g.NumEdges > 0 {
				cur = torch.Where(deg.GtScalar(0), g.Src.IndexSelect(0, edge), cur)
			}
			visited = append(visited, cur)
			valid = append(valid, length.GeScalar(float64(step)))
		}
		node := torch.Cat(visited, 0)
		slots := slot.Unsqueeze(0).Expand(maxLen+1, -1).Reshape(-1) // matches the order of visited
		weight := torch.Cat(valid, 0).ToDType(dt)
		key := slots.MulScalar(float64(g.NumNodes)).Add(node)
		weight = weight.Mul(firstValid(key, weight))
		return newSubgraphs(node, slots, weight, perGraph, walks, eta)
	})
}

// firstValid is 1 at the first valid position of each distinct key: keys of
// invalid positions are moved out of the way before the first-occurrence test.
func firstValid(key, valid *torch.Tensor) *torch.Tensor {
	shifted := torch.Where(valid.GtScalar(0), key, key.Neg().SubScalar(1))
	return firstOccurrence(shifted, valid.DType())
}

// KHopSubgraphs is the k-hop ablation sampler of §4: perGraph subgraphs per
// molecule, each the nodes within k hops of a uniformly drawn seed node, with
// k drawn from {1, 2} with equal probability. Weights have dtype dt.
func KHopSubgraphs(g *graph.Graph, perGraph int64, eta int, dt torch.DType) *Subgraphs {
	return torch.NoGradValue(func() *Subgraphs {
		dev := g.GraphPtr.Device()
		slots := g.NumGraphs * perGraph
		hops := uniformInts(slots, 1, 2, dev)
		seed := randomNodes(g, perGraph)
		column := torch.Arange(0, float64(slots), 1, torch.Options{DType: torch.Int64, Device: dev}).RemainderScalar(float64(perGraph))
		// dist[l][r]: hops from node l to the seed of its molecule's slot r.
		far := float64(1 << 20)
		dist := torch.Full([]int64{g.NumNodes * perGraph}, far, torch.Options{DType: torch.Float32, Device: dev}).
			Scatter(0, seed.MulScalar(float64(perGraph)).Add(column), torch.Zeros([]int64{slots}, torch.Options{DType: torch.Float32, Device: dev})).
			Reshape(g.NumNodes, perGraph)
		if g.NumEdges > 0 {
			for range 2 {
				via := dist.IndexSelect(0, g.Src).AddScalar(1).SegmentReduce(g.RowPtr, torch.ReduceMin)
				dist = dist.Minimum(via)
			}
		}
		slot := g.NodeGraph.MulScalar(float64(perGraph)).Unsqueeze(1).Add(
			torch.Arange(0, float64(perGraph), 1, torch.Options{DType: torch.Int64, Device: dev}).Unsqueeze(0))
		slot = slot.Reshape(-1)
		within := dist.Reshape(-1).Le(hops.IndexSelect(0, slot).ToDType(torch.Float32))
		node := g.Nodes.Unsqueeze(1).Expand(-1, perGraph).Reshape(-1)
		return newSubgraphs(node, slot, within.ToDType(dt), perGraph, slots, eta)
	})
}
