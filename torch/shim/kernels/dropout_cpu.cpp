// The CPU loops of the counter-based dropout (maths in dropout.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "dropout.h"

#include "dropout_mask.h"

namespace mg {

template <typename T, Isa isa>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { Y[i] = kept ? X[i] * scale : T(0); });
}

template <typename T, Isa isa>
void relu_dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { Y[i] = kept && X[i] > 0 ? X[i] * scale : T(0); });
}

template <typename T, Isa isa>
void relu_dropout_grad(const T *G, const T *X, T *GX, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { GX[i] = kept && X[i] > 0 ? G[i] * scale : T(0); });
}

template void dropout_mask<float, MG_ISA>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void dropout_mask<double, MG_ISA>(const double *, double *, int64_t, int64_t, uint64_t, float, double);
template void relu_dropout_mask<float, MG_ISA>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void relu_dropout_mask<double, MG_ISA>(const double *, double *, int64_t, int64_t, uint64_t, float, double);
template void relu_dropout_grad<float, MG_ISA>(const float *, const float *, float *, int64_t, int64_t, uint64_t, float,
                                               float);
template void relu_dropout_grad<double, MG_ISA>(const double *, const double *, double *, int64_t, int64_t, uint64_t,
                                                float, double);

} // namespace mg
