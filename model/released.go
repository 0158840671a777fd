package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/micrograph/micrograph/graph"
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

// The ablation samplers' draws under the released objective (§12.1): walks
// of [5, 40) steps, balls of 1 to 3 bonds.
const (
	releasedWalkMin, releasedWalkMax = 5, 40
	releasedHopsMin, releasedHopsMax = 1, 3
)

// releasedSubgraphs draws the subgraphs of §12.1 with the configured
// sampler. The spectral sampler clusters the atoms by h0, node embeddings
// computed without gradient. Host-side draws come from rng.
func (m *MicroGraph) releasedSubgraphs(g *graph.Graph, h0 *torch.Tensor, rng *rand.Rand) *ops.Subgraphs {
	c := m.Config
	mols := sample.Molecules(g.Host.Src, g.Host.RowPtr, g.Host.GraphPtr)
	lists := make([][][]int, len(mols))
	var emb []float32
	var d int
	if c.Sampler == SamplerSpectral {
		torch.NoGrad(func() { emb = torch.ToSlice[float32](h0.ToDType(torch.Float32).To(torch.CPU, false)) })
		d = int(h0.Size(1))
	}
	switch c.Sampler {
	case SamplerRandomWalk:
		for gi, mol := range mols {
			lists[gi] = sample.RandomWalks(mol, releasedWalkMin, releasedWalkMax, c.Eta, rng)
		}
	case SamplerKHop:
		for gi, mol := range mols {
			lists[gi] = sample.KHopBalls(mol, releasedHopsMin, releasedHopsMax, c.Eta, rng)
		}
	default:
		xs := make([][]float64, len(mols))
		for gi, mol := range mols {
			first, n := int(g.Host.GraphPtr[gi]), mol.Size()
			xs[gi] = make([]float64, n*d)
			for i, v := range emb[first*d : (first+n)*d] {
				xs[gi][i] = float64(v)
			}
		}
		// The host's cores: libtorch's threads wait for the subgraphs.
		lists = sample.SpectralSubgraphsOf(mols, xs, d, c.Released.ClusterTau, c.Eta, c.Released.KMeansRestarts, rng, runtime.GOMAXPROCS(0))
	}
	return ops.ListedSubgraphs(g, lists, m.Store.DType())
}

// hostRNG seeds the step's host-side draws (walks, balls, k-means starts)
// from libtorch's CPU generator, so that a checkpoint's generator state
// restores them too and a resumed run draws what an uninterrupted one does.
func hostRNG() *rand.Rand {
	var words []float64
	torch.NoGrad(func() {
		words = torch.ToSlice[float64](torch.Rand([]int64{2}, torch.Options{DType: torch.Float64, Device: torch.CPU}))
	})
	return rand.New(rand.NewPCG(math.Float64bits(words[0]), math.Float64bits(words[1])))
}

// forwardReleased computes the released objective of §12 on a batch:
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
func (m *MicroGraph) forwardReleased(g *graph.Graph, train bool) Output {
	c := m.Config
	rng := hostRNG()
	var h, h0 *torch.Tensor
	if train && c.Sampler == SamplerSpectral {
		// The sampler's own pass: training mode, no gradient, its own
		// dropout masks (§12.1).
		torch.NoGrad(func() { h0 = m.Encoder.Forward(g, true) })
	}
	h = m.Encoder.Forward(g, train)
	if h0 == nil {
		h0 = h
	}
	sub := m.releasedSubgraphs(g, h0, rng)
	e := ops.GraphPool(h, g, ops.MeanPool)
	s := sub.LiveRows(sub.Pool(h))
	zs, zg := m.Head.Forward(s), m.Head.Forward(e)
	cos := ops.Cosine(zs, m.Motifs) // J×K
	logP := cos.DivScalar(c.Tau).LogSoftmax(1)
	j := s.Size(0)
	var target *torch.Tensor
	torch.NoGrad(func() {
		if j > 0 {
			target, _ = ops.SinkhornAssign(cos, c.SinkhornLambda, c.SinkhornIters, nil)
		} else {
			target = torch.Zeros([]int64{0}, torch.Options{DType: torch.Int64, Device: h.Device()})
		}
	})
	l := Losses{
		Parts: []torch.Named{
			{Name: "motif", Tensor: ops.NLL(logP, target)},
			{Name: "contra", Tensor: ops.GraphSubgraphContrast(zg, zs, sub, c.Tau, nil)},
			{Name: "sampler", Tensor: m.samplerLoss(h, sub, cos)},
		},
		Subgraphs: sub.Count(),
	}
	l.Total = m.Objective(l)
	return Output{Losses: l, Assignment: Assignment{H: h}, E: e, Subgraphs: sub, S: s, LogP: logP}
}

// samplerLoss is §12.3's L_sampler: a subgraph is selected when it is among
// the ⌈f·J⌉ most similar to at least one motif (a column of cos, J×K, read
// without gradient), and L_sampler is minus the mean, over the selected
// subgraphs, of the mean cosine between their atoms' embeddings h (all
// ordered pairs, each atom with itself included), which is ‖mean of the
// atoms' unit vectors‖². It is 0 without subgraphs.
func (m *MicroGraph) samplerLoss(h *torch.Tensor, sub *ops.Subgraphs, cos *torch.Tensor) *torch.Tensor {
	j, k := int(cos.Size(0)), int(cos.Size(1))
	if j == 0 {
		return torch.Zeros(nil, torch.Options{DType: h.DType(), Device: h.Device()})
	}
	var sims []float32
	torch.NoGrad(func() { sims = torch.ToSlice[float32](cos.ToDType(torch.Float32).To(torch.CPU, false)) })
	top := int(math.Ceil(m.Config.Released.TopFraction * float64(j)))
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
func (m *MicroGraph) InitMotifs(graphs []*graph.Graph) (rows [][]float64, err error) {
	c := m.Config
	var flat []float64
	d := int(m.Motifs.Size(1))
	rng := hostRNG()
	for _, g := range graphs {
		s := torch.NewScope()
		torch.NoGrad(func() {
			h := m.Encoder.Forward(g, true)
			sub := m.releasedSubgraphs(g, h, rng)
			z := m.Head.Forward(sub.LiveRows(sub.Pool(h)))
			for _, v := range torch.ToSlice[float32](z.ToDType(torch.Float32).To(torch.CPU, false)) {
				flat = append(flat, float64(v))
			}
		})
		s.Close()
	}
	n := len(flat) / d
	if n < c.Motifs {
		return nil, &InitError{Subgraphs: n, Motifs: c.Motifs}
	}
	for i := range n {
		rows = append(rows, flat[i*d:(i+1)*d])
	}
	_, centres := sample.KMeans(flat, n, d, c.Motifs, c.Released.KMeansRestarts, rng)
	torch.NoGrad(func() {
		t := torch.FromSlice(centres, int64(c.Motifs), int64(d)).ToDType(m.Motifs.DType()).To(m.Motifs.Device(), false)
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
