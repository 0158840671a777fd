package model

import (
	"cmp"
	"slices"
	"strconv"
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
	// data-parallel job, is the job's group, over which Sinkhorn completes
	// its sums over this process's nodes, so that it balances the global
	// batch (docs/method.md §3.3); nil for one process.
	Across *torch.ProcessGroup
	// Gather, when the batch is split across processes and the run
	// contrasts against the global batch (docs/method.md §3.3), stacks every
	// process's subgraph embeddings so that L_contra's negatives are the
	// whole batch's; nil for one process, or for negatives from this
	// process's part only.
	Gather ops.RowGatherer
}

// GradientOrder is the model's trainable tensors in about the order a
// training step's backward pass makes their gradients: the objective's and
// the motif table (used after the encoder), then the encoder's norms and
// convolutions from the last layer to the first, then its feature encoders
// (which the first layer, or every layer, uses). A data-parallel job sums
// the gradients in this order while the backward pass runs
// (torch.GradientSum); another order would only start the sums later.
func (m *MicroGraph) GradientOrder() []*torch.Tensor {
	type ranked struct {
		rank int
		t    *torch.Tensor
	}
	var all []ranked
	for _, v := range m.Store.Trainable() {
		all = append(all, ranked{gradientRank(v.Name, len(m.Encoder.Convs)), v.Tensor})
	}
	slices.SortStableFunc(all, func(a, b ranked) int { return cmp.Compare(b.rank, a.rank) })
	out := make([]*torch.Tensor, len(all))
	for i, r := range all {
		out[i] = r.t
	}
	return out
}

// gradientRank places a parameter by when the backward pass reaches it,
// the latest first: 2l+1 for the encoder's norm l (after conv l in the
// forward pass), 2l for its conv l, below 0 for its feature encoders, 2L
// for everything outside the encoder.
func gradientRank(name string, layers int) int {
	rest, ok := strings.CutPrefix(name, "encoder.")
	if !ok {
		return 2 * layers
	}
	for _, p := range []struct {
		prefix string
		offset int
	}{{"norms.", 1}, {"convs.", 0}} {
		if r, ok := strings.CutPrefix(rest, p.prefix); ok {
			layer, _, _ := strings.Cut(r, ".")
			if l, err := strconv.Atoi(layer); err == nil {
				return 2*l + p.offset
			}
		}
	}
	return -1
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
