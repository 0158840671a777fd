package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/ops/sample"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// ProjectionHead is the released formulation's projection of graph and
// subgraph embeddings (§12.2):
//
//	z = Linear(d, d, no bias)(GELU(Linear(d, d)(x)))
//
// Its tensors are "0.weight", "0.bias" and "2.weight", as a PyTorch
// nn.Sequential(Linear, GELU, Linear) names them.
type ProjectionHead struct {
	In, Out *nn.Linear
}

// NewProjectionHead registers a head on width-d embeddings.
func NewProjectionHead(p nn.Path, d int64) *ProjectionHead {
	return &ProjectionHead{In: nn.NewLinear(p.Index(0), d, d, true), Out: nn.NewLinear(p.Index(2), d, d, false)}
}

// Forward projects the rows of x (n×d).
func (h *ProjectionHead) Forward(x *torch.Tensor) *torch.Tensor {
	return h.Out.Forward(h.In.Forward(x).Gelu())
}

// ReleasedObjective is the formulation of MICRO-Graph's authors' released
// code (§12): a projection head ("projection_head.*") beside the encoder and
// the motif table, subgraphs drawn on the host (spectral clusters, or the
// ablations' walks and balls), a motif table initialised at k-means centres,
// and the loss
//
//	L = w_m·L_motif + w_c·L_contra + w_s·L_sampler
type ReleasedObjective struct {
	Head *ProjectionHead

	c Config
	r ReleasedConfig
	m *MicroGraph
}

// releasedKind is the released formulation's entry in Objectives.
var releasedKind = ObjectiveKind{
	Name:     ObjectiveReleased,
	About:    "the formulation of the authors' released code (docs/method.md §12)",
	Model:    ReleasedModelConfig,
	Training: Training{BatchSize: 256, WeightDecay: 0.01, ClipGradNorm: 0.5},
	Samplers: []SamplerKind{
		{Name: SamplerSpectral, new: spectralSampler},
		{Name: SamplerRandomWalk, new: func(c Config) Sampler {
			return hostSampler{name: SamplerRandomWalk, draw: eachMolecule(func(mol sample.Molecule, _ []float64, _ int, rng *rand.Rand) [][]int {
				return sample.RandomWalks(mol, releasedWalkMin, releasedWalkMax, c.Eta, rng)
			})}
		}},
		{Name: SamplerKHop, new: func(c Config) Sampler {
			return hostSampler{name: SamplerKHop, draw: eachMolecule(func(mol sample.Molecule, _ []float64, _ int, rng *rand.Rand) [][]int {
				return sample.KHopBalls(mol, releasedHopsMin, releasedHopsMax, c.Eta, rng)
			})}
		}},
	},
	claims: func(c Config) bool { return c.Released != nil },
	new:    func(c Config) Objective { return &ReleasedObjective{c: c, r: *c.Released} },
}

// Name is ObjectiveReleased.
func (o *ReleasedObjective) Name() string { return ObjectiveReleased }

// Check judges §12's settings: the paper-only ones must be 0, the weights
// finite and not negative, the sampler one of §12.1's.
func (o *ReleasedObjective) Check() error {
	c, r := o.c, o.r
	paperOnly := []struct {
		name  string
		value any
		set   bool
	}{{"alpha", c.Alpha, c.Alpha != 0}, {"lambda_node", c.LambdaNode, c.LambdaNode != 0},
		{"lambda_sub", c.LambdaSub, c.LambdaSub != 0}, {"lambda_reg", c.LambdaReg, c.LambdaReg != 0},
		{"p_drop", c.PDrop, c.PDrop != 0}, {"p_add", c.PAdd, c.PAdd != 0},
		{"subgraphs_per_graph", c.SubgraphsPerGraph, c.SubgraphsPerGraph != 0},
		{"ortho_selected", c.OrthoSelected, c.OrthoSelected}, {"contrast_detached", c.ContrastDetached, c.ContrastDetached}}
	for _, p := range paperOnly {
		if p.set {
			return field.Errorf(p.name, p.value, "belongs to the paper objective, not the released one")
		}
	}
	weights := []struct {
		name string
		v    float64
	}{{"released.cluster_tau", r.ClusterTau}, {"released.motif_weight", r.MotifWeight},
		{"released.contra_weight", r.ContraWeight}, {"released.sampler_weight", r.SamplerWeight},
		{"released.top_fraction", r.TopFraction}}
	for _, w := range weights {
		if err := field.Finite(w.name, w.v); err != nil {
			return err
		}
		if w.v < 0 {
			return field.Errorf(w.name, w.v, "must not be negative")
		}
	}
	if _, err := o.Sampler(c.Sampler); err != nil {
		return err
	}
	switch {
	case !(r.ClusterTau > 0):
		return field.Errorf("released.cluster_tau", r.ClusterTau, "must be positive")
	case r.TopFraction <= 0 || r.TopFraction > 1:
		return field.Errorf("released.top_fraction", r.TopFraction, "must be in (0, 1]")
	case r.KMeansRestarts < 1:
		return field.Errorf("released.kmeans_restarts", r.KMeansRestarts, "must be positive")
	case r.InitBatches < 0:
		return field.Errorf("released.init_batches", r.InitBatches, "must not be negative")
	}
	return nil
}

