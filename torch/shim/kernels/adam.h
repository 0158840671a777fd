// One Adam or AdamW step of a parameter in place (torch.optim.Adam/AdamW,
// single-tensor form), fused into one loop over its elements. With
// bias1 = 1 − β₁ᵗ and bias2_sqrt = √(1 − β₂ᵗ):
//
//	P ← P·(1 − lr·wd) (decoupled)      G ← G + wd·P (otherwise)
//	M ← β₁·M + (1 − β₁)·G              V ← β₂·V + (1 − β₂)·G²
//	P ← P − lr/bias1 · M / (√V/bias2_sqrt + eps)
//
// Files: adam_cpu.cpp (the CPU loop), adam.cpp (mg_fused_adam_step).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mg {

template <typename T, Isa isa = Isa::avx2>
void adam_update(T *P, const T *G, T *M, T *V, int64_t n, T lr, T beta1, T beta2, T eps, T wd, bool decoupled,
                 T bias1, T bias2_sqrt);

} // namespace mg
