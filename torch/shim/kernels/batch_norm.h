// Batch norm of 2-d input in training mode (torch.nn.BatchNorm1d), fused. Per
// channel j of X (n×c), with the batch mean M, biased variance VAR and
// V = 1/√(VAR + eps):
//
//	Y = (X − M)·V·W + B
//
// and the running statistics move by momentum, with the unbiased variance, as
// PyTorch: r ← (1 − momentum)·r + momentum·batch. Backward from G, with
// X̂ = (X − M)·V:
//
//	GW = Σ_rows G·X̂,   GB = Σ_rows G,   GX = W·V·(G − GB/n − X̂·GW/n)
//
// Files: batch_norm_cpu.cpp (CPU loops), batch_norm.cpp (autograd function and
// mg_fused_batch_norm).
#pragma once

#include <cstdint>

namespace mg {

template <typename T>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, T eps, T *Y, T *M, T *V, T *VAR);
template <typename T>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, T *GX,
                         T *GW, T *GB);

} // namespace mg
