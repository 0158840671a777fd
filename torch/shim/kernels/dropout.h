// Dropout with a counter-based mask, fused. Element i of X is kept, and
// scaled by 1/(1 − p), when a hash of (seed, i) mapped to [0, 1) is at least
// p; otherwise it is 0. One seed is drawn from the CPU generator per call (so
// masks follow manual_seed and saved generator states); backward regenerates
// the same mask from it and applies it to the gradient.
//
// Dropout of a ReLU's output is fused the same way: the ReLU's gate joins the
// mask, forward and backward, so that neither makes a pass of its own.
//
// Files: dropout_cpu.cpp (the CPU loops over elements [begin, end)),
// dropout.cpp (autograd functions, mg_fused_dropout and mg_fused_relu_dropout).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

template <typename T, Isa isa = Isa::avx2>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale);

// Dropout of ReLU(X) with the same mask: Y = X·scale where X > 0 and the
// element is kept, else 0; and its gradient GX from the output's G.
template <typename T, Isa isa = Isa::avx2>
void relu_dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale);
template <typename T, Isa isa = Isa::avx2>
void relu_dropout_grad(const T *G, const T *X, T *GX, int64_t begin, int64_t end, uint64_t seed, float p, T scale);

} // namespace mg
