// The MinCut regulariser per molecule (docs/method.md §5), fused. For soft
// assignments Q (N×K) on a destination-sorted CSR graph (incoming edges of
// node v: [R[v], R[v+1]) from sources S) whose molecule g owns the nodes
// [GP[g], GP[g+1]):
//
//	cut_g   = −Σ_{(u→v)∈E_g} ⟨q_u, q_v⟩ / Σ_{u∈V_g} deg(u)·‖q_u‖²      (0 without edges)
//	ortho_g = ‖ G_g / max(‖G_g‖_F, floor) − I_J/√J ‖_F,   G_g = q_gᵀq_g
//
// over all K columns, or over the J columns SEL (B×K, 1/0) selects (G_g
// masked to them; ortho_g = 0 when J = 0); floor = kMinCutNormFloor. Forward
// keeps per molecule the numerator NUM, denominator DEN, the masked Gram
// matrix GRAM (K×K) and its norm FRO for backward, which takes
// GC[g] = ∂L/∂cut_g and GO[g] = ∂L/∂ortho_g into GQ (node rows).
//
// Files: mincut_cpu.cpp (CPU loops over molecules [begin, end)), mincut.cpp
// (autograd function and mg_fused_mincut).
#pragma once

#include <cstdint>

namespace mg {

// The floor of ‖G_g‖_F, as the composed form's clamp in ops/mincut.go
// (minCutNormFloor there).
constexpr double kMinCutNormFloor = 1e-30;

template <typename T>
void mincut_forward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                    int64_t begin, int64_t end, T *CUT, T *ORTHO, T *NUM, T *DEN, T *GRAM, T *FRO);
// scratch holds K×K values.
template <typename T>
void mincut_backward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                     int64_t begin, int64_t end, const T *ORTHO, const T *NUM, const T *DEN, const T *GRAM,
                     const T *FRO, const T *GC, const T *GO, T *GQ, T *scratch);

} // namespace mg
