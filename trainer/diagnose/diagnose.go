package diagnose

// Run measures what a pre-trained (or random) encoder makes of a fixed
// sample of molecules: collapse of graph and node embeddings, motif usage,
// subgraph sizes, saturation of the softmaxes, the gradient each loss part
// sends into the encoder, batch-norm drift, dropout, and linear probes with
// and without the projection W_e. The figures of docs/fidelity.md come from it.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// diagnoseStream separates the molecule sample's permutation from other uses
// of the seed.
const diagnoseStream = 0x6469616720 // "diag "

// Options say which encoder is measured on which molecules. Exactly
// one of Checkpoint, Encoder and Random is set.
type Options struct {
	Checkpoint string        `json:"checkpoint"` // a pre-training checkpoint: the whole model
	Encoder    string        `json:"encoder"`    // an exported encoder: only the encoder's measures
	Random     *model.Config `json:"random"`     // a freshly initialised model of this configuration, from Seed
	// Seed draws the molecule sample, the random walks, the dropout masks
	// and a random model.
	Seed uint64 `json:"seed"`

	Data       string           `json:"data"` // dataset to sample
	Dataset    data.OpenOptions `json:"-"`
	Molecules  int              `json:"molecules"`   // molecules sampled (all usable ones when fewer)
	BatchSize  int              `json:"batch_size"`  // molecules per forward pass (Sinkhorn and the contrast are per batch)
	Probes     []string         `json:"probes"`      // labelled datasets for linear probes on e and W_e·e
	ProbeSeeds int              `json:"probe_seeds"` // classifier seeds per probe

	Device   string    `json:"device"`
	Threads  int       `json:"threads"`
	Progress io.Writer `json:"-"` // one line per stage; nil is silent
}

// Validate reports the first setting that cannot work, naming its field
// (a random model's by its own names, inside "random").
func (o Options) Validate() error {
	sources := 0
	for _, set := range []bool{o.Checkpoint != "", o.Encoder != "", o.Random != nil} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return errors.New("want exactly one of a checkpoint, an exported encoder and a random model")
	}
	if o.Random != nil {
		if err := o.Random.Validate(); err != nil {
			return field.Within("random", err)
		}
	}
	switch {
	case o.Data == "":
		return field.Errorf("data", o.Data, "must name a dataset folder or CSV file")
	case o.Molecules < 2:
		return field.Errorf("molecules", o.Molecules, "must be at least 2")
	case o.BatchSize < 2:
		return field.Errorf("batch_size", o.BatchSize, "must be at least 2")
	case o.ProbeSeeds < 1:
		return field.Errorf("probe_seeds", o.ProbeSeeds, "must be positive")
	case o.Threads < 0:
		return field.Errorf("threads", o.Threads, "must not be negative")
	}
	return field.Check("device", o.Device, torch.CheckDeviceName(o.Device))
}

// Diagnosis is what Run measured, written as JSON.
type Diagnosis struct {
	Source    string              `json:"source"` // checkpoint or encoder path, or "random"
	Step      int64               `json:"step"`
	Model     *model.Config       `json:"model,omitempty"` // without it only the encoder is known
	Encoder   model.EncoderConfig `json:"encoder"`
	Data      string              `json:"data"`
	Seed      uint64              `json:"seed"`
	BatchSize int                 `json:"batch_size"`
	Molecules int                 `json:"molecules"`
	Atoms     int                 `json:"atoms"`
	Sizes     metrics.Quantiles   `json:"molecule_atoms"`
	Graph     EmbeddingStats      `json:"graph"`               // e, mean-pooled h
	Projected *EmbeddingStats     `json:"projected,omitempty"` // W_e·e
	Nodes     NodeStats           `json:"nodes"`
	Motifs    *MotifStats         `json:"motifs,omitempty"`
	Subgraphs []SubgraphStats     `json:"subgraphs"`
	Gradients []PartGradient      `json:"gradients,omitempty"`
	BatchNorm []NormShift         `json:"batch_norm"`
	Dropout   DropoutStats        `json:"dropout"`
	Probes    []ProbeResult       `json:"probes,omitempty"`
	Seconds   float64             `json:"seconds"`
	Notes     map[string]string   `json:"notes"`
}

