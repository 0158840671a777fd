// The weighted mean of rows of X per group, for pooling nodes into molecules
// and subgraphs, fused. Over the memberships p = (Rows[p], Groups[p], Wt[p]):
//
//	O[g] = Σ_{p: Groups[p] = g} Wt[p]·X[Rows[p]] / max(C[g], 1),   C[g] = Σ_{p: Groups[p] = g} Wt[p]
//
// (0 for an empty group), accumulated in membership order, so deterministic
// without sorting. Backward: GX[Rows[p]] += Wt[p]/max(C[g], 1) · G[g]. The
// gradient flows into X only.
//
// Files: group_mean_cpu.cpp (CPU loops; forward leaves the division to the
// caller), group_mean.cpp (autograd function and mg_fused_group_mean).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

// O[g] += Wt[p]·X[Rows[p]] and C[g] += Wt[p], in order.
template <typename T, Isa isa = Isa::avx2>
void group_sum_forward(const T *X, const int64_t *Rows, const int64_t *Groups, const T *Wt, int64_t p, int64_t d,
                       T *O, T *C);
template <typename T, Isa isa = Isa::avx2>
void group_mean_backward(const T *G, const int64_t *Rows, const int64_t *Groups, const T *Wt, const T *C, int64_t p,
                         int64_t d, T *GX);

} // namespace mg
