package model_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/model/internal/reference"
	"github.com/micrograph/micrograph/ops/sample"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// synthDataset is the built-in synthetic dataset (no shared data needed).
func synthDataset(t testing.TB, molecules int) *data.Dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "synthetic")
	if _, err := synthetic.Write(dir, synthetic.Options{Molecules: molecules, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ds, _, err := data.Load(dir, data.LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// releasedConfig is §12's model at a test size.
func releasedConfig(sampler string) model.Config {
	c := model.ReleasedModelConfig()
	c.Encoder.Hidden, c.Encoder.Layers, c.Motifs, c.Sampler = 24, 2, 6, sampler
	return c
}

// The released objective's losses, computed by libtorch in float64, agree
// with the plain-Go reference computed from their definitions on the same
// embeddings and subgraphs, for each sampler, at non-default weights and
// top share, in evaluation and training mode.
func TestReleasedMatchesReference(t *testing.T) {
	ds := synthDataset(t, 64)
	for _, sampler := range []string{model.SamplerSpectral, model.SamplerRandomWalk, model.SamplerKHop} {
		for _, train := range []bool{false, true} {
			scope(t)
			b := collate(t, ds, span(0, 40))
			cfg := releasedConfig(sampler)
			cfg.Encoder.Dropout = 0 // the sampler's pass and the loss pass see the same h
			r := *cfg.Released
			r.MotifWeight, r.ContraWeight, r.SamplerWeight, r.TopFraction = 0.7, 0.3, 1.9, 0.25
			cfg.Released = &r
			torch.ManualSeed(3)
			m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
			if err != nil {
				t.Fatal(err)
			}
			out := m.Forward(b.Graph(testdevice.Get(t)), train)
			_, members := liveSubgraphs(out.Subgraphs)
			slotGraph := torch.ToSlice[int64](out.Subgraphs.LiveSlots)
			in := reference.ReleasedInput{
				H:  matrix(out.H),
				W1: matrix(m.Store.Get("projection_head.0.weight")), B1: vector(m.Store.Get("projection_head.0.bias")),
				W2: matrix(m.Store.Get("projection_head.2.weight")), M: matrix(m.Motifs),
				Subgraphs: members,
			}
			for _, s := range slotGraph {
				in.SubGraphOf = append(in.SubGraphOf, int(s/out.Subgraphs.PerGraph))
			}
			for g := range b.NumGraphs() {
				var atoms []int
				for a := b.GraphPtr[g]; a < b.GraphPtr[g+1]; a++ {
					atoms = append(atoms, int(a))
				}
				in.Molecules = append(in.Molecules, atoms)
			}
			ref := reference.Released(in, reference.ReleasedSettings{
				Tau: cfg.Tau, SinkhornLambda: cfg.SinkhornLambda, SinkhornIters: cfg.SinkhornIters, TopFraction: r.TopFraction,
				MotifWeight: r.MotifWeight, ContraWeight: r.ContraWeight, SamplerWeight: r.SamplerWeight,
			})
			if len(members) < 20 {
				t.Fatalf("%s: only %d subgraphs in 40 molecules", sampler, len(members))
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"motif", out.Part("motif").Item(), ref.Motif},
				{"contra", out.Part("contra").Item(), ref.Contra},
				{"sampler", out.Part("sampler").Item(), ref.Sampler},
				{"loss", out.Total.Item(), ref.Total},
			} {
				if !closeRel(c.got, c.want, 1e-9) {
					t.Errorf("%s train=%v: %s = %.12g, reference %.12g", sampler, train, c.name, c.got, c.want)
				}
			}
			for j, members := range members {
				if len(members) < cfg.Eta && sampler != model.SamplerSpectral {
					t.Errorf("%s: subgraph %d has %d atoms, under η", sampler, j, len(members))
				}
			}
			m.Free()
		}
	}
}

// The released objective's gradient with respect to the projection head's
// first bias and the motif table matches central finite differences of its
// loss (float64, evaluation mode, fixed subgraphs: the same seed draws the
// same ones).
func TestReleasedGradientMatchesFiniteDifferences(t *testing.T) {
	scope(t)
	ds := synthDataset(t, 40)
	b := collate(t, ds, span(0, 24))
	g := b.Graph(testdevice.Get(t))
	cfg := releasedConfig(model.SamplerKHop)
	torch.ManualSeed(4)
	m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	loss := func() float64 {
		torch.ManualSeed(9) // the same balls every evaluation
		return torch.NoGradValue(func() float64 { return m.Forward(g, false).Total.Item() })
	}
	torch.ManualSeed(9)
	m.Forward(g, false).Total.Backward()
	for _, name := range []string{"projection_head.0.bias", "motif_embeddings", "encoder.convs.1.lin.bias"} {
		p := m.Store.Get(name)
		grad := vector(p.Grad())
		flat := p.Reshape(-1)
		for _, i := range []int64{0, 5, 11} {
			at := flat.Narrow(0, i, 1)
			x := at.Item()
			const h = 1e-6
			torch.NoGrad(func() { at.CopyFrom(torch.Full([]int64{1}, x+h, torch.Options{DType: torch.Float64}), false) })
			up := loss()
			torch.NoGrad(func() { at.CopyFrom(torch.Full([]int64{1}, x-h, torch.Options{DType: torch.Float64}), false) })
			down := loss()
			torch.NoGrad(func() { at.CopyFrom(torch.Full([]int64{1}, x, torch.Options{DType: torch.Float64}), false) })
			fd := (up - down) / (2 * h)
			if math.Abs(fd-grad[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Errorf("%s[%d]: gradient %.9g, finite difference %.9g", name, i, grad[i], fd)
			}
		}
	}
}

// InitMotifs places the motif table at k-means centres of the projected
// subgraphs it returns: every centre is the mean of the subgraphs nearest to
// it (a fixed point of Lloyd's iteration, checked here independently), and
// no centre is left without subgraphs.
func TestInitMotifsAreKMeansCentres(t *testing.T) {
	scope(t)
	ds := synthDataset(t, 64)
	cfg := releasedConfig(model.SamplerRandomWalk)
	cfg.Encoder.Dropout = 0
	torch.ManualSeed(6)
	m, err := model.New(cfg, testdevice.Get(t), torch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	graphs := []*graph.Graph{collate(t, ds, span(0, 32)).Graph(testdevice.Get(t)), collate(t, ds, span(32, 64)).Graph(testdevice.Get(t))}
	rows, err := m.Objective.(*model.ReleasedObjective).InitMotifs(graphs)
	if err != nil {
		t.Fatal(err)
	}
	centres := matrix(m.Motifs)
	if len(rows) < 3*cfg.Motifs {
		t.Fatalf("%d subgraphs", len(rows))
	}
	sums := make([][]float64, len(centres))
	counts := make([]int, len(centres))
	for _, r := range rows {
		best, bestD := 0, math.Inf(1)
		for c, ctr := range centres {
			d := 0.0
			for k := range r {
				d += (r[k] - ctr[k]) * (r[k] - ctr[k])
			}
			if d < bestD {
				best, bestD = c, d
			}
		}
		if sums[best] == nil {
			sums[best] = make([]float64, len(r))
		}
		for k := range r {
			sums[best][k] += r[k]
		}
		counts[best]++
	}
	for c := range centres {
		if counts[c] == 0 {
			t.Fatalf("motif %d is nearest to no subgraph", c)
		}
		for k := range centres[c] {
			if mean := sums[c][k] / float64(counts[c]); math.Abs(mean-centres[c][k]) > 1e-6 {
				t.Fatalf("motif %d, dimension %d: %v, mean of its subgraphs %v", c, k, centres[c][k], mean)
			}
		}
	}
}

// The subgraphs the released objective trains on are its sampler's draws on
// the batch (docs/method.md §12.1), checked two ways on 40 synthetic
// molecules for each sampler, in evaluation and training mode (dropout 0,
// so that the spectral sampler's own pass gives the loss pass's h):
//
//   - they are what package sample draws from the batch's molecules with
//     the configured η, cluster temperature and k-means starts, from a PCG
//     seeded by the step's first two draws of libtorch's CPU generator, on
//     the embeddings h read in float32, molecule after molecule;
//   - independently of package sample, by breadth-first search on the
//     batch's bonds: every subgraph lies in one molecule and is connected;
//     it has at least η atoms unless it is a spectral molecule's one
//     fallback cluster; a molecule's spectral pieces are disjoint; walks and
//     balls number at most c = ⌊√(n/4)⌋ + 1 per molecule; a ball is every
//     atom within k ∈ {1, 2, 3} bonds of one of its atoms.
func TestReleasedSubgraphsAreTheSamplersDraws(t *testing.T) {
	ds := synthDataset(t, 64)
	b := collate(t, ds, span(0, 40))
	nb := make([][]int, b.NumAtoms()) // bonds, batch-wide
	for e := range b.NumEdges() {
		nb[b.EdgeSrc[e]] = append(nb[b.EdgeSrc[e]], int(b.EdgeDst[e]))
	}
	molOf := make([]int, b.NumAtoms())
	for g := range b.NumGraphs() {
		for a := b.GraphPtr[g]; a < b.GraphPtr[g+1]; a++ {
			molOf[a] = g
		}
	}
	// within counts the atoms of set reachable from set[0] inside set;
	// ball lists the atoms within k bonds of a.
	within := func(set []int) int {
		in := map[int]bool{}
		for _, a := range set {
			in[a] = true
		}
		seen := map[int]bool{set[0]: true}
		for q := []int{set[0]}; len(q) > 0; q = q[1:] {
			for _, c := range nb[q[0]] {
				if in[c] && !seen[c] {
					seen[c] = true
					q = append(q, c)
				}
			}
		}
		return len(seen)
	}
	ball := func(a, k int) []int {
		dist := map[int]int{a: 0}
		for q := []int{a}; len(q) > 0; q = q[1:] {
			if dist[q[0]] == k {
				continue
			}
			for _, c := range nb[q[0]] {
				if _, ok := dist[c]; !ok {
					dist[c] = dist[q[0]] + 1
					q = append(q, c)
				}
			}
		}
		return slices.Sorted(maps.Keys(dist))
	}
	for _, sampler := range []string{model.SamplerSpectral, model.SamplerRandomWalk, model.SamplerKHop} {
		for _, train := range []bool{false, true} {
			scope(t)
			cfg := releasedConfig(sampler)
			cfg.Encoder.Dropout = 0
			torch.ManualSeed(3)
			m, err := model.New(cfg, torch.CPU, torch.Float64)
			if err != nil {
				t.Fatal(err)
			}
			g := b.Graph(torch.CPU)
			torch.ManualSeed(21)
			out := m.Forward(g, train)
			_, got := liveSubgraphs(out.Subgraphs)
			for _, s := range got {
				slices.Sort(s)
			}

			// What package sample draws.
			torch.ManualSeed(21)
			var words []float64
			torch.NoGrad(func() {
				words = torch.ToSlice[float64](torch.Rand([]int64{2}, torch.Options{DType: torch.Float64, Device: torch.CPU}))
			})
			rng := rand.New(rand.NewPCG(math.Float64bits(words[0]), math.Float64bits(words[1])))
			h := torch.ToSlice[float32](out.H.ToDType(torch.Float32))
			d := cfg.Encoder.Hidden
			var want [][]int
			perMol := make([]int, b.NumGraphs())
			for gi, mol := range sample.Molecules(g.Host.Src, g.Host.RowPtr, g.Host.GraphPtr) {
				first, n := int(b.GraphPtr[gi]), mol.Size()
				var lists [][]int
				switch sampler {
				case model.SamplerRandomWalk:
					lists = sample.RandomWalks(mol, 5, 40, cfg.Eta, rng)
				case model.SamplerKHop:
					lists = sample.KHopBalls(mol, 1, 3, cfg.Eta, rng)
				default:
					x := make([]float64, n*d)
					for i, v := range h[first*d : (first+n)*d] {
						x[i] = float64(v)
					}
					lists = sample.SpectralSubgraphs(mol, x, d, cfg.Released.ClusterTau, cfg.Eta, cfg.Released.KMeansRestarts, rng)
				}
				for _, l := range lists {
					s := make([]int, len(l))
					for i, a := range l {
						s[i] = first + a
					}
					want = append(want, s)
				}
				perMol[gi] = len(lists)
			}
			if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
				t.Errorf("%s train=%v: the objective's %d subgraphs are not the sampler's %d on the batch", sampler, train, len(got), len(want))
				for j := range min(len(got), len(want)) {
					if !slices.Equal(got[j], want[j]) {
						t.Errorf("first difference, subgraph %d: %v, sampler %v", j, got[j], want[j])
						break
					}
				}
			}

			// What any subgraph of §12.1 must be.
			count := make([]int, b.NumGraphs())
			used := map[int]bool{}
			for j, s := range got {
				mol := molOf[s[0]]
				n := int(b.GraphPtr[mol+1] - b.GraphPtr[mol])
				count[mol]++
				for _, a := range s {
					if molOf[a] != mol {
						t.Fatalf("%s train=%v: subgraph %d %v spans molecules %d and %d", sampler, train, j, s, mol, molOf[a])
					}
				}
				fallback := sampler == model.SamplerSpectral && perMol[mol] == 1
				if len(s) < cfg.Eta && !fallback {
					t.Errorf("%s train=%v: subgraph %d %v has %d atoms, under η = %d", sampler, train, j, s, len(s), cfg.Eta)
				}
				if !fallback && within(s) != len(s) {
					t.Errorf("%s train=%v: subgraph %d %v is not connected", sampler, train, j, s)
				}
				switch sampler {
				case model.SamplerSpectral:
					for _, a := range s {
						if used[a] {
							t.Errorf("%s train=%v: atom %d is in two pieces", sampler, train, a)
						}
						used[a] = true
					}
				case model.SamplerKHop:
					isBall := false
					for _, a := range s {
						for k := 1; k <= 3 && !isBall; k++ {
							isBall = slices.Equal(ball(a, k), s)
						}
					}
					if !isBall {
						t.Errorf("%s train=%v: subgraph %d %v is no ball of 1 to 3 bonds", sampler, train, j, s)
					}
				}
				if sampler != model.SamplerSpectral && count[mol] > sample.Count(n) {
					t.Errorf("%s train=%v: molecule %d of %d atoms has %d subgraphs, more than %d", sampler, train, mol, n, count[mol], sample.Count(n))
				}
			}
			if len(got) < 20 {
				t.Errorf("%s train=%v: only %d subgraphs in 40 molecules", sampler, train, len(got))
			}
			m.Free()
		}
	}
}