// The ablation samplers' draws under the released objective (§12.1): walks
// of [5, 40) steps, balls of 1 to 3 bonds.
const (
	releasedWalkMin, releasedWalkMax = 5, 40
	releasedHopsMin, releasedHopsMax = 1, 3
)

// Sampler is §12.1's spectral sampler, which clusters each molecule's atoms
// by their embeddings, or one of its ablations; all draw on the host
// (releasedKind.Samplers).
func (o *ReleasedObjective) Sampler(name string) (Sampler, error) {
	return releasedKind.sampler(o.c, name)
}

// spectralSampler is §12.1's sampler: the affinities and
// eigendecompositions on every core (libtorch's threads wait for the
// subgraphs), the k-means in molecule order, so that the draws do not
// depend on the cores.
func spectralSampler(c Config) Sampler {
	eta, r := c.Eta, *c.Released
	return hostSampler{name: SamplerSpectral, embeddings: true, draw: func(mols []sample.Molecule, xs [][]float64, d int, rng *rand.Rand) [][][]int {
		return sample.SpectralSubgraphsOf(mols, xs, d, r.ClusterTau, eta, r.KMeansRestarts, rng, runtime.GOMAXPROCS(0))
	}}
}

// Register adds the projection head.
func (o *ReleasedObjective) Register(m *MicroGraph, p nn.Path) {
	o.m = m
	o.Head = o.AssignmentHead(p).(*ProjectionHead)
}

// AssignmentHead registers the projection head.
func (o *ReleasedObjective) AssignmentHead(p nn.Path) Projection {
	return NewProjectionHead(p.Sub("projection_head"), int64(o.c.Encoder.Hidden))
}

// Initialise places the motif table at the k-means centres of the
// subgraphs of the run's first InitBatches batches (§12.5).
func (o *ReleasedObjective) Initialise(batches func(n int) ([]*graph.Graph, error)) (string, error) {
	n := o.r.InitBatches
	if n == 0 {
		return "", nil
	}
	graphs, err := batches(n)
	if err != nil {
		return "", err
	}
	rows, err := o.InitMotifs(graphs)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("motif table initialised at the k-means centres of %d subgraphs of the first %d batches", len(rows), n), nil
}

// Describe names the objective and its sampler.
func (o *ReleasedObjective) Describe() string {
	return fmt.Sprintf("the released objective (docs/method.md §12), %s sampler", o.c.Sampler)
}

// hostRNG seeds the step's host-side draws (walks, balls, k-means starts)
// from libtorch's CPU generator, so that a checkpoint's generator state
// restores them too and a resumed run draws what an uninterrupted one does.
func hostRNG() *rand.Rand {
	words := torch.NoGradValue(func() []float64 {
		return torch.ToSlice[float64](torch.Rand([]int64{2}, torch.Options{DType: torch.Float64, Device: torch.CPU}))
	})
	return rand.New(rand.NewPCG(math.Float64bits(words[0]), math.Float64bits(words[1])))
}

