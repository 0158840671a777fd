// Sinkhorn-Knopp assignment of nodes to motifs (docs/method.md §3), fused, in
// float32 and without autograd. From scores Q (N×K):
//
//	A = exp(λ·Q)ᵀ (K×N),   A ← A / ΣA
//
// then `iters` rounds of scaling every row of A to sum 1/K and every column to
// sum 1/N; MOTIF[l] = argmax_k A[k][l] (the first maximum).
//
// The phases below are sinkhorn's loops, for the batch split across
// processes (distributed.cpp), which hold some of the N columns each: the
// row sums are summed over processes before each row scaling, N is the
// global count, and the column sums stay local. There ΣA is not divided
// out: the first row scaling cancels it (A_kl/ΣA · (1/K)/(R_k/ΣA) =
// A_kl·(1/K)/R_k), so it is only taken, from the summed row sums, when
// there is no round (iters 0).
//
// Files: sinkhorn_cpu.cpp (the CPU loops), sinkhorn.cpp (mg_fused_sinkhorn).
#pragma once

#include <cstdint>

namespace mg {

void sinkhorn(const float *Q, int64_t n, int64_t k, float lambda, int iters, float *A, int64_t *MOTIF);

// A[j][l] = exp(λ·Q[l][j]) and ROWS[j] = Σ_l A[j][l].
void sinkhorn_exp(const float *Q, int64_t n, int64_t k, float lambda, float *A, float *ROWS);
// ROWS[j] = Σ_l A[j][l].
void sinkhorn_row_sums(const float *A, int64_t n, int64_t k, float *ROWS);
// A[j][l] *= (1/K)/ROWS[j].
void sinkhorn_scale_rows(float *A, int64_t n, int64_t k, const float *ROWS);
// A[j][l] *= (1/total)/Σ_j A[j][l], the column sums in COL (n floats of scratch).
void sinkhorn_scale_columns(float *A, int64_t n, int64_t k, int64_t total, float *COL);
// MOTIF[l] = the first j of the largest A[j][l].
void sinkhorn_argmax(const float *A, int64_t n, int64_t k, int64_t *MOTIF);

} // namespace mg
