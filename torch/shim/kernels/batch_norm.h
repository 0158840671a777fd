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
// The phases below are the two functions' loops, for synchronised batch norm
// (the batch split across processes: distributed.cpp), which sums the
// per-channel sums over processes between them and divides by the global
// count of rows: forward = sums, M = S/count, squares, VAR = Q/count,
// apply; backward = backward_sums (each process's GW and GB, which are also
// its parameter gradients), then backward_apply with the global GW, GB and
// count.
//
// Batch norm followed by dropout (dropout.h), and optionally a ReLU between
// them, is one more autograd function: forward writes only the dropout's
// output Z = Y·scale where it passes Y (the mask keeps the element, and with
// the ReLU Y > 0), else 0; backward gates Z's gradient row by row on its way
// into batch norm's sums and input gradient, by Z > 0 after a ReLU, else by
// the mask made again from its seed, so that neither Y nor its gradient is
// ever stored. Its values are those of the two functions one after the
// other, bit for bit.
//
// Files: batch_norm_cpu.cpp (CPU loops), batch_norm.cpp (autograd functions,
// mg_fused_batch_norm and mg_fused_batch_norm_dropout).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

// Each function runs over the channels [c0, c1) of n rows of c channels, so
// that threads can take channel ranges; each channel's value is the same
// whatever the range.
template <typename T, Isa isa = Isa::avx2>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, int64_t c0, int64_t c1, T eps, T *Y,
                        T *M, T *V, T *VAR);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                         int64_t c1, T *GX, T *GW, T *GB);
// M, V and VAR, the first phase of batch_norm_forward.
template <typename T, Isa isa = Isa::avx2>
void batch_norm_statistics(const T *X, int64_t n, int64_t c, int64_t c0, int64_t c1, T eps, T *M, T *V, T *VAR);
// Batch norm then dropout of seed and p (after a ReLU when relu), given the
// statistics: Z (n×c).
template <typename T, Isa isa = Isa::avx2>
void batch_norm_dropout_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c,
                              int64_t c0, int64_t c1, uint64_t seed, float p, T scale, bool relu, T *Z);
// Its backward from Z's gradient G: GX, GW and GB as batch_norm_backward
// gives them from the dropout's input gradient; GY holds c values.
template <typename T, Isa isa = Isa::avx2>
void batch_norm_dropout_backward(const T *X, const T *G, const T *Z, const T *W, const T *M, const T *V, int64_t n,
                                 int64_t c, int64_t c0, int64_t c1, uint64_t seed, float p, T scale, bool relu, T *GX,
                                 T *GW, T *GB, T *GY);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_sums(const T *X, int64_t n, int64_t c, int64_t c0, int64_t c1, T *S);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_squares(const T *X, const T *M, int64_t n, int64_t c, int64_t c0, int64_t c1, T *Q);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                      int64_t c1, T *Y);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_backward_sums(const T *X, const T *G, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                              int64_t c1, T *GW, T *GB);
template <typename T, Isa isa = Isa::avx2>
void batch_norm_backward_apply(const T *X, const T *G, const T *W, const T *M, const T *V, const T *GW, const T *GB,
                               int64_t n, int64_t c, int64_t c0, int64_t c1, T count, T *GX);

} // namespace mg
