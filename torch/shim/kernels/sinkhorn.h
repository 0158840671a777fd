// Sinkhorn-Knopp assignment of nodes to motifs (docs/method.md §3), fused, in
// float32 and without autograd. From scores Q (N×K):
//
//	A = exp(λ·Q)ᵀ (K×N),   A ← A / ΣA
//
// then `iters` rounds of scaling every row of A to sum 1/K and every column to
// sum 1/N; MOTIF[l] = argmax_k A[k][l] (the first maximum).
//
// Files: sinkhorn_cpu.cpp (the CPU loops), sinkhorn.cpp (mg_fused_sinkhorn).
#pragma once

#include <cstdint>

namespace mg {

void sinkhorn(const float *Q, int64_t n, int64_t k, float lambda, int iters, float *A, int64_t *MOTIF);

} // namespace mg
