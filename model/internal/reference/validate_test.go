package reference

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Forward rejects inconsistent shapes and indices (brief: "error on
// inconsistent shapes/indices") and a float32 Sinkhorn overflow; each case
// starts from a valid input that Forward accepts.
func TestForwardRejectsInconsistentInput(t *testing.T) {
	valid := func() (Weights, Batch, Config) {
		rng := rand.New(rand.NewPCG(4, 4))
		c := testConfig()
		w := randomWeights(rng, c)
		b := batchOf(rng, []molecule{randomMolecule(rng, 4), randomMolecule(rng, 3)})
		return w, b, c
	}
	if _, err := Forward(valid()); err != nil {
		t.Fatalf("valid input rejected: %v", err)
	}
	// Each case names a substring its error must contain, so that it fails
	// for the intended reason.
	cases := map[string]func(w *Weights, b *Batch, c *Config){
		"Layers 0":              func(w *Weights, b *Batch, c *Config) { c.Layers = 0 },
		"Hidden 0":              func(w *Weights, b *Batch, c *Config) { c.Hidden = 0 },
		"Motifs mismatch":       func(w *Weights, b *Batch, c *Config) { c.Motifs = 5 },
		"Tau 0":                 func(w *Weights, b *Batch, c *Config) { c.Tau = 0 },
		"Eta 0":                 func(w *Weights, b *Batch, c *Config) { c.Eta = 0 },
		"SinkhornIters -1":      func(w *Weights, b *Batch, c *Config) { c.SinkhornIters = -1 },
		"Sinkhorn overflow":     func(w *Weights, b *Batch, c *Config) { c.SinkhornLambda = 1000 },
		"short atom row":        func(w *Weights, b *Batch, c *Config) { w.AtomEmb[4][1] = w.AtomEmb[4][1][:5] },
		"short bond row":        func(w *Weights, b *Batch, c *Config) { w.BondEmb[2][0] = nil },
		"missing conv":          func(w *Weights, b *Batch, c *Config) { w.Convs = w.Convs[:2] },
		"missing norm":          func(w *Weights, b *Batch, c *Config) { w.Norms = w.Norms[1:] },
		"conv W rows":           func(w *Weights, b *Batch, c *Config) { w.Convs[1].W = w.Convs[1].W[:5] },
		"conv bias":             func(w *Weights, b *Batch, c *Config) { w.Convs[2].B = nil },
		"norm gamma":            func(w *Weights, b *Batch, c *Config) { w.Norms[0].Gamma = w.Norms[0].Gamma[:1] },
		"motif width":           func(w *Weights, b *Batch, c *Config) { w.Motifs[3] = append(w.Motifs[3], 0) },
		"Wh shape":              func(w *Weights, b *Batch, c *Config) { w.Wh = w.Wh[:3] },
		"We row":                func(w *Weights, b *Batch, c *Config) { w.We[0] = w.We[0][:2] },
		"atom feature negative": func(w *Weights, b *Batch, c *Config) { b.X[2][0] = -1 },
		"atom feature too big":  func(w *Weights, b *Batch, c *Config) { b.X[1][8] = 2 },
		"bond feature too big":  func(w *Weights, b *Batch, c *Config) { b.EdgeAttr[3][0] = 5 },
		"src out of range":      func(w *Weights, b *Batch, c *Config) { b.Src[0] = len(b.X) },
		"dst negative":          func(w *Weights, b *Batch, c *Config) { b.Dst[1] = -1 },
		"dst count":             func(w *Weights, b *Batch, c *Config) { b.Dst = b.Dst[1:] },
		"edge attr count":       func(w *Weights, b *Batch, c *Config) { b.EdgeAttr = b.EdgeAttr[1:] },
		"edge between graphs": func(w *Weights, b *Batch, c *Config) {
			b.Src = append(b.Src, 0)
			b.Dst = append(b.Dst, 6)
			b.EdgeAttr = append(b.EdgeAttr, [3]int64{})
		},
		"node graph count": func(w *Weights, b *Batch, c *Config) { b.NodeGraph = b.NodeGraph[1:] },
		"node graph range": func(w *Weights, b *Batch, c *Config) { b.NodeGraph[6] = 2 },
		"non-contiguous graphs": func(w *Weights, b *Batch, c *Config) {
			b.NodeGraph[0], b.NodeGraph[6] = 1, 0
			b.Src, b.Dst, b.EdgeAttr = nil, nil, nil
		},
		"empty graph": func(w *Weights, b *Batch, c *Config) { b.NumGraphs = 3 },
		"no graphs":   func(w *Weights, b *Batch, c *Config) { b.NumGraphs = 0 },
		"no nodes": func(w *Weights, b *Batch, c *Config) {
			*b = Batch{NumGraphs: 1}
		},
	}
	wantErr := map[string]string{
		"Layers 0":              "Layers",
		"Hidden 0":              "Hidden",
		"Motifs mismatch":       "Motifs",
		"Tau 0":                 "Tau",
		"Eta 0":                 "Eta",
		"SinkhornIters -1":      "SinkhornIters",
		"Sinkhorn overflow":     "not finite",
		"short atom row":        "AtomEmb[4]",
		"short bond row":        "BondEmb[2]",
		"missing conv":          "convs",
		"missing norm":          "norms",
		"conv W rows":           "Convs[1].W",
		"conv bias":             "Convs[2].B",
		"norm gamma":            "Norms[0]",
		"motif width":           "Motifs row 3",
		"Wh shape":              "Wh",
		"We row":                "We row 0",
		"atom feature negative": "X[2][0]",
		"atom feature too big":  "X[1][8]",
		"bond feature too big":  "EdgeAttr[3][0]",
		"src out of range":      "out of range",
		"dst negative":          "out of range",
		"dst count":             "equal counts",
		"edge attr count":       "equal counts",
		"edge between graphs":   "joins graphs",
		"node graph count":      "NodeGraph has",
		"node graph range":      "NodeGraph[6]",
		"non-contiguous graphs": "not contiguous",
		"empty graph":           "graph 2 has no nodes",
		"no graphs":             "NumGraphs",
		"no nodes":              "no nodes",
	}
	for name, mutate := range cases {
		if wantErr[name] == "" {
			t.Fatalf("%s: no expected error text", name)
		}
		w, b, c := valid()
		mutate(&w, &b, &c)
		_, err := Forward(w, b, c)
		switch {
		case err == nil:
			t.Errorf("%s: Forward succeeded, want an error", name)
		case !strings.Contains(err.Error(), wantErr[name]):
			t.Errorf("%s: error %q does not mention %q", name, err, wantErr[name])
		}
	}
}
