package diagnose

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// diagnoseStream separates the molecule sample's permutation from other uses
// of the seed.
const diagnoseStream = 0x6469616720 // "diag "

// diagModel is the measured model: always an encoder, and for checkpoints
// and random models the whole MICRO-Graph model around it, with the paper's
// objective, whose assignment and projections diagnose reads.
type diagModel struct {
	full   *model.MicroGraph
	paper  *model.PaperObjective // full's objective
	motifs model.Sampler         // its motif-guided sampler
	enc    *model.DeeperGCN
	cfg    model.Config
	free   func()
}

// forward runs the full model on motif-guided subgraphs, whichever sampler
// trained it.
func (dm *diagModel) forward(g *graph.Graph, train bool) model.Output {
	return dm.paper.Forward(g, dm.motifs, train)
}

// ObjectiveError is a model whose objective diagnose does not measure: it
// reads the node assignment and the projections of the paper's.
type ObjectiveError struct {
	Source    string // the checkpoint, or "random"
	Objective string
}

func (e *ObjectiveError) Error() string {
	return fmt.Sprintf("%s: diagnose covers the paper objective; this model trains the %s one", e.Source, e.Objective)
}

// Run measures opt's encoder on a seeded sample of opt.Data, where env
// says (env.Progress gets one line per stage); see Diagnosis.
func Run(opt Options, env runenv.Env) (*Diagnosis, error) {
	return runenv.Run(env, opt.Validate, func() (*Diagnosis, error) { return run(opt, env) })
}

// run is Run after runenv's prologue.
func run(opt Options, env runenv.Env) (_ *Diagnosis, err error) {
	start := time.Now()
	dev := env.Device
	torch.ManualSeed(opt.Seed)
	dm, r, err := loadDiagModel(opt, dev)
	if err != nil {
		return nil, err
	}
	defer dm.free()
	ds, err := data.Open(opt.Data, env.OpenOptions())
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
		if env.Progress != nil {
			fmt.Fprintf(env.Progress, "diagnose: "+format+"\n", args...)
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
				r.Gradients = partGradients(dm, b.Graph(dev), opt.Seed)
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
			if err := torch.Catch(func() { probes, probeErr = probe(dm, p, opt, env, recalibrated) }); err != nil || probeErr != nil {
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
		m, err := ck.NewModel(dev)
		if err != nil {
			return nil, nil, err
		}
		r.Source, r.Step = opt.Checkpoint, ck.Step
		dm, err := fullDiagModel(m, r)
		return dm, r, err
	case opt.Random != nil:
		m, err := model.New(*opt.Random, dev, torch.Float32)
		if err != nil {
			return nil, nil, err
		}
		r.Source = "random"
		dm, err := fullDiagModel(m, r)
		return dm, r, err
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

// fullDiagModel is the diagModel of m, which it frees when refused.
func fullDiagModel(m *model.MicroGraph, r *Diagnosis) (*diagModel, error) {
	paper, ok := m.Objective.(*model.PaperObjective)
	if !ok {
		m.Free()
		return nil, &ObjectiveError{Source: r.Source, Objective: m.Objective.Name()}
	}
	motifs, err := paper.Sampler(model.SamplerMotif)
	if err != nil {
		m.Free()
		return nil, err
	}
	cfg := m.Config
	r.Model, r.Encoder = &cfg, cfg.Encoder
	return &diagModel{full: m, paper: paper, motifs: motifs, enc: m.Encoder, cfg: cfg, free: m.Free}, nil
}

// partGradients is the norm of the encoder gradient of each weighted loss
// part on one training-mode batch (batch statistics, dropout, perturbed
// subgraphs; the same random draws for every part), with the contrast also
// split into its paths through the graph embedding e and through the
// subgraph embeddings s. Running statistics are left as they were.
func partGradients(dm *diagModel, g *graph.Graph, seed uint64) []PartGradient {
	m, we, c := dm.full, dm.paper.We, dm.cfg
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
			return ops.GraphSubgraphContrast(we.Forward(o.E), o.S.Detach(), o.Subgraphs, c.Tau, nil).MulScalar(1 - c.Alpha)
		}},
		{"contra_via_s", func(o model.Output) *torch.Tensor {
			return ops.GraphSubgraphContrast(we.Forward(o.E).Detach(), o.S, o.Subgraphs, c.Tau, nil).MulScalar(1 - c.Alpha)
		}},
	}
	var out []PartGradient
	for _, p := range parts {
		sq := torch.ScopedValue(func() float64 {
			torch.ManualSeed(seed ^ 0x67726164) // the same dropout masks and perturbation for every part
			loss := p.loss(dm.forward(g, true))
			torch.ZeroGrad(params)
			loss.Backward()
			var sq float64
			for _, t := range params {
				if gr := t.Grad(); gr != nil {
					sq += gr.PowScalar(2).Sum().Item()
				}
			}
			return sq
		})
		out = append(out, PartGradient{Part: p.name, Norm: metrics.Value(math.Sqrt(sq))})
	}
	torch.ZeroGrad(params)
	return out
}
