package model

import (
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// Vocabulary sizes of OGB's atom and bond features (§2, §8).
var (
	AtomFeatureDims = []int64{119, 5, 12, 12, 10, 6, 6, 2, 2}
	BondFeatureDims = []int64{5, 6, 2}
)

// FeatureEncoder embeds rows of categorical features (OGB's AtomEncoder and
// BondEncoder): one table per feature, each xavier-uniform initialised, and
//
//	out_r = Σ_f Table_f[x_rf]
//
// The tables are named "embeddings.<f>.weight". Forward looks them up as one
// concatenated table with offset indices and sums as it gathers
// (torch.EmbeddingBagSum, or the fused kernel where it runs): no R×F×d
// intermediate.
type FeatureEncoder struct {
	Tables  []*nn.Embedding
	offsets *torch.Tensor // start row of each table in the concatenation (1×F)
}

// NewFeatureEncoder registers one table of width d per feature vocabulary.
func NewFeatureEncoder(p nn.Path, dims []int64, d int64) *FeatureEncoder {
	f := &FeatureEncoder{}
	start := make([]int64, len(dims))
	var next int64
	for i, n := range dims {
		e := nn.NewEmbedding(p.Sub("embeddings").Index(i), n, d)
		nn.XavierUniform(e.Weight, 1)
		f.Tables = append(f.Tables, e)
		start[i], next = next, next+n
	}
	host := torch.FromSlice(start, 1, int64(len(dims)))
	f.offsets = host.To(p.Options().Device, false).Unscope()
	host.Free()
	return f
}

// Forward embeds x (R×F, int64) into R×d.
func (f *FeatureEncoder) Forward(x *torch.Tensor) *torch.Tensor {
	weights := make([]*torch.Tensor, len(f.Tables))
	for i, e := range f.Tables {
		weights[i] = e.Weight
	}
	table, indices := torch.Cat(weights, 0), x.Add(f.offsets)
	if torch.FusedKernelsFor(table) {
		return torch.FusedEmbeddingBagSum(table, indices)
	}
	return torch.EmbeddingBagSum(table, indices)
}

// Free releases the encoder's constants (its tables belong to the store).
func (f *FeatureEncoder) Free() { f.offsets.Free() }
