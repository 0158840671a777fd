package diagnose

import (
	"fmt"
	"math"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// diagAccumulator gathers the per-batch figures.
type diagAccumulator struct {
	m    *diagModel
	d    int
	e, z []float64 // graph embeddings and W_e·e, row by row
	node *metrics.NodeSpread

	sinkhorn, raw         []int
	agree, atoms          int
	maxQ, motifsPerMol    []float64
	cut, orthoAll, orthoJ []float64

	subs map[string]*subgraphAcc

	normZ, normShift, normVar [][]float64 // [layer][batch]
	drop, bn, train           []float64
}

type subgraphAcc struct {
	perMol, atoms, coverage, components, maxP, positive []float64
	uncovered, totalAtoms                               int
	alignE, alignZ, chance                              []float64
	haveZ                                               bool
}

func newDiagAccumulator(m *diagModel, molecules int) *diagAccumulator {
	d := m.cfg.Encoder.Hidden
	layers := len(m.enc.Norms)
	a := &diagAccumulator{m: m, d: d, node: metrics.NewNodeSpread(d), subs: map[string]*subgraphAcc{},
		e: make([]float64, 0, molecules*d), normZ: make([][]float64, layers), normShift: make([][]float64, layers), normVar: make([][]float64, layers)}
	if m.full != nil {
		k := m.cfg.Motifs
		a.sinkhorn, a.raw = make([]int, k), make([]int, k)
		a.subs[model.SamplerMotif] = &subgraphAcc{}
	}
	a.subs[model.SamplerRandomWalk] = &subgraphAcc{}
	return a
}

func appendFloats(dst []float64, t *torch.Tensor) []float64 {
	for _, v := range torch.ToSlice[float32](t.ToDType(torch.Float32)) {
		dst = append(dst, float64(v))
	}
	return dst
}

// batch measures one batch in evaluation mode.
func (a *diagAccumulator) batch(b *feed.Batch, dev torch.Device) error {
	s := torch.NewScope()
	defer s.Close()
	return torch.NoGradValue(func() error { return a.measure(b, b.Graph(dev)) })
}

func (a *diagAccumulator) measure(b *feed.Batch, g *graph.Graph) error {
	m, cfg := a.m, a.m.cfg
	var h, e, z *torch.Tensor
	var out model.Output
	if m.full != nil {
		out = m.forward(g, false)
		h, e = out.H, out.E
		z = m.paper.We.Forward(e)
		a.z = appendFloats(a.z, z)
	} else {
		h = m.enc.Forward(g, false)
		e = ops.GraphPool(h, g, ops.MeanPool)
	}
	hHost := torch.ToSlice[float32](h.ToDType(torch.Float32))
	a.node.Add(hHost, b.GraphPtr)
	eHost := appendFloats(nil, e)
	a.e = append(a.e, eHost...)

	if m.full != nil {
		a.motifs(b, g, out)
		if err := a.subgraphs(m.motifs.Name(), b, out.Subgraphs, out.S, eHost, z, out.LogP); err != nil {
			return err
		}
	}
	walks, err := cfg.NewObjective().Sampler(model.SamplerRandomWalk)
	if err != nil {
		return err
	}
	rw := walks.Sample(model.SampleInput{Graph: g, DType: torch.Float32})
	if err := a.subgraphs(walks.Name(), b, rw, rw.LiveRows(rw.Pool(h)), eHost, z, nil); err != nil {
		return err
	}

	// Batch norm: the input of every norm against its running statistics.
	m.enc.Probe(g, model.ForwardProbe{NormInput: func(l int, x *torch.Tensor) {
		n := m.enc.Norms[l]
		std := n.RunningVar.AddScalar(n.Eps).Sqrt()
		mean := x.MeanDim(0, false)
		variance := x.Sub(mean).PowScalar(2).MeanDim(0, false)
		a.normZ[l] = append(a.normZ[l], x.Sub(n.RunningMean).Div(std).Abs().Mean().Item())
		a.normShift[l] = append(a.normShift[l], mean.Sub(n.RunningMean).Abs().Div(std).Mean().Item())
		a.normVar[l] = append(a.normVar[l], math.Exp(variance.AddScalar(n.Eps).Div(n.RunningVar.AddScalar(n.Eps)).Log().Mean().Item()))
	}})
	// Dropout and batch statistics, each alone and together.
	for _, c := range []struct {
		probe model.ForwardProbe
		dst   *[]float64
	}{
		{model.ForwardProbe{Dropout: true}, &a.drop},
		{model.ForwardProbe{BatchStats: true}, &a.bn},
		{model.ForwardProbe{BatchStats: true, Dropout: true}, &a.train},
	} {
		other := ops.GraphPool(m.enc.Probe(g, c.probe), g, ops.MeanPool)
		*c.dst = appendFloats(*c.dst, ops.NormalizeRows(e).Mul(ops.NormalizeRows(other)).SumDim(1, false))
	}
	return nil
}

// motifs records the node-to-motif assignment of a batch.
func (a *diagAccumulator) motifs(b *feed.Batch, g *graph.Graph, out model.Output) {
	k := a.m.cfg.Motifs
	sink := torch.ToSlice[int64](out.Motif)
	raw := torch.ToSlice[int64](out.Q.Argmax(1, false))
	for i, mo := range sink {
		a.sinkhorn[mo]++
		a.raw[raw[i]]++
		if raw[i] == mo {
			a.agree++
		}
	}
	a.atoms += len(sink)
	a.maxQ = appendFloats(a.maxQ, out.Q.Amax(1, false))
	for mol := 0; mol+1 < len(b.GraphPtr); mol++ {
		seen := make([]bool, k)
		n := 0
		for _, mo := range sink[b.GraphPtr[mol]:b.GraphPtr[mol+1]] {
			if !seen[mo] {
				seen[mo] = true
				n++
			}
		}
		a.motifsPerMol = append(a.motifsPerMol, float64(n))
	}
	cut, ortho := ops.MinCut(out.Q, g, nil)
	_, orthoJ := ops.MinCut(out.Q, g, out.Subgraphs.Live.Reshape(g.NumGraphs, int64(k)))
	a.cut = append(a.cut, cut.Item())
	a.orthoAll = append(a.orthoAll, ortho.Item())
	a.orthoJ = append(a.orthoJ, orthoJ.Item())
}

// subgraphs records one sampler's subgraphs of a batch: sizes, coverage,
// connectivity, alignment with their molecule and the contrast's softmax.
// s and logP (subgraph-to-motif, may be nil) have a row per live slot, in
// order; z (W_e·e) may be nil.
func (a *diagAccumulator) subgraphs(sampler string, b *feed.Batch, sub *ops.Subgraphs, s *torch.Tensor, eHost []float64, z, logP *torch.Tensor) error {
	acc := a.subs[sampler]
	d, per := a.d, int(sub.PerGraph)
	node := torch.ToSlice[int64](sub.Node)
	slot := torch.ToSlice[int64](sub.Slot)
	weight := torch.ToSlice[float32](sub.Weight.ToDType(torch.Float32))
	live := torch.ToSlice[bool](sub.Live)
	if len(live) != b.NumGraphs()*per {
		return fmt.Errorf("%s sampler: %d slots for %d molecules", sampler, len(live), b.NumGraphs())
	}
	members := make([][]int64, len(live))
	covered := make([]bool, b.NumAtoms())
	for i, j := range slot {
		if weight[i] > 0 && live[j] {
			members[j] = append(members[j], node[i])
			covered[node[i]] = true
		}
	}
	for _, c := range covered {
		if !c {
			acc.uncovered++
		}
	}
	acc.totalAtoms += len(covered)
	// Connected components of each subgraph, over the bonds among its members.
	stamp := make([]int, b.NumAtoms())
	parent := make([]int64, b.NumAtoms())
	var find func(x int64) int64
	find = func(x int64) int64 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	sHost := appendFloats(nil, s)
	var logPHost []float32
	if logP != nil {
		logPHost = torch.ToSlice[float32](logP.ToDType(torch.Float32))
	}
	k := a.m.cfg.Motifs
	count := make([]int, b.NumGraphs())
	var ePairs, sPairs []float64
	var rowMol []int // the molecule of each row of s and logP (the live slots)
	row := -1
	for j, mem := range members {
		if !live[j] {
			continue
		}
		row++
		mol := j / per
		rowMol = append(rowMol, mol)
		count[mol]++
		for _, v := range mem {
			stamp[v], parent[v] = j+1, v
		}
		for _, v := range mem {
			for e := b.RowPtr[v]; e < b.RowPtr[v+1]; e++ {
				if u := b.EdgeSrc[e]; stamp[u] == j+1 {
					parent[find(u)] = find(v)
				}
			}
		}
		roots := 0
		for _, v := range mem {
			if find(v) == v {
				roots++
			}
		}
		size := float64(len(mem))
		molSize := float64(b.GraphPtr[mol+1] - b.GraphPtr[mol])
		acc.atoms = append(acc.atoms, size)
		acc.coverage = append(acc.coverage, size/molSize)
		acc.components = append(acc.components, float64(roots))
		if logPHost != nil {
			best := math.Inf(-1)
			for _, v := range logPHost[row*k : (row+1)*k] {
				best = math.Max(best, float64(v))
			}
			acc.maxP = append(acc.maxP, math.Exp(best))
		}
		ePairs = append(ePairs, eHost[mol*d:(mol+1)*d]...)
		sPairs = append(sPairs, sHost[row*d:(row+1)*d]...)
	}
	for _, c := range count {
		acc.perMol = append(acc.perMol, float64(c))
	}
	pairs := len(ePairs) / d
	if pairs == 0 {
		return nil
	}
	// Sums over pairs, so that finish can weigh batches by their pairs.
	acc.alignE = append(acc.alignE, metrics.Alignment(ePairs, sPairs, pairs, d)*float64(pairs))
	if z == nil {
		return nil
	}
	acc.haveZ = true
	zHost := appendFloats(nil, z)
	var zPairs []float64
	for _, mol := range rowMol {
		zPairs = append(zPairs, zHost[mol*d:(mol+1)*d]...)
	}
	acc.alignZ = append(acc.alignZ, metrics.Alignment(zPairs, sPairs, pairs, d)*float64(pairs))
	// Softmax of Y over the batch's live subgraphs; mass on the own ones.
	prob := torch.ToSlice[float32](ops.Cosine(z, s).DivScalar(a.m.cfg.Tau).Softmax(1)) // B×J
	mass := make([]float64, len(count))
	for r, mol := range rowMol {
		mass[mol] += float64(prob[mol*pairs+r])
	}
	for mol, c := range count {
		if c > 0 {
			acc.positive = append(acc.positive, mass[mol])
			acc.chance = append(acc.chance, float64(c)/float64(pairs))
		}
	}
	return nil
}

// finish turns the accumulated figures into r's.
func (a *diagAccumulator) finish(r *Diagnosis) {
	n, d := len(a.e)/a.d, a.d
	r.Graph = embeddingStats(a.e, n, d)
	if a.z != nil {
		p := embeddingStats(a.z, n, d)
		r.Projected = &p
	}
	r.Nodes = NodeStats{
		BetweenGraphShare: metrics.Value(a.node.BetweenGraphShare()),
		CosineSameGraph:   metrics.Value(a.node.CosineSameGraph()),
		CosineOtherGraphs: metrics.Value(a.node.CosineOtherGraphs()),
	}
	if a.m.full != nil {
		r.Motifs = &MotifStats{
			Sinkhorn: metrics.UsageOf(a.sinkhorn), RawArgmax: metrics.UsageOf(a.raw),
			Agreement: metrics.Value(float64(a.agree) / float64(a.atoms)),
			MaxQ:      metrics.QuantilesOf(a.maxQ), MotifsPerMolecule: metrics.QuantilesOf(a.motifsPerMol),
			Cut: metrics.Value(metrics.Mean(a.cut)), OrthoAll: metrics.Value(metrics.Mean(a.orthoAll)), OrthoSelected: metrics.Value(metrics.Mean(a.orthoJ)),
		}
	}
	for _, name := range []string{model.SamplerMotif, model.SamplerRandomWalk} {
		acc, ok := a.subs[name]
		if !ok {
			continue
		}
		pairs := float64(len(acc.atoms))
		st := SubgraphStats{
			Sampler: name, PerMolecule: metrics.QuantilesOf(acc.perMol), Atoms: metrics.QuantilesOf(acc.atoms),
			Coverage: metrics.QuantilesOf(acc.coverage), Components: metrics.QuantilesOf(acc.components),
			Over50: metrics.Value(shareAbove(acc.coverage, 0.5)), Over80: metrics.Value(shareAbove(acc.coverage, 0.8)),
			Uncovered:  metrics.Value(float64(acc.uncovered) / float64(acc.totalAtoms)),
			MaxP:       metrics.QuantilesOf(acc.maxP),
			AlignGraph: metrics.Value(sumOf(acc.alignE) / pairs), AlignProjected: metrics.Value(math.NaN()),
			PositiveMass: metrics.QuantilesOf(acc.positive), Chance: metrics.Value(metrics.Mean(acc.chance)),
		}
		if acc.haveZ {
			st.AlignProjected = metrics.Value(sumOf(acc.alignZ) / pairs)
		}
		r.Subgraphs = append(r.Subgraphs, st)
	}
	for l := range a.normZ {
		r.BatchNorm = append(r.BatchNorm, NormShift{Layer: l,
			MeanAbsZ: metrics.Value(metrics.Mean(a.normZ[l])), Shift: metrics.Value(metrics.Mean(a.normShift[l])), VarRatio: metrics.Value(metrics.Mean(a.normVar[l]))})
	}
	r.Dropout = DropoutStats{Dropout: metrics.QuantilesOf(a.drop), BatchStats: metrics.QuantilesOf(a.bn), Train: metrics.QuantilesOf(a.train)}
}

func embeddingStats(x []float64, n, d int) EmbeddingStats {
	sv := metrics.CentredSingularValues(x, n, d)
	top := math.NaN()
	if s := sumOf(sv); s > 0 {
		top = sv[0] / s
	}
	return EmbeddingStats{
		EffectiveRank: metrics.Value(metrics.EffectiveRank(sv)), TopShare: metrics.Value(top),
		Uniformity: metrics.Value(metrics.Uniformity(x, n, d)), MeanCosine: metrics.Value(metrics.MeanPairwiseCosine(x, n, d)),
		Std: metrics.QuantilesOf(metrics.ColumnStds(x, n, d)),
	}
}

func sumOf(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func shareAbove(xs []float64, t float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	n := 0
	for _, x := range xs {
		if x > t {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}
