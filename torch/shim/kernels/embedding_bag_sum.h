// Sums of lookup-table rows (embedding_bag, mode sum), fused. For indices I
// (n×F) into the table W:
//
//	O[i] = Σ_f W[I[i, f]]
//
// Backward scatters in order, so deterministically: GW[I[i, f]] += G[i].
// gen_aggregate.cpp uses the same scatter for its gradient into the nodes.
//
// Files: embedding_bag_sum_cpu.cpp (CPU loops), embedding_bag_sum.cpp
// (autograd function and mg_fused_embedding_bag_sum).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

// Rows [begin, end) of O.
template <typename T, Isa isa = Isa::avx2>
void bag_sum_forward(const T *W, const int64_t *I, int64_t F, int64_t d, int64_t begin, int64_t end, T *O);
// All n rows of G into GW.
template <typename T, Isa isa = Isa::avx2>
void bag_sum_backward(const T *G, const int64_t *I, int64_t F, int64_t d, int64_t n, T *GW);

} // namespace mg
