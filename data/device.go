package data

import (
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
)

// Graph puts the batch's graph on dev. The tensors join the caller's scope,
// if one is open.
func (b *Batch) Graph(dev torch.Device) *ops.Graph {
	n, e := int64(b.NumAtoms()), int64(b.NumEdges())
	return &ops.Graph{
		NumGraphs: int64(b.NumGraphs()), NumNodes: n, NumEdges: e,
		Atoms:     upload(b.X, dev, n, NumAtomFeatures),
		Bonds:     upload(b.EdgeAttr, dev, e, NumBondFeatures),
		Src:       upload(b.EdgeSrc, dev),
		Dst:       upload(b.EdgeDst, dev),
		RowPtr:    upload(b.RowPtr, dev),
		NodeGraph: upload(b.NodeGraph, dev),
		GraphPtr:  upload(b.GraphPtr, dev),
	}
}

// Targets are the batch's labels (B×T float32, 0 where missing) and the mask
// of present labels (B×T bool), on dev.
func (b *Batch) Targets(dev torch.Device) (labels, mask *torch.Tensor) {
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
