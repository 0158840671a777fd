package feed

import (
	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
)

// staged is a collated batch copied by a loader worker into page-locked host
// tensors, from which copies to a GPU need not block.
type staged struct {
	atoms, bonds, src, dst, rowPtr, nodeGraph, graphPtr, labels, mask *torch.Tensor
	nodes, degree, padIndex, pairLater, pairEarlier                   *torch.Tensor
}

func (s *staged) free() {
	for _, t := range []*torch.Tensor{s.atoms, s.bonds, s.src, s.dst, s.rowPtr, s.nodeGraph, s.graphPtr, s.labels, s.mask,
		s.nodes, s.degree, s.padIndex, s.pairLater, s.pairEarlier} {
		t.Free()
	}
}

// PinMemory is a LoaderConfig.Prepare for training on a GPU: on the worker
// goroutine it copies the collated batch into page-locked host memory, so that
// Graph and Targets copy it to the GPU without blocking while the previous step
// runs. The page-locked blocks come from libtorch's caching host allocator,
// which recycles a block only once the copies that read it have completed.
// Without CUDA the memory is ordinary.
//
// A libtorch failure (page-locked memory exhausted) comes back as the error,
// not as a panic on the worker goroutine; what was allocated is freed with
// the batch.
func PinMemory(b *Batch) error {
	if old, ok := b.Aux.(*staged); ok {
		old.free() // a batch that was never put on a device
	}
	n, e, bt, tasks := int64(b.NumAtoms()), int64(b.NumEdges()), int64(b.NumGraphs()), int64(b.NumTasks())
	s := &staged{}
	b.Aux = s
	return torch.Catch(func() {
		s.atoms = pinned(b.X, n, data.NumAtomFeatures)
		s.bonds = pinned(b.EdgeAttr, e, data.NumBondFeatures)
		s.src, s.dst = pinned(b.EdgeSrc, e), pinned(b.EdgeDst, e)
		s.rowPtr, s.nodeGraph, s.graphPtr = pinned(b.RowPtr, n+1), pinned(b.NodeGraph, n), pinned(b.GraphPtr, bt+1)
		s.labels, s.mask = pinned(b.Labels, bt, tasks), pinned(b.LabelMask, bt, tasks)
		s.nodes, s.degree, s.padIndex = pinned(b.Nodes, n), pinned(b.InDegree, n), pinned(b.PadIndex, n)
		pairs := int64(len(b.PairLater))
		s.pairLater, s.pairEarlier = pinned(b.PairLater, pairs), pinned(b.PairEarlier, pairs)
	})
}

func pinned[T torch.Element](data []T, shape ...int64) *torch.Tensor {
	t := torch.Empty(shape, torch.Options{DType: torch.DTypeOf[T](), Pinned: true})
	copy(torch.HostData[T](t), data)
	return t
}

// Graph puts the batch's graph on dev; the tensors join the caller's scope,
// if one is open. After PinMemory the copies do not block; otherwise the
// batch is copied from Go memory.
func (b *Batch) Graph(dev torch.Device) *graph.Graph {
	n, e := int64(b.NumAtoms()), int64(b.NumEdges())
	g := &graph.Graph{NumGraphs: int64(b.NumGraphs()), NumNodes: n, NumEdges: e, MaxNodes: int64(b.MaxAtoms),
		Host: &graph.HostGraph{Src: b.EdgeSrc, RowPtr: b.RowPtr, GraphPtr: b.GraphPtr}}
	if s, ok := b.Aux.(*staged); ok {
		g.Atoms, g.Bonds = s.atoms.To(dev, true), s.bonds.To(dev, true)
		g.Src, g.Dst, g.RowPtr = s.src.To(dev, true), s.dst.To(dev, true), s.rowPtr.To(dev, true)
		g.NodeGraph, g.GraphPtr = s.nodeGraph.To(dev, true), s.graphPtr.To(dev, true)
		g.Nodes, g.Degree, g.PadIndex = s.nodes.To(dev, true), s.degree.To(dev, true), s.padIndex.To(dev, true)
		g.PairLater, g.PairEarlier = s.pairLater.To(dev, true), s.pairEarlier.To(dev, true)
		return g
	}
	g.Atoms, g.Bonds = upload(b.X, dev, n, data.NumAtomFeatures), upload(b.EdgeAttr, dev, e, data.NumBondFeatures)
	g.Src, g.Dst, g.RowPtr = upload(b.EdgeSrc, dev), upload(b.EdgeDst, dev), upload(b.RowPtr, dev)
	g.NodeGraph, g.GraphPtr = upload(b.NodeGraph, dev), upload(b.GraphPtr, dev)
	g.Nodes, g.Degree, g.PadIndex = upload(b.Nodes, dev), upload(b.InDegree, dev), upload(b.PadIndex, dev)
	g.PairLater, g.PairEarlier = upload(b.PairLater, dev), upload(b.PairEarlier, dev)
	return g
}

// Targets are the batch's labels (B×T float32, 0 where missing) and the mask
// of present labels (B×T bool), on dev.
func (b *Batch) Targets(dev torch.Device) (labels, mask *torch.Tensor) {
	if s, ok := b.Aux.(*staged); ok {
		return s.labels.To(dev, true), s.mask.To(dev, true)
	}
	bt, tasks := int64(b.NumGraphs()), int64(b.NumTasks())
	return upload(b.Labels, dev, bt, tasks), upload(b.LabelMask, dev, bt, tasks)
}

func upload[T torch.Element](data []T, dev torch.Device, shape ...int64) *torch.Tensor {
	host := torch.FromSlice(data, shape...)
	if !dev.IsCUDA() {
		return host
	}
	defer host.Free()
	return host.To(dev, false)
}
