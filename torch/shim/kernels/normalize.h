// Row-wise L2 normalisation of a 2-d tensor (torch.nn.functional.normalize
// with p = 2 over dim 1), fused. Per row x, with NRM = max(‖x‖₂, eps):
//
//	y = x / NRM
//
// Backward: GX = (GY − y·⟨y, GY⟩) / NRM where ‖x‖₂ > eps, GY / eps elsewhere
// (the clamp is a constant there).
//
// Files: normalize_cpu.cpp (CPU loops over rows [begin, end)), normalize.cpp
// (autograd function and mg_fused_normalize).
#pragma once

#include <cstdint>

namespace mg {

template <typename T>
void normalize_forward(const T *X, int64_t d, T eps, int64_t begin, int64_t end, T *Y, T *NRM);
template <typename T>
void normalize_backward(const T *Y, const T *GY, const T *NRM, int64_t d, T eps, int64_t begin, int64_t end, T *GX);

} // namespace mg
