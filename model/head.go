package model

import (
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// GraphHead predicts T graph properties from node embeddings (§7):
//
//	logits = Linear(d, T)(ReLU(Linear(d, d)(meanpool(h))))
//
// Its tensors are "lin1.*" and "lin2.*".
type GraphHead struct {
	Lin1, Lin2 *nn.Linear
}

// NewGraphHead registers a head for T tasks on width-d embeddings.
func NewGraphHead(p nn.Path, d, tasks int) *GraphHead {
	return &GraphHead{
		Lin1: nn.NewLinear(p.Sub("lin1"), int64(d), int64(d), true),
		Lin2: nn.NewLinear(p.Sub("lin2"), int64(d), int64(tasks), true),
	}
}

// Forward maps node embeddings h (N×d) to per-molecule logits (B×T).
func (h *GraphHead) Forward(x *torch.Tensor, g *graph.Graph) *torch.Tensor {
	return h.Lin2.Forward(h.Lin1.Forward(ops.GraphPool(x, g, ops.MeanPool)).Relu())
}

// Classifier is an encoder with a graph-property head, for fine-tuning:
// tensors "encoder.*" and "head.*".
type Classifier struct {
	Store   *nn.Store
	Encoder *DeeperGCN
	Head    *GraphHead
}

// NewClassifier builds a freshly initialised classifier for T tasks.
// Weights that do not fit in memory are an error naming the size setting
// at fault (encoder.hidden, encoder.layers or tasks).
func NewClassifier(c EncoderConfig, tasks int, dev torch.Device, dt torch.DType) (_ *Classifier, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	clf := &Classifier{Store: nn.NewStore(dev, dt)}
	defer func() {
		if err != nil {
			err = outOfMemory(clf.Store, c, "head.lin2.", "tasks", tasks, err)
			if clf.Encoder != nil {
				clf.Encoder.Free()
			}
			clf.Store.Free()
		}
	}()
	defer torch.Recover(&err)
	clf.Encoder = NewDeeperGCN(clf.Store.Root().Sub("encoder"), c)
	clf.Head = NewGraphHead(clf.Store.Root().Sub("head"), c.Hidden, tasks)
	return clf, nil
}

// Forward is the logits (B×T) of a batch.
func (c *Classifier) Forward(g *graph.Graph, train bool) *torch.Tensor {
	return c.Head.Forward(c.Encoder.Forward(g, train), g)
}

// EncoderState is the encoder's tensors named without the "encoder." prefix:
// load an exported encoder into it with torch.LoadState.
func (c *Classifier) EncoderState() []torch.Named { return encoderState(c.Store) }

// Free releases every tensor of the classifier.
func (c *Classifier) Free() {
	c.Encoder.Free()
	c.Store.Free()
}
