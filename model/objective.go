package model

import (
	"fmt"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Objective is a pre-training objective: the paper's (§3, PaperObjective,
// paper.go) or the formulation of its authors' released code (§12,
// ReleasedObjective, released.go), each listed in Objectives. It is made
// from a Config (Config.NewObjective), checks the settings it trains with,
// and, once Register has added its parameters beside the encoder and the
// motif table, computes its losses. What only some objectives do is an
// interface of its own that callers assert: training split across
// processes (DataParallel), reading motifs (MotifReader).
type Objective interface {
	// Name is the objective as config.json's model names it
	// (ObjectivePaper, ObjectiveReleased).
	Name() string
	// Check reports the first setting of the objective's configuration
	// that it cannot train with, naming its field; the settings every
	// objective shares (Config.Validate) are checked before.
	Check() error
	// Sampler is the objective's sampler called name (Config.Sampler), or
	// a field error naming the samplers it has.
	Sampler(name string) (Sampler, error)

	// Register adds the objective's parameters at p, the model's root, to
	// m, whose encoder and motif table exist; the objective then computes
	// with m.
	Register(m *MicroGraph, p nn.Path)
	// Initialise readies a new run's parameters before its first step,
	// reading the first batches it asks batches for. It returns what it
	// did, as a line for the run's banner ("" when nothing).
	Initialise(batches func(n int) ([]*graph.Graph, error)) (string, error)
	// Describe is a line naming the objective and its sampler for a run's
	// banner; "" for the paper's objective, the default.
	Describe() string

	// Forward computes the objective on batch g with the subgraphs of s.
	// train selects batch statistics, dropout and the sampler's
	// perturbations.
	Forward(g *graph.Graph, s Sampler, train bool) Output
	// PartNames are the names of the loss's parts, in the order
	// Losses.Parts holds them and the log writes them.
	PartNames() []string
	// Total is the loss from its parts (in PartNames order).
	Total(parts []torch.Named) *torch.Tensor
	// ClipGroups are the groups of trainable parameters whose gradients
	// are clipped each to the norm bound.
	ClipGroups() [][]*torch.Tensor
}

// MotifReader is an objective that says which motif each atom and each
// motif-like subgraph of a batch stands for, which motif reports, motif
// models and explanations read (both shipped objectives do).
type MotifReader interface {
	Objective
	// AssignmentHead registers at p, a model's root, under its
	// pre-training names, the projection that maps node embeddings into
	// the motif table's space, and returns it (a MotifModel's head;
	// Register makes the model's own with it).
	AssignmentHead(p nn.Path) Projection
	// ReadMotifs reads the motifs of batch g in evaluation mode, without
	// gradient: the subgraphs of the sampler whose subgraphs stand for the
	// motifs (whichever sampler trained the model), the motif each stands
	// for, and each atom's motif (docs/method.md §3, §12.6).
	ReadMotifs(g *graph.Graph) MotifReading
}

// AsMotifReader is o as a MotifReader, or an error saying that it reads
// no motifs.
func AsMotifReader(o Objective) (MotifReader, error) {
	r, ok := o.(MotifReader)
	if !ok {
		return nil, fmt.Errorf("the %s objective reads no motifs", o.Name())
	}
	return r, nil
}

// Projection maps the rows of x (n×d) to the space of the motif table.
type Projection interface {
	Forward(x *torch.Tensor) *torch.Tensor
}

// MotifReading is what an objective makes of a batch's motifs: the
// forward pass (with its motif sampler, in evaluation mode) and, for each of
// its subgraphs (rows in Subgraphs.LiveSlots order) and atoms, the motif it
// stands for.
type MotifReading struct {
	Output
	// Cosine is, for each subgraph, the cosine between its projection and
	// each motif (J×K): cos(W_s s, M) (paper), cos(head(s), M) (released).
	Cosine *torch.Tensor
	// SubgraphMotif is the motif of each subgraph: its slot's under the
	// motif-guided sampler, its closest (argmax of Cosine) under the
	// released objective.
	SubgraphMotif []int
	// AtomMotif is the motif of each atom: its Sinkhorn motif (paper), that
	// of the first subgraph it is in (released; −1 in none).
	AtomMotif []int
}

// Losses are the loss of one step and its unweighted parts, as 0-d tensors
// on the device (reading them waits for it). The parts are named as the log
// names them, in the objective's order (Objective.PartNames): node_mot,
// mot_sub, reg, contra for the paper's (§3), motif, contra, sampler for the
// released one (§12).
type Losses struct {
	Total     *torch.Tensor // the objective
	Parts     []torch.Named // its unweighted parts
	Subgraphs *torch.Tensor // number of subgraphs (int64)
}

// Part is the part named name; it panics on a name the objective lacks.
func (l Losses) Part(name string) *torch.Tensor {
	for _, p := range l.Parts {
		if p.Name == name {
			return p.Tensor
		}
	}
	panic("model: the objective has no loss part " + name)
}

// Named lists the losses under their log names: "loss", the parts,
// "subgraphs".
func (l Losses) Named() []torch.Named {
	out := append([]torch.Named{{Name: "loss", Tensor: l.Total}}, l.Parts...)
	return append(out, torch.Named{Name: "subgraphs", Tensor: l.Subgraphs})
}

// Assignment is what the model makes of a batch's nodes. Objectives that
// assign nodes to motifs (the paper's) set every field; others only H.
type Assignment struct {
	H        *torch.Tensor // node embeddings, N×d
	LogQ     *torch.Tensor // log node-to-motif probabilities, N×K
	Q        *torch.Tensor // exp(LogQ)
	Motif    *torch.Tensor // Sinkhorn-balanced motif of each node, N int64
	Balanced *torch.Tensor // Sinkhorn's A, K×N float32
}

// Output is everything a forward pass computes: the losses and the
// intermediate tensors, for analysis (motif reports, reference checks).
type Output struct {
	Losses
	Assignment
	E         *torch.Tensor  // graph embeddings, B×d
	Subgraphs *ops.Subgraphs // the sampled subgraphs
	S         *torch.Tensor  // subgraph embeddings, J×d, rows in Subgraphs.LiveSlots order
	LogP      *torch.Tensor  // log subgraph-to-motif probabilities, J×K, rows in Subgraphs.LiveSlots order
}

// scaled is x·w; a weight of 1 costs no operation, forward or backward
// (x·1 is x exactly).
func scaled(x *torch.Tensor, w float64) *torch.Tensor {
	if w == 1 {
		return x
	}
	return x.MulScalar(w)
}

// part is the tensor of the part named name.
func part(parts []torch.Named, name string) *torch.Tensor { return Losses{Parts: parts}.Part(name) }

// subgraphMotifSlots is, for subgraphs whose slots stand for the motifs
// (SamplerNeeds.Motifs), each live subgraph's motif: slot graph·K + k holds
// motif k.
func subgraphMotifSlots(sub *ops.Subgraphs, k int) *torch.Tensor {
	return sub.LiveSlots.RemainderScalar(float64(k))
}

// DataParallel is an objective that trains with its batch split across the
// processes of a job (docs/method.md §3.3): each loss part is a mean over
// some of the batch's nodes, subgraphs or molecules, so that each process's
// part, weighted by its share of those, sums over the processes to the
// mean one process would compute over the whole batch.
type DataParallel interface {
	Objective
	// MeansOver is, for each part in PartNames order, what it is a mean
	// over.
	MeansOver() []MeanOver
}

// MeanOver is what a loss part is a mean over.
type MeanOver int

// What loss parts are means over.
const (
	OverNodes                  MeanOver = iota // every node
	OverSubgraphs                              // every subgraph
	OverMolecules                              // every molecule
	OverMoleculesWithSubgraphs                 // the molecules with at least one subgraph
)