// Forward computes the released objective of §12 on a batch:
//
//	h     = ENC(batch)                                  with gradient
//	subgraphs: spectral clusters of ENC(batch) without gradient, or walks, or balls
//	z_s   = head(mean of h over each subgraph)          J×d
//	z_g   = head(mean of h over each molecule)          B×d
//	S     = cos(z_s, M)                                 J×K
//	k_j   = argmax_k Sinkhorn(S)[j]                     without gradient
//	L_motif   = −(1/J) Σ_j log softmax_k(S/τ)[j, k_j]
//	L_contra  = §6 with z_g against z_s
//	L_sampler = −mean over the subgraphs in the top share of some motif's column of S
//	            of the mean cosine between their atoms' embeddings
//	L = w_m·L_motif + w_c·L_contra + w_s·L_sampler
func (o *ReleasedObjective) Forward(g *graph.Graph, s Sampler, train bool) Output {
	m, c := o.m, o.c
	rng := hostRNG()
	var h0 *torch.Tensor
	if train && s.Needs().Embeddings {
		// The sampler's own pass: training mode, no gradient, its own
		// dropout masks (§12.1).
		h0 = torch.NoGradValue(func() *torch.Tensor { return m.Encoder.Forward(g, true) })
	}
	h := m.Encoder.Forward(g, train)
	if h0 == nil {
		h0 = h
	}
	sub := s.Sample(SampleInput{Graph: g, Embeddings: h0, Perturb: train, RNG: rng, DType: m.Store.DType()})
	e := ops.GraphPool(h, g, ops.MeanPool)
	sLive := sub.LiveRows(sub.Pool(h))
	zs, zg := o.Head.Forward(sLive), o.Head.Forward(e)
	cos := ops.Cosine(zs, m.Motifs) // J×K
	logP := cos.DivScalar(c.Tau).LogSoftmax(1)
	j := sLive.Size(0)
	target := torch.NoGradValue(func() *torch.Tensor {
		if j == 0 {
			return torch.Zeros([]int64{0}, torch.Options{DType: torch.Int64, Device: h.Device()})
		}
		motif, _ := ops.SinkhornAssign(cos, c.SinkhornLambda, c.SinkhornIters, nil)
		return motif
	})
	l := Losses{
		Parts: []torch.Named{
			{Name: "motif", Tensor: ops.NLL(logP, target)},
			{Name: "contra", Tensor: ops.GraphSubgraphContrast(zg, zs, sub, c.Tau, nil)},
			{Name: "sampler", Tensor: o.samplerLoss(h, sub, cos)},
		},
		Subgraphs: sub.Count(),
	}
	l.Total = o.Total(l.Parts)
	return Output{Losses: l, Assignment: Assignment{H: h}, E: e, Subgraphs: sub, S: sLive, LogP: logP}
}

// PartNames are motif, contra and sampler.
func (o *ReleasedObjective) PartNames() []string { return []string{"motif", "contra", "sampler"} }

// Total is §12.3's w_m·L_motif + w_c·L_contra + w_s·L_sampler.
func (o *ReleasedObjective) Total(parts []torch.Named) *torch.Tensor {
	r := o.r
	return scaled(part(parts, "motif"), r.MotifWeight).Add(scaled(part(parts, "contra"), r.ContraWeight)).Add(scaled(part(parts, "sampler"), r.SamplerWeight))
}

// ClipGroups are the motif table and the rest, apart (§12.5).
func (o *ReleasedObjective) ClipGroups() [][]*torch.Tensor {
	var rest []*torch.Tensor
	for _, v := range o.m.Store.Trainable() {
		if v.Tensor != o.m.Motifs {
			rest = append(rest, v.Tensor)
		}
	}
	return [][]*torch.Tensor{rest, {o.m.Motifs}}
}

// ReadMotifs reads the spectral subgraphs in evaluation mode (§12.6): each
// subgraph's motif is its closest, argmax_k cos(head(s), M_k) (the first
// of equals), and an atom takes the motif of the first subgraph it is in.
func (o *ReleasedObjective) ReadMotifs(g *graph.Graph) MotifReading {
	r := torch.NoGradValue(func() MotifReading {
		out := o.Forward(g, spectralSampler(o.c), false)
		return MotifReading{Output: out, Cosine: ops.Cosine(o.Head.Forward(out.S), o.m.Motifs)}
	})
	k := o.c.Motifs
	cos := torch.ToSlice[float32](r.Cosine.ToDType(torch.Float32))
	for j := range len(cos) / k {
		best := 0
		for c := 1; c < k; c++ {
			if cos[j*k+c] > cos[j*k+best] {
				best = c
			}
		}
		r.SubgraphMotif = append(r.SubgraphMotif, best)
	}
	r.AtomMotif = make([]int, g.NumNodes)
	for i := range r.AtomMotif {
		r.AtomMotif[i] = -1
	}
	sub := r.Subgraphs
	live := torch.ToSlice[bool](sub.Live)
	node, slot := torch.ToSlice[int64](sub.Node), torch.ToSlice[int64](sub.Slot)
	row := make([]int, len(live)) // each live slot's subgraph
	for j, n := 0, 0; j < len(live); j++ {
		if live[j] {
			row[j], n = n, n+1
		}
	}
	// Memberships are listed subgraph by subgraph, in slot order.
	for i, j := range slot {
		if a := node[i]; live[j] && r.AtomMotif[a] < 0 {
			r.AtomMotif[a] = r.SubgraphMotif[row[j]]
		}
	}
	return r
}

