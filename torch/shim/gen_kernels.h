// Loops of the fused GENConv aggregation (fused.cpp), on raw arrays. They live
// in their own translation unit, free of ATen, which the Makefile compiles for
// AVX2+FMA: the channel loops vectorise, exp included. fused.cpp offers the
// fused path only on CPUs that have AVX2 and FMA.
#pragma once

#include <cstdint>

namespace mg {

// Nodes [begin, end) of the forward pass: per node i and channel c, over the
// edges k of [R[i], R[i+1]) with m = ReLU(H[S[k]] + E[k]) + 1e-7,
// Z = max t·m, D = Σ exp(t·m − Z), O = Σ exp(t·m − Z)·m / D. Nodes without
// edges are left alone (the caller zero-fills O).
template <typename T>
void gen_forward(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, int64_t d, int64_t begin,
                 int64_t end, T *O, T *Z, T *D);

// Nodes [begin, end) of the backward pass: the gradient of the messages'
// pre-activations (GP, per edge) from the output's gradient G, and each
// node's part of the temperature's gradient (GT) when learn_t. scratch holds
// d values.
template <typename T>
void gen_backward(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, bool learn_t, int64_t d,
                  int64_t begin, int64_t end, const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT,
                  T *scratch);

} // namespace mg
