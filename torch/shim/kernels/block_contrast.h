// The graph-to-subgraph contrastive loss (docs/method.md §6) from its logits,
// fused: a softmax cross-entropy whose positives lie in diagonal blocks. Y is
// rows × cols with cols = rows·S; row i's block is columns i·S … i·S+S−1;
// L (float 1/0, cols) marks the live columns. Per row i:
//
//	LSE_i  = log Σ_j L_j exp(Y_ij)
//	loss_i = −Σ_{j in i's block} L_j (Y_ij − LSE_i),   NPOS_i = Σ_{j in i's block} L_j
//
// and the loss is the mean of loss_i over the rows with NPOS_i > 0 (0 if
// there are none). Backward, with C_i = ∂L/∂loss_i:
//
//	GY_ij = C_i·L_j·(NPOS_i·exp(Y_ij − LSE_i) − [j in i's block])
//
// Files: block_contrast_cpu.cpp (CPU loops over rows [begin, end)),
// block_contrast.cpp (autograd function and mg_fused_block_contrast).
#pragma once

#include <cstdint>

namespace mg {

template <typename T>
void block_contrast_forward(const T *Y, const T *L, int64_t cols, int64_t S, int64_t begin, int64_t end, T *LSE,
                            T *LOSS, T *NPOS);
template <typename T>
void block_contrast_backward(const T *Y, const T *L, const T *LSE, const T *NPOS, const T *C, int64_t cols,
                             int64_t S, int64_t begin, int64_t end, T *GY);

} // namespace mg