// samplerLoss is §12.3's L_sampler: a subgraph is selected when it is among
// the ⌈f·J⌉ most similar to at least one motif (a column of cos, J×K, read
// without gradient), and L_sampler is minus the mean, over the selected
// subgraphs, of the mean cosine between their atoms' embeddings h (all
// ordered pairs, each atom with itself included), which is ‖mean of the
// atoms' unit vectors‖². It is 0 without subgraphs.
func (o *ReleasedObjective) samplerLoss(h *torch.Tensor, sub *ops.Subgraphs, cos *torch.Tensor) *torch.Tensor {
	j, k := int(cos.Size(0)), int(cos.Size(1))
	if j == 0 {
		return torch.Zeros(nil, h.Options())
	}
	sims := torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](cos.ToDType(torch.Float32).To(torch.CPU, false)) })
	top := int(math.Ceil(o.r.TopFraction * float64(j)))
	selected := make([]float64, j)
	order := make([]int, j)
	for motif := range k {
		for r := range order {
			order[r] = r
		}
		// Most similar first; ties by row, so the choice is reproducible.
		slices.SortStableFunc(order, func(a, b int) int {
			sa, sb := sims[a*k+motif], sims[b*k+motif]
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return 0
		})
		for _, r := range order[:top] {
			selected[r] = 1
		}
	}
	mask := torch.FromSlice(selected, int64(j)).ToDType(h.DType()).To(h.Device(), false)
	unit := ops.NormalizeRows(h)
	centre := sub.LiveRows(sub.Pool(unit))
	coherence := centre.Mul(centre).SumDim(1, false) // J
	return coherence.Mul(mask).Sum().Neg().Div(mask.Sum())
}

// InitMotifs sets the motif table to the k-means centres (§12.5) of the
// projected subgraph embeddings of graphs, computed in training mode
// without gradient as a step's first pass would, and returns those
// embeddings (one row of width d per subgraph). It needs at least K
// subgraphs in all.
func (o *ReleasedObjective) InitMotifs(graphs []*graph.Graph) (rows [][]float64, err error) {
	m, k := o.m, o.c.Motifs
	var flat []float64
	d := int(m.Motifs.Size(1))
	rng := hostRNG()
	for _, g := range graphs {
		z := torch.ScopedValue(func() []float32 {
			return torch.NoGradValue(func() []float32 {
				h := m.Encoder.Forward(g, true)
				sub := m.sampler.Sample(SampleInput{Graph: g, Embeddings: h, Perturb: true, RNG: rng, DType: m.Store.DType()})
				return torch.ToSlice[float32](o.Head.Forward(sub.LiveRows(sub.Pool(h))).ToDType(torch.Float32).To(torch.CPU, false))
			})
		})
		for _, v := range z {
			flat = append(flat, float64(v))
		}
	}
	n := len(flat) / d
	if n < k {
		return nil, &InitError{Subgraphs: n, Motifs: k}
	}
	for i := range n {
		rows = append(rows, flat[i*d:(i+1)*d])
	}
	_, centres := sample.KMeans(flat, n, d, k, o.r.KMeansRestarts, rng)
	torch.NoGrad(func() {
		t := torch.FromSlice(centres, int64(k), int64(d)).ToDType(m.Motifs.DType()).To(m.Motifs.Device(), false)
		m.Motifs.CopyFrom(t, false)
	})
	return rows, nil
}

// InitError says that too few subgraphs came out of the initialisation
// batches for k-means to place every motif.
type InitError struct{ Subgraphs, Motifs int }

func (e *InitError) Error() string {
	return fmt.Sprintf("motif initialisation: %d subgraphs in the first batches, fewer than the %d motifs", e.Subgraphs, e.Motifs)
}