// EmbeddingStats describe a set of embedding vectors (one per molecule).
type EmbeddingStats struct {
	EffectiveRank metrics.Value     `json:"effective_rank"` // of the centred matrix
	TopShare      metrics.Value     `json:"top_share"`      // largest singular value / their sum
	Uniformity    metrics.Value     `json:"uniformity"`     // Wang & Isola, t = 2
	MeanCosine    metrics.Value     `json:"mean_cosine"`    // over pairs of molecules
	Std           metrics.Quantiles `json:"std"`            // per dimension
}

// NodeStats say how node embeddings spread within and between molecules.
type NodeStats struct {
	BetweenGraphShare metrics.Value `json:"between_graph_share"` // variance explained by the molecule
	CosineSameGraph   metrics.Value `json:"cosine_same_graph"`
	CosineOtherGraphs metrics.Value `json:"cosine_other_graphs"`
}

// MotifStats are the node-to-motif assignment's figures (full models only).
type MotifStats struct {
	Sinkhorn          metrics.Usage     `json:"sinkhorn"`   // argmax of the balanced assignment, per atom
	RawArgmax         metrics.Usage     `json:"raw_argmax"` // argmax of Q, per atom
	Agreement         metrics.Value     `json:"agreement"`  // share of atoms where both agree
	MaxQ              metrics.Quantiles `json:"max_q"`
	MotifsPerMolecule metrics.Quantiles `json:"motifs_per_molecule"` // distinct Sinkhorn motifs among a molecule's atoms
	// MinCut's parts, mean over batches: the cut, and the orthogonality
	// term over all K columns (the default) and over the columns of the
	// motifs that form subgraphs (the paper's).
	Cut           metrics.Value `json:"cut"`
	OrthoAll      metrics.Value `json:"ortho_all"`
	OrthoSelected metrics.Value `json:"ortho_selected"`
}

// SubgraphStats describe one sampler's subgraphs, and the contrast on them.
type SubgraphStats struct {
	Sampler     string            `json:"sampler"`
	PerMolecule metrics.Quantiles `json:"per_molecule"`
	Atoms       metrics.Quantiles `json:"atoms"`
	Coverage    metrics.Quantiles `json:"coverage"` // atoms of the subgraph / atoms of its molecule
	Over50      metrics.Value     `json:"over_50"`  // share of subgraphs covering more than half their molecule
	Over80      metrics.Value     `json:"over_80"`
	Components  metrics.Quantiles `json:"components"` // connected components per subgraph
	Uncovered   metrics.Value     `json:"uncovered"`  // share of atoms in no subgraph
	MaxP        metrics.Quantiles `json:"max_p"`      // motif sampler: max_k P of each subgraph
	// Wang & Isola alignment of each subgraph with its molecule: s against
	// e, and against W_e·e (which the contrast compares).
	AlignGraph     metrics.Value `json:"align_graph"`
	AlignProjected metrics.Value `json:"align_projected"`
	// PositiveMass is, per molecule with a subgraph, the softmax mass of row
	// i of Y = cos(W_e e_i, s_j)/τ on its own subgraphs; Chance is that
	// mass if Y were constant (own subgraphs / all of the batch's), averaged.
	PositiveMass metrics.Quantiles `json:"positive_mass"`
	Chance       metrics.Value     `json:"chance"`
}

// PartGradient is the norm of the gradient a weighted loss part sends into
// the encoder's parameters on one training-mode batch.
type PartGradient struct {
	Part string        `json:"part"`
	Norm metrics.Value `json:"norm"`
}

// NormShift compares norm l's running statistics with the batches' own:
// MeanAbsZ is the mean |x − running mean| / running std over entries (about
// 0.80 for a standard normal), Shift the mean over channels of |batch mean −
// running mean| / running std, VarRatio the geometric mean over channels of
// batch variance / running variance; all averaged over batches.
type NormShift struct {
	Layer    int           `json:"layer"`
	MeanAbsZ metrics.Value `json:"mean_abs_z"`
	Shift    metrics.Value `json:"shift"`
	VarRatio metrics.Value `json:"var_ratio"`
}

