package diagnose_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/diagnose"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// A diagnosis of a small random model on the synthetic molecules is
// consistent with itself: unperturbed motif subgraphs partition the atoms
// they cover, every atom has one motif, random walks are connected, dropout 0
// leaves e unchanged, and probes run on the original and re-estimated norms.
func TestDiagnoseIsConsistent(t *testing.T) {
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Encoder.Dropout, cfg.Motifs = 16, 2, 0, 6
	synth := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 300, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := diagnose.Run(diagnose.Options{
		Random: &cfg, Seed: 4, Data: synth, Molecules: 90, BatchSize: 40,
		Probes: []string{synth}, ProbeSeeds: 2,
	}, cpuEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Molecules != 90 || r.Sizes.N != 90 || math.Abs(float64(r.Sizes.Mean)*90-float64(r.Atoms)) > 1e-6 {
		t.Fatalf("%d molecules, %d atoms, sizes %+v", r.Molecules, r.Atoms, r.Sizes)
	}
	sum := func(xs []int) (s int) {
		for _, x := range xs {
			s += x
		}
		return s
	}
	if m := r.Motifs; sum(m.Sinkhorn.Counts) != r.Atoms || sum(m.RawArgmax.Counts) != r.Atoms || len(m.Sinkhorn.Counts) != 6 {
		t.Errorf("motif counts %v and %v for %d atoms", m.Sinkhorn.Counts, m.RawArgmax.Counts, r.Atoms)
	}
	if len(r.Subgraphs) != 2 || r.Subgraphs[0].Sampler != "motif" || r.Subgraphs[1].Sampler != "random-walk" {
		t.Fatalf("subgraph samplers %+v", r.Subgraphs)
	}
	motif, walks := r.Subgraphs[0], r.Subgraphs[1]
	covered := float64(motif.Atoms.Mean) * float64(motif.Atoms.N)
	if want := (1 - float64(motif.Uncovered)) * float64(r.Atoms); math.Abs(covered-want) > 1e-6 {
		t.Errorf("motif subgraphs hold %v atoms; %v are covered", covered, want)
	}
	if n := float64(motif.PerMolecule.Mean) * 90; math.Abs(n-float64(motif.Atoms.N)) > 1e-6 {
		t.Errorf("%v subgraphs by molecule, %d by size", n, motif.Atoms.N)
	}
	if motif.Atoms.Min < 4 || motif.Coverage.Max > 1 || motif.MaxP.Min < 1.0/6-1e-6 || motif.MaxP.Max > 1 {
		t.Errorf("motif subgraphs out of range: %+v", motif)
	}
	if walks.Components.Min != 1 || walks.Components.Max != 1 || walks.PerMolecule.Max > 3 {
		t.Errorf("random walks: components %+v, per molecule %+v", walks.Components, walks.PerMolecule)
	}
	for _, s := range r.Subgraphs {
		if s.PositiveMass.Min < 0 || s.PositiveMass.Max > 1+1e-6 || !(s.Chance > 0) {
			t.Errorf("%s: positive mass %+v, chance %v", s.Sampler, s.PositiveMass, s.Chance)
		}
	}
	if d := r.Dropout.Dropout; math.Abs(float64(d.Min)-1) > 1e-5 || d.N != 90 {
		t.Errorf("dropout 0 changed e: cosines %+v", d)
	}
	if len(r.BatchNorm) != 2 || len(r.Gradients) != 6 || !(r.Gradients[1].Norm > 0) {
		t.Errorf("batch norm %+v, gradients %+v", r.BatchNorm, r.Gradients)
	}
	var features []string
	for _, p := range r.Probes {
		features = append(features, p.Features)
		if p.Test.N != 2 || !(p.Test.Mean > 0 && p.Test.Mean <= 1) {
			t.Errorf("probe %s: %+v", p.Features, p.Test)
		}
	}
	if got := strings.Join(features, "|"); got != "e|W_e·e|e, batch norm re-estimated without dropout" {
		t.Errorf("probes on %q", got)
	}
}

// Misuse is reported before any work.
func TestDiagnoseErrors(t *testing.T) {
	cfg, bad := model.DefaultConfig(), model.DefaultConfig()
	bad.Tau = math.NaN()
	for _, c := range []struct {
		opt  diagnose.Options
		want string
	}{
		{diagnose.Options{Data: "x", Molecules: 10, BatchSize: 4, ProbeSeeds: 1}, "exactly one of"},
		{diagnose.Options{Random: &cfg, Encoder: "e.pt", Data: "x", Molecules: 10, BatchSize: 4, ProbeSeeds: 1}, "exactly one of"},
		{diagnose.Options{Random: &cfg, Data: "x", Molecules: 1, BatchSize: 4, ProbeSeeds: 1}, "molecules 1 must be at least 2"},
		{diagnose.Options{Random: &cfg, Data: "x", Molecules: 10, BatchSize: 1, ProbeSeeds: 1}, "batch_size 1 must be at least 2"},
		{diagnose.Options{Random: &cfg, Data: "x", Molecules: 10, BatchSize: 4, ProbeSeeds: 0}, "probe_seeds 0 must be positive"},
		{diagnose.Options{Random: &bad, Data: "x", Molecules: 10, BatchSize: 4, ProbeSeeds: 1}, "random.tau NaN must be a finite number"},
	} {
		if _, err := diagnose.Run(c.opt, cpuEnv(t)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opt, err, c.want)
		}
	}
}

// A model of the released objective is refused before any data is read:
// diagnose reads the paper objective's node assignment and projections.
func TestDiagnoseRefusesTheReleasedObjective(t *testing.T) {
	cfg := model.ReleasedModelConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers = 8, 1
	_, err := diagnose.Run(diagnose.Options{Random: &cfg, Data: "no-such-data", Molecules: 10, BatchSize: 4, ProbeSeeds: 1}, cpuEnv(t))
	var objective *diagnose.ObjectiveError
	if !errors.As(err, &objective) || objective.Objective != model.ObjectiveReleased || objective.Source != "random" {
		t.Fatalf("error %v, want a diagnose.ObjectiveError for the released objective of the random model", err)
	}
}

// cpuEnv runs a diagnosis on the CPU with one libtorch thread and the
// test's own dataset cache.
func cpuEnv(t *testing.T) runenv.Env {
	env := runenv.Default()
	env.Threads, env.Dataset.CacheDir = 1, filepath.Join(t.TempDir(), "cache")
	return env
}
