package model

import (
	"math/rand/v2"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/ops/sample"
	"github.com/micrograph/micrograph/torch"
)

// Sampler draws the subgraphs of a batch (docs/method.md §4, §12.1). Each
// objective offers its own (Objective.Sampler, listed in its entry of
// Objectives) and trains with the one Config.Sampler names; a new sampler
// is a type implementing this and an entry in its objective's Samplers.
type Sampler interface {
	// Name is the sampler as Config.Sampler names it.
	Name() string
	// Needs says what the sampler reads besides the batch's structure.
	Needs() SamplerNeeds
	// Sample draws the subgraphs of in.Graph, without gradient.
	Sample(in SampleInput) *ops.Subgraphs
}

// SamplerNeeds says what a sampler reads of the model, so that the
// objective computes it.
type SamplerNeeds struct {
	// Motifs: each node's Sinkhorn motif (SampleInput.Motif). Such a
	// sampler gives each molecule one slot per motif, slot graph·K + k
	// holding motif k's atoms, so the objective may read a subgraph's motif
	// from its slot.
	Motifs bool
	// Embeddings: node embeddings (SampleInput.Embeddings), in training
	// from an encoder pass of their own, in training mode without gradient
	// (§12.1).
	Embeddings bool
}

// SampleInput is what an objective gives its sampler for one batch.
type SampleInput struct {
	Graph      *graph.Graph
	Motif      *torch.Tensor // N int64, each node's motif; set for samplers that need it
	Embeddings *torch.Tensor // N×d node embeddings; set for samplers that need them
	Perturb    bool          // training: the sampler's random perturbations apply
	RNG        *rand.Rand    // host-side draws, for samplers that draw on the host
	DType      torch.DType   // of the subgraphs' weights: the model's
}

// Names of the samplers in Config.Sampler: the motif-guided one and the
// ablations of the paper's Table 3, and the released formulation's.
const (
	SamplerMotif      = "motif"
	SamplerRandomWalk = "random-walk"
	SamplerKHop       = "k-hop"
	// SamplerSpectral is the released formulation's sampler (§12.1).
	SamplerSpectral = "spectral"
)

// motifSampler is §4's motif-guided sampler: the atoms of each molecule
// grouped by their Sinkhorn motif, perturbed in training by dropping
// members with probability pDrop and adding neighbours with probability
// pAdd; groups of at least η atoms are the subgraphs.
type motifSampler struct {
	motifs, eta int
	pDrop, pAdd float64
}

func (s motifSampler) Name() string        { return SamplerMotif }
func (s motifSampler) Needs() SamplerNeeds { return SamplerNeeds{Motifs: true} }

func (s motifSampler) Sample(in SampleInput) *ops.Subgraphs {
	pDrop, pAdd := s.pDrop, s.pAdd
	if !in.Perturb {
		pDrop, pAdd = 0, 0
	}
	return ops.MotifSubgraphs(in.Graph, in.Motif, int64(s.motifs), s.eta, pDrop, pAdd, in.DType)
}

// The paper objective's random walks (§4): 10 to 40 steps.
const paperWalkMin, paperWalkMax = 10, 40

// randomWalkSampler is §4's random-walk ablation, drawn on the device:
// perGraph walks per molecule.
type randomWalkSampler struct{ perGraph, eta int }

func (s randomWalkSampler) Name() string        { return SamplerRandomWalk }
func (s randomWalkSampler) Needs() SamplerNeeds { return SamplerNeeds{} }

func (s randomWalkSampler) Sample(in SampleInput) *ops.Subgraphs {
	return ops.RandomWalkSubgraphs(in.Graph, int64(s.perGraph), paperWalkMin, paperWalkMax, s.eta, in.DType)
}

// kHopSampler is §4's k-hop ablation, drawn on the device: perGraph balls
// of 1 or 2 bonds per molecule.
type kHopSampler struct{ perGraph, eta int }

func (s kHopSampler) Name() string        { return SamplerKHop }
func (s kHopSampler) Needs() SamplerNeeds { return SamplerNeeds{} }

func (s kHopSampler) Sample(in SampleInput) *ops.Subgraphs {
	return ops.KHopSubgraphs(in.Graph, int64(s.perGraph), s.eta, in.DType)
}

// hostSampler draws each molecule's subgraphs on the host, as lists of its
// atoms, from in.RNG (the released formulation's samplers, §12.1).
type hostSampler struct {
	name       string
	embeddings bool // draw reads the molecules' node embeddings
	// draw lists the subgraphs of every molecule of a batch, in order: those
	// of mols[i], whose node embeddings are the rows of xs[i] (n×d,
	// row-major; nil unless embeddings).
	draw func(mols []sample.Molecule, xs [][]float64, d int, rng *rand.Rand) [][][]int
}

// eachMolecule is a hostSampler's draw from one molecule's, called on each
// molecule in turn.
func eachMolecule(draw func(mol sample.Molecule, x []float64, d int, rng *rand.Rand) [][]int) func([]sample.Molecule, [][]float64, int, *rand.Rand) [][][]int {
	return func(mols []sample.Molecule, xs [][]float64, d int, rng *rand.Rand) [][][]int {
		lists := make([][][]int, len(mols))
		for i, mol := range mols {
			lists[i] = draw(mol, xs[i], d, rng)
		}
		return lists
	}
}

func (s hostSampler) Name() string        { return s.name }
func (s hostSampler) Needs() SamplerNeeds { return SamplerNeeds{Embeddings: s.embeddings} }

func (s hostSampler) Sample(in SampleInput) *ops.Subgraphs {
	g := in.Graph
	mols := sample.Molecules(g.Host.Src, g.Host.RowPtr, g.Host.GraphPtr)
	var emb []float32
	var d int
	if s.embeddings {
		h := in.Embeddings
		emb = torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](h.ToDType(torch.Float32).To(torch.CPU, false)) })
		d = int(h.Size(1))
	}
	xs := make([][]float64, len(mols))
	for gi, mol := range mols {
		if s.embeddings {
			first, n := int(g.Host.GraphPtr[gi]), mol.Size()
			xs[gi] = make([]float64, n*d)
			for i, v := range emb[first*d : (first+n)*d] {
				xs[gi][i] = float64(v)
			}
		}
	}
	lists := s.draw(mols, xs, d, in.RNG)
	return ops.ListedSubgraphs(g, lists, in.DType)
}
