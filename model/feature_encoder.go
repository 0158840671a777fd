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

// Combinations enumerates every combination of categorical feature values:
// All (C×F int64, C = Π dims, the last feature varying fastest) and, through
// Index, each row's position in All. A FeatureEncoder applied to All is a
// table of one embedding per combination (bonds: 5·6·2 = 60 rows), from
// which rows are looked up by index instead of being embedded one by one.
type Combinations struct {
	All     *torch.Tensor // C×F int64
	strides *torch.Tensor // 1×F int64: how far each feature moves the index
}

// NewCombinations enumerates the combinations of dims on dev.
func NewCombinations(dims []int64, dev torch.Device) Combinations {
	count := int64(1)
	for _, n := range dims {
		count *= n
	}
	f := int64(len(dims))
	all, strides := make([]int64, 0, count*f), make([]int64, f)
	for i := f - 1; i >= 0; i-- {
		strides[i] = 1
		if i < f-1 {
			strides[i] = strides[i+1] * dims[i+1]
		}
	}
	for c := range count {
		for i := range f {
			all = append(all, c/strides[i]%dims[i])
		}
	}
	onDevice := func(v []int64, shape ...int64) *torch.Tensor {
		host := torch.FromSlice(v, shape...)
		defer host.Free()
		return host.To(dev, false).Unscope()
	}
	return Combinations{All: onDevice(all, count, f), strides: onDevice(strides, 1, f)}
}

// Index is the row of All that each row of x (R×F int64) holds (R int64).
func (c Combinations) Index(x *torch.Tensor) *torch.Tensor { return x.Mul(c.strides).SumDim(1, false) }

// Free releases the constants.
func (c Combinations) Free() {
	c.All.Free()
	c.strides.Free()
}
