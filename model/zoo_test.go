package model_test

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Every shipped model is pinned: the SHA-256 of its weights is the one its
// model card states, its description names it and its keys, and it loads as
// a motif model and as an encoder.
func TestShippedModelsArePinned(t *testing.T) {
	card, err := os.ReadFile("../docs/model-card.md")
	if err != nil {
		t.Fatal(err)
	}
	names := model.ShippedModels()
	if len(names) == 0 {
		t.Fatal("no shipped model")
	}
	for _, name := range names {
		weights, err := os.ReadFile("zoo/" + name + ".pt")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(weights)
		stated := regexp.MustCompile("(?m)`" + regexp.QuoteMeta(name) + "\\.pt`[^`]*SHA-256 `([0-9a-f]{64})`").FindSubmatch(card)
		if stated == nil || string(stated[1]) != hex.EncodeToString(sum[:]) {
			t.Errorf("%s.pt has SHA-256 %x; docs/model-card.md states %q", name, sum, stated)
		}
		m, info, err := model.LoadMotifModel(name, torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != name || len(info.Keys) != len(m.Store.State()) || len(info.Legend) != info.Model.Motifs {
			t.Errorf("%s: description names %q, %d keys for %d tensors, %d legend entries for %d motifs",
				name, info.Name, len(info.Keys), len(m.Store.State()), len(info.Legend), info.Model.Motifs)
		}
		m.Free()
	}
}

// pinnedEmbeddings are the first four values of the graph embeddings the
// shipped model gives four fixed molecules (float32, evaluation mode),
// written down when it was shipped: a change to the weights, the encoder's
// maths or the featurisation moves them.
var pinnedEmbeddings = map[string][4]float64{
	"CC(=O)Oc1ccccc1C(=O)O":        {-0.5184093, -0.34685022, 0.41299313, -0.71035415},   // aspirin
	"CN1C=NC2=C1C(=O)N(C(=O)N2C)C": {-0.23004405, 0.30855748, 0.98618186, -0.7389821},    // caffeine
	"c1ccc2[nH]ccc2c1":             {-0.63601035, -0.52906996, 0.14861767, -0.103973836}, // indole
	"CC(C)Cc1ccc(cc1)C(C)C(=O)O":   {-0.54113084, 0.92256135, 0.4792453, -1.1059054},     // ibuprofen
}

// pinnedSMILES lists pinnedEmbeddings' molecules, which the GPU check's
// RDKit recording also holds (scripts/gpu-prepare.sh), for a machine without
// RDKit.
const pinnedSMILES = "testdata/pinned-smiles.txt"

// shippedName is the model the embeddings were pinned for.
const shippedName = "micrograph-molhiv-v1"

// The shipped model gives the pinned embeddings to the molecules, within
// float32 rounding of a sum over a few hundred terms.
func TestShippedModelEmbeddingsArePinned(t *testing.T) {
	scope(t)
	info, state, err := model.LoadEncoder(shippedName)
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(state)
	store := nn.NewStore(torch.CPU, torch.Float32)
	defer store.Free()
	enc := model.NewDeeperGCN(store.Root(), info.Encoder)
	defer enc.Free()
	if err := torch.LoadState(store.State(), state); err != nil {
		t.Fatal(err)
	}
	listed, err := os.ReadFile(pinnedSMILES)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(listed)); !slices.Equal(slices.Sorted(maps.Keys(pinnedEmbeddings)), slices.Sorted(slices.Values(got))) {
		t.Fatalf("%s lists %q, not the pinned molecules", pinnedSMILES, got)
	}
	for smiles, want := range pinnedEmbeddings {
		ds, kept, rejected, err := data.FeaturizeRows([]data.Row{{SMILES: smiles}}, 1, data.Limits{})
		switch {
		case err != nil:
			t.Fatalf("%s: %v", smiles, err)
		case len(kept) != 1:
			t.Fatalf("%s: not featurised: %+v", smiles, rejected)
		}
		var b feed.Batch
		if err := feed.Collate(ds, []int32{0}, &b); err != nil {
			t.Fatal(err)
		}
		got := torch.NoGradValue(func() []float64 {
			g := b.Graph(torch.CPU)
			return vector(ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool))
		})
		for j, w := range want {
			if math.Abs(got[j]-w) > 1e-5*max(1, math.Abs(w)) {
				t.Errorf("%s: e_%d = %.7g, pinned %.7g", smiles, j, got[j], w)
			}
		}
	}
}
