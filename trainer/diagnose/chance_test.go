package diagnose_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/diagnose"
)

// Chance is, per molecule with a subgraph, its share of the batch's
// subgraphs, averaged: when every molecule has a subgraph the shares of a
// batch sum to 1, so Chance is the number of batches over the number of
// molecules. Random walks give every synthetic molecule (10 atoms or more)
// its walks, which the test asserts first; 90 molecules in batches of 40
// make 3 batches, so Chance = 3/90 exactly (a range check cannot tell a
// wrong share from the right one).
func TestDiagnoseChanceIsTheOwnShare(t *testing.T) {
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Encoder.Dropout, cfg.Motifs = 16, 2, 0, 6
	synth := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 120, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := diagnose.Run(diagnose.Options{
		Random: &cfg, Seed: 4, Data: synth, Molecules: 90, BatchSize: 40, ProbeSeeds: 1,
	}, cpuEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Subgraphs {
		if s.Sampler != model.SamplerRandomWalk {
			continue
		}
		if s.PerMolecule.Min < 1 || s.PerMolecule.N != 90 {
			t.Fatalf("random walks per molecule %+v: the exact check needs a walk in every one of 90 molecules", s.PerMolecule)
		}
		if want := 3.0 / 90; math.Abs(float64(s.Chance)-want) > 1e-12 {
			t.Errorf("chance %v, want 3 batches / 90 molecules = %v", s.Chance, want)
		}
		return
	}
	t.Fatalf("no random-walk figures in %+v", r.Subgraphs)
}
