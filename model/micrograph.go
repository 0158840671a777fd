package model

import (
	"strings"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// MicroGraph is the pre-training model: a DeeperGCN encoder ("encoder.*"),
// the motif embedding table M ("motif_embeddings", K×d), and its objective,
// which adds its own parameters: the paper's projections W_h, W_s, W_e
// ("W_h.weight", … d×d, no bias; §3), or the released formulation's
// projection head ("projection_head.*"; §12).
type MicroGraph struct {
	Config    Config
	Store     *nn.Store
	Encoder   *DeeperGCN
	Motifs    *torch.Tensor
	Objective Objective
	sampler   Sampler // Config.Sampler's, which Forward trains with

	// Across, when the batch is split across the processes of a
	// data-parallel job, completes sums over this process's nodes into sums
	// over the global batch, so that Sinkhorn balances the global batch
	// (docs/method.md §3); nil for one process.
	Across ops.SumReducer
	// Gather, when the batch is split across processes and the run
	// contrasts against the global batch (docs/method.md §3.3), stacks every
	// process's subgraph embeddings so that L_contra's negatives are the
	// whole batch's; nil for one process, or for negatives from this
	// process's part only.
	Gather ops.RowGatherer
}

// New builds the model cfg describes, with the objective it chooses, with
// fresh parameters on dev, of floating dtype dt (Float32 to train; Float64
// for reference checks). M starts from N(0, 1). cfg must be valid
// (Config.Validate): configurations are judged where they enter, a
// command's in its entry point's prologue, a saved one when it is read.
// Weights that do not fit in memory are an error naming the size setting
// at fault.
func New(cfg Config, dev torch.Device, dt torch.DType) (*MicroGraph, error) {
	return NewWith(cfg, cfg.NewObjective(), dev, dt)
}

// NewWith is New with the objective o, made from cfg: New's choice, or an
// objective of the caller's own.
func NewWith(cfg Config, o Objective, dev torch.Device, dt torch.DType) (_ *MicroGraph, err error) {
	sampler, err := o.Sampler(cfg.Sampler)
	if err != nil {
		return nil, err
	}
	s := nn.NewStore(dev, dt)
	m := &MicroGraph{Config: cfg, Store: s, Objective: o, sampler: sampler}
	defer func() {
		if err != nil {
			err = outOfMemory(s, cfg.Encoder, "motif_embeddings", "motifs", cfg.Motifs, err)
			if m.Encoder != nil {
				m.Encoder.Free()
			}
			s.Free()
		}
	}()
	defer torch.Recover(&err)
	root := s.Root()
	d := int64(cfg.Encoder.Hidden)
	m.Encoder = NewDeeperGCN(root.Sub("encoder"), cfg.Encoder)
	m.Motifs = root.Param("motif_embeddings", torch.Empty([]int64{int64(cfg.Motifs), d}, root.Options()))
	nn.Normal(m.Motifs, 0, 1)
	o.Register(m, root)
	return m, nil
}

// Free releases every tensor of the model.
func (m *MicroGraph) Free() {
	m.Encoder.Free()
	m.Store.Free()
}

// Forward computes the objective on a batch with the configured sampler.
// train selects batch statistics, dropout and the sampler's perturbations;
// call Backward on Total.
func (m *MicroGraph) Forward(g *graph.Graph, train bool) Output {
	return m.Objective.Forward(g, m.sampler, train)
}

// EncoderState is the encoder's tensors named without the "encoder." prefix,
// as an exported encoder file holds them.
func (m *MicroGraph) EncoderState() []torch.Named { return encoderState(m.Store) }

func encoderState(s *nn.Store) []torch.Named { return EncoderTensors(s.State()) }

// EncoderTensors picks the encoder's tensors ("encoder.*") out of a model's
// state, a store's or a checkpoint's, named without the prefix as an
// exported encoder file holds them.
func EncoderTensors(state []torch.Named) []torch.Named {
	var out []torch.Named
	for _, n := range state {
		if name, ok := strings.CutPrefix(n.Name, "encoder."); ok {
			out = append(out, torch.Named{Name: name, Tensor: n.Tensor})
		}
	}
	return out
}
