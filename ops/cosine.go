package ops

import "github.com/micrograph/micrograph/torch"

// CosineEpsilon is the floor of the norms cosine similarities divide by, as
// PyTorch's F.normalize and F.cosine_similarity.
const CosineEpsilon = 1e-12

// Cosine is the matrix of cosine similarities between the rows of a (n×d) and
// of b (m×d): rows are L2-normalised (by max(‖·‖, CosineEpsilon)), then a·bᵀ
// (n×m).
func Cosine(a, b *torch.Tensor) *torch.Tensor {
	return NormalizeRows(a).MatMul(NormalizeRows(b).T())
}

// NormalizeRows divides each row of x (n×d) by max(its L2 norm,
// CosineEpsilon), in the fused kernel where there is one.
func NormalizeRows(x *torch.Tensor) *torch.Tensor {
	if x.Dim() == 2 && torch.FusedKernelsFor(x) {
		return torch.FusedNormalize(x, CosineEpsilon)
	}
	return x.Normalize(2, 1, CosineEpsilon)
}
