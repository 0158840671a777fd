package diagnose

import (
	"errors"
	"fmt"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// recalibratedFeatures names probes on e after recalibrateNorms.
const recalibratedFeatures = "e, batch norm re-estimated without dropout"

// probe fits LinearEval's classifiers on the scaffold split of the labelled
// dataset path, on e and, for a full model, on W_e·e, ProbeSeeds seeds each;
// recalibrated says the norms hold recalibrateNorms' statistics (e only).
func probe(m *diagModel, path string, opt Options, env runenv.Env, recalibrated bool) ([]ProbeResult, error) {
	dev := env.Device
	ds, err := data.Open(path, env.OpenOptions())
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
		g := b.Graph(dev)
		e := torch.NoGradValue(func() *torch.Tensor { return ops.GraphPool(m.enc.Forward(g, false), g, ops.MeanPool) })
		es = append(es, e)
		if m.full != nil && !recalibrated {
			zs = append(zs, torch.NoGradValue(func() *torch.Tensor { return m.paper.We.Forward(e) }))
		}
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
