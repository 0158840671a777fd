package nn

import "github.com/micrograph/micrograph/torch"

// Embedding is a lookup table: row i of Weight is the vector of index i
// (torch.nn.Embedding, initialised from N(0, 1)).
type Embedding struct {
	Weight *torch.Tensor // num×dim
}

// NewEmbedding registers "weight" at p.
func NewEmbedding(p Path, num, dim int64) *Embedding {
	e := &Embedding{Weight: p.Param("weight", torch.Empty([]int64{num, dim}, p.Options()))}
	Normal(e.Weight, 0, 1)
	return e
}

// Forward is the rows of Weight at indices: indices.shape × dim.
func (e *Embedding) Forward(indices *torch.Tensor) *torch.Tensor {
	return torch.Embedding(e.Weight, indices)
}
