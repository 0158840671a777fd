// Dropout with a counter-based mask, fused. Element i of X is kept, and
// scaled by 1/(1 − p), when a hash of (seed, i) mapped to [0, 1) is at least
// p; otherwise it is 0. One seed is drawn from the CPU generator per call (so
// masks follow manual_seed and saved generator states); backward regenerates
// the same mask from it and applies it to the gradient.
//
// Files: dropout_cpu.cpp (the CPU loop over elements [begin, end)),
// dropout.cpp (autograd function and mg_fused_dropout).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

template <typename T, Isa isa = Isa::avx2>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale);

} // namespace mg
