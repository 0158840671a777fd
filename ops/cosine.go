package ops

import "github.com/micrograph/micrograph/torch"

// Cosine is the matrix of cosine similarities between the rows of a (n×d) and
// of b (m×d): rows are L2-normalised (by max(‖·‖, 1e-12)), then a·bᵀ (n×m).
func Cosine(a, b *torch.Tensor) *torch.Tensor {
	return a.Normalize(2, 1, 1e-12).MatMul(b.Normalize(2, 1, 1e-12).T())
}
