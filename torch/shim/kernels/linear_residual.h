// A linear layer whose output joins a residual connection, as DeeperGCN's
// res+ block adds each layer to its input (docs/method.md §2):
//
//	Z = (X·Wᵀ + b) + R
//
// The product is libtorch's matrix product without the bias (at::mm, with
// its own backward); the bias and the residual are then added in one pass,
// Z = (Y + b) + R, instead of a pass that copies b into every row for the
// product to add to (at::addmm) and another that adds R. The sums round as
// in addmm followed by an add, so the values are those bits: the product is
// the same gemm call with β = 0 instead of 1, which adds the same accumulated
// row·column to 0 instead of to b, and b is added next. Backward: GY = G,
// GR = G, Gb = G summed over rows (as autograd reduces a broadcast bias).
//
// Files: linear_residual_cpu.cpp (the CPU loop), linear_residual.cpp
// (autograd function and mg_fused_linear_residual).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

// Rows [begin, end) of Z = (Y + b) + R, c columns.
template <typename T, Isa isa = Isa::avx2>
void bias_residual(const T *Y, const T *b, const T *R, int64_t c, int64_t begin, int64_t end, T *Z);

} // namespace mg