// DropoutStats are per-molecule cosines between e in evaluation mode and e
// with dropout only, with batch statistics only, and in training mode.
type DropoutStats struct {
	Dropout    metrics.Quantiles `json:"dropout"`
	BatchStats metrics.Quantiles `json:"batch_stats"`
	Train      metrics.Quantiles `json:"train"`
}

// ProbeResult is a linear probe (LinearEval's classifier, docs/method.md §7) on
// one labelled dataset's scaffold split, on e or on W_e·e.
type ProbeResult struct {
	Data     string          `json:"data"`
	Features string          `json:"features"` // "e" or "W_e·e"
	Test     metrics.Stat    `json:"test"`
	Runs     []metrics.Value `json:"runs"`
}

// diagModel is the measured model: always an encoder, and for checkpoints
// and random models the whole MICRO-Graph model around it.
type diagModel struct {
	full *model.MicroGraph
	enc  *model.DeeperGCN
	cfg  model.Config
	free func()
}

// Run measures opt's encoder on a seeded sample of opt.Data; see
// Diagnosis.
func Run(opt Options) (_ *Diagnosis, err error) {
	defer torch.Recover(&err)
	start := time.Now()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := torch.ParseDevice(opt.Device)
	if err != nil {
		return nil, err
	}
	if opt.Threads > 0 {
		torch.SetNumThreads(opt.Threads)
	}
	torch.ManualSeed(opt.Seed)
	dm, r, err := loadDiagModel(opt, dev)
	if err != nil {
		return nil, err
	}
	defer dm.free()
	ds, err := data.Open(opt.Data, opt.Dataset)
	if err != nil {
		return nil, err
	}
	r.Data, r.Seed, r.BatchSize = opt.Data, opt.Seed, opt.BatchSize
	usable, _ := data.PretrainFilter(ds, ds.All(), dm.cfg.Eta)
	rand.New(rand.NewPCG(opt.Seed, diagnoseStream)).Shuffle(len(usable), func(i, j int) { usable[i], usable[j] = usable[j], usable[i] })
	sample := usable[:min(opt.Molecules, len(usable))]
	if len(sample) < 2 {
		return nil, fmt.Errorf("dataset %s: fewer than 2 molecules of at least η=%d atoms with bonds", opt.Data, dm.cfg.Eta)
	}
	r.Molecules = len(sample)
	sizes := make([]float64, len(sample))
	for i, g := range sample {
		sizes[i] = float64(ds.NumAtoms(int(g)))
		r.Atoms += ds.NumAtoms(int(g))
	}
	r.Sizes = metrics.QuantilesOf(sizes)
	progress := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "diagnose: "+format+"\n", args...)
		}
	}

	acc := newDiagAccumulator(dm, len(sample))
	var b feed.Batch
	for lo := 0; lo < len(sample); lo += opt.BatchSize {
		if err := feed.Collate(ds, sample[lo:min(lo+opt.BatchSize, len(sample))], &b); err != nil {
			return nil, err
		}
		if dm.full != nil && lo == 0 {
			err := torch.Catch(func() {
				s := torch.NewScope()
				defer s.Close()
				r.Gradients = partGradients(dm.full, b.Graph(dev), opt.Seed)
			})
			if err != nil {
				return nil, fmt.Errorf("gradients: %w", err)
			}
		}
		var batchErr error
		if err := torch.Catch(func() { batchErr = acc.batch(&b, dev) }); err != nil || batchErr != nil {
			return nil, fmt.Errorf("molecules %d–%d: %w", lo, lo+b.NumGraphs()-1, errors.Join(err, batchErr))
		}
		progress("%d of %d molecules", lo+b.NumGraphs(), len(sample))
	}
	acc.finish(r)

	runProbes := func(recalibrated bool) error {
		for _, p := range opt.Probes {
			progress("probe %s", p)
			var probes []ProbeResult
			var probeErr error
			if err := torch.Catch(func() { probes, probeErr = probe(dm, p, opt, dev, recalibrated) }); err != nil || probeErr != nil {
				return fmt.Errorf("probe %s: %w", p, errors.Join(err, probeErr))
			}
			r.Probes = append(r.Probes, probes...)
		}
		return nil
	}
	if err := runProbes(false); err != nil {
		return nil, err
	}
	if len(opt.Probes) > 0 {
		progress("batch norm re-estimated on the sample without dropout")
		var restore func()
		var recalErr error
		if err := torch.Catch(func() { restore, recalErr = recalibrateNorms(dm.enc, ds, sample, opt.BatchSize, dev) }); err != nil || recalErr != nil {
			return nil, fmt.Errorf("re-estimating batch norm: %w", errors.Join(err, recalErr))
		}
		err := runProbes(true)
		restore()
		if err != nil {
			return nil, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// loadDiagModel builds the model opt names, in evaluation use, and the
// diagnosis's description of it.
func loadDiagModel(opt Options, dev torch.Device) (*diagModel, *Diagnosis, error) {
	r := &Diagnosis{Notes: map[string]string{}}
	switch {
	case opt.Checkpoint != "":
		ck, err := runfolder.LoadCheckpoint(opt.Checkpoint)
		if err != nil {
			return nil, nil, err
		}
		defer ck.Free()
		if ck.Config.Model.Released != nil {
			// Its probes read the paper objective's Q, W_h, W_s and W_e.
			return nil, nil, fmt.Errorf("%s: diagnose covers the paper objective; this run trains the released one (export its encoder and diagnose that with --encoder)", opt.Checkpoint)
		}
		m, err := ck.NewModel(dev)
		if err != nil {
			return nil, nil, err
		}
		r.Source, r.Step = opt.Checkpoint, ck.Step
		return fullDiagModel(m, r), r, nil
	case opt.Random != nil:
		m, err := model.New(*opt.Random, dev, torch.Float32)
		if err != nil {
			return nil, nil, err
		}
		r.Source = "random"
		return fullDiagModel(m, r), r, nil
	}
	info, state, err := model.LoadEncoder(opt.Encoder)
	if err != nil {
		return nil, nil, err
	}
	defer torch.FreeNamed(state)
	store := nn.NewStore(dev, torch.Float32)
	enc := model.NewDeeperGCN(store.Root(), info.Encoder)
	if err := torch.LoadState(store.State(), state); err != nil {
		enc.Free()
		store.Free()
		return nil, nil, fmt.Errorf("encoder %s: %w", opt.Encoder, err)
	}
	cfg := model.DefaultConfig()
	cfg.Encoder = info.Encoder
	r.Source, r.Step, r.Encoder = opt.Encoder, info.Step, info.Encoder
	r.Notes["encoder"] = "an exported encoder has no W_h, W_s, W_e or motifs: motif and projection figures are absent; random walks use η and τ of the defaults"
	return &diagModel{enc: enc, cfg: cfg, free: func() { enc.Free(); store.Free() }}, r, nil
}

func fullDiagModel(m *model.MicroGraph, r *Diagnosis) *diagModel {
	cfg := m.Config
	r.Model, r.Encoder = &cfg, cfg.Encoder
	// Measured on motif-like subgraphs whichever sampler trained it.
	m.Config.Sampler = model.SamplerMotif
	return &diagModel{full: m, enc: m.Encoder, cfg: m.Config, free: m.Free}
}

// partGradients is the norm of the encoder gradient of each weighted loss
// part on one training-mode batch (batch statistics, dropout, perturbed
// subgraphs; the same random draws for every part), with the contrast also
// split into its paths through the graph embedding e and through the
// subgraph embeddings s. Running statistics are left as they were.
func partGradients(m *model.MicroGraph, g *graph.Graph, seed uint64) []PartGradient {
	c := m.Config
	var params []*torch.Tensor
	for _, v := range m.Store.Trainable() {
		if strings.HasPrefix(v.Name, "encoder.") {
			params = append(params, v.Tensor)
		}
	}
	momentum := make([]float64, len(m.Encoder.Norms))
	for i, n := range m.Encoder.Norms {
		momentum[i], n.Momentum = n.Momentum, 0
	}
	defer func() {
		for i, n := range m.Encoder.Norms {
			n.Momentum = momentum[i]
		}
	}()
	parts := []struct {
		name string
		loss func(o model.Output) *torch.Tensor
	}{
		{"total", func(o model.Output) *torch.Tensor { return o.Total }},
		{"node_mot", func(o model.Output) *torch.Tensor { return o.Part("node_mot").MulScalar(c.Alpha * c.LambdaNode) }},
		{"reg", func(o model.Output) *torch.Tensor { return o.Part("reg").MulScalar(c.Alpha * c.LambdaReg) }},
		{"contra", func(o model.Output) *torch.Tensor { return o.Part("contra").MulScalar(1 - c.Alpha) }},
		{"contra_via_e", func(o model.Output) *torch.Tensor {
			return ops.GraphSubgraphContrast(m.We.Forward(o.E), o.S.Detach(), o.Subgraphs, c.Tau).MulScalar(1 - c.Alpha)
		}},
		{"contra_via_s", func(o model.Output) *torch.Tensor {
			return ops.GraphSubgraphContrast(m.We.Forward(o.E).Detach(), o.S, o.Subgraphs, c.Tau).MulScalar(1 - c.Alpha)
		}},
	}
	var out []PartGradient
	for _, p := range parts {
		func() {
			s := torch.NewScope()
			defer s.Close()
			torch.ManualSeed(seed ^ 0x67726164) // the same dropout masks and perturbation for every part
			loss := p.loss(m.Forward(g, true))
			torch.ZeroGrad(params)
			loss.Backward()
			var sq float64
			for _, t := range params {
				if gr := t.Grad(); gr != nil {
					sq += gr.PowScalar(2).Sum().Item()
				}
			}
			out = append(out, PartGradient{Part: p.name, Norm: metrics.Value(math.Sqrt(sq))})
		}()
	}
	torch.ZeroGrad(params)
	return out
}

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
	var err error
	torch.NoGrad(func() { err = a.measure(b, b.Graph(dev)) })
	return err
}

func (a *diagAccumulator) measure(b *feed.Batch, g *graph.Graph) error {
	m, cfg := a.m, a.m.cfg
	var h, e, z *torch.Tensor
	var out model.Output
	if m.full != nil {
		out = m.full.Forward(g, false)
		h, e = out.H, out.E
		z = m.full.We.Forward(e)
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
		if err := a.subgraphs(model.SamplerMotif, b, out.Subgraphs, out.S, eHost, z, out.LogP); err != nil {
			return err
		}
	}
	rw := ops.RandomWalkSubgraphs(g, int64(cfg.SubgraphsPerGraph), 10, 40, cfg.Eta, torch.Float32)
	if err := a.subgraphs(model.SamplerRandomWalk, b, rw, rw.LiveRows(rw.Pool(h)), eHost, z, nil); err != nil {
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

// recalibratedFeatures names probes on e after recalibrateNorms.
const recalibratedFeatures = "e, batch norm re-estimated without dropout"

// probe fits LinearEval's classifiers on the scaffold split of the labelled
// dataset path, on e and, for a full model, on W_e·e, ProbeSeeds seeds each;
// recalibrated says the norms hold recalibrateNorms' statistics (e only).
func probe(m *diagModel, path string, opt Options, dev torch.Device, recalibrated bool) ([]ProbeResult, error) {
	ds, err := data.Open(path, opt.Dataset)
	if err != nil {
		return nil, err
	}
	if ds.Split == nil || ds.NumTasks() == 0 {
		return nil, fmt.Errorf("%s: a probe needs labels and a scaffold split", path)
	}
	s := torch.NewScope()
	defer s.Close()
	var es, zs []*torch.Tensor
	var b feed.Batch
	all := ds.All()
	for lo := 0; lo < len(all); lo += opt.BatchSize {
		if err := feed.Collate(ds, all[lo:min(lo+opt.BatchSize, len(all))], &b); err != nil {
			return nil, err
		}
		torch.NoGrad(func() {
			g := b.Graph(dev)
			e := ops.GraphPool(m.enc.Forward(g, false), g, ops.MeanPool)
			es = append(es, e)
			if m.full != nil && !recalibrated {
				zs = append(zs, m.full.We.Forward(e))
			}
		})
	}
	features := []struct {
		name string
		x    *torch.Tensor
	}{{"e", torch.Cat(es, 0)}}
	if recalibrated {
		features[0].name = recalibratedFeatures
	}
	if zs != nil {
		features = append(features, struct {
			name string
			x    *torch.Tensor
		}{"W_e·e", torch.Cat(zs, 0)})
	}
	cfg := evaluate.DefaultLinearEvalConfig()
	cfg.Data = path
	var out []ProbeResult
	for _, f := range features {
		res := ProbeResult{Data: path, Features: f.name}
		var xs []float64
		for i := range opt.ProbeSeeds {
			run, err := evaluate.FitLinear(&cfg, ds, ds.Split, f.x, opt.Seed+uint64(i))
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, run.TestROCAUC)
			xs = append(xs, float64(run.TestROCAUC))
		}
		res.Test = metrics.StatOf(xs)
		out = append(out, res)
	}
	return out, nil
}

// recalibrateNorms replaces every norm's running statistics by those of the
// molecules sample with dropout off: per norm, the mean over batches of the
// batch means and of the unbiased batch variances, each norm seeing the
// batch-normalised output of the ones before it (PyTorch's cumulative
// re-estimation). The returned function puts the old statistics back.
func recalibrateNorms(enc *model.DeeperGCN, ds *data.Dataset, sample []int32, batchSize int, dev torch.Device) (func(), error) {
	d := enc.Config.Hidden
	means, vars := make([][]float64, len(enc.Norms)), make([][]float64, len(enc.Norms))
	for l := range means {
		means[l], vars[l] = make([]float64, d), make([]float64, d)
	}
	batches := 0
	var b feed.Batch
	for lo := 0; lo < len(sample); lo += batchSize {
		if err := feed.Collate(ds, sample[lo:min(lo+batchSize, len(sample))], &b); err != nil {
			return nil, err
		}
		if b.NumAtoms() < 2 {
			continue
		}
		func() {
			s := torch.NewScope()
			defer s.Close()
			torch.NoGrad(func() {
				enc.Probe(b.Graph(dev), model.ForwardProbe{BatchStats: true, NormInput: func(l int, x *torch.Tensor) {
					mean := x.MeanDim(0, false)
					variance := x.Sub(mean).PowScalar(2).SumDim(0, false).DivScalar(float64(x.Size(0) - 1))
					for j, v := range torch.ToSlice[float32](mean.ToDType(torch.Float32)) {
						means[l][j] += float64(v)
					}
					for j, v := range torch.ToSlice[float32](variance.ToDType(torch.Float32)) {
						vars[l][j] += float64(v)
					}
				}})
			})
		}()
		batches++
	}
	if batches == 0 {
		return nil, errors.New("no batch of at least 2 atoms")
	}
	var old []*torch.Tensor
	for l, n := range enc.Norms {
		old = append(old, n.RunningMean.Clone().Unscope(), n.RunningVar.Clone().Unscope())
		for j := range means[l] {
			means[l][j] /= float64(batches)
			vars[l][j] /= float64(batches)
		}
		set := func(dst *torch.Tensor, v []float64) {
			t := torch.FromSlice(v, int64(d))
			defer t.Free()
			dst.CopyFrom(t, false)
		}
		set(n.RunningMean, means[l])
		set(n.RunningVar, vars[l])
	}
	return func() {
		for l, n := range enc.Norms {
			n.RunningMean.CopyFrom(old[2*l], false)
			n.RunningVar.CopyFrom(old[2*l+1], false)
			old[2*l].Free()
			old[2*l+1].Free()
		}
	}, nil
}
