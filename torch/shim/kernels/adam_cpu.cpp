// The CPU loops of the Adam update (maths in adam.h), compiled for AVX2 and FMA
// (Makefile): see kernels/simd.h for what this translation unit may include.
#include "adam.h"

#include <cmath>

namespace mg {

template <typename T, Isa isa>
void adam_update(T *P, const T *G, T *M, T *V, int64_t n, T lr, T beta1, T beta2, T eps, T wd, bool decoupled,
                 T bias1, T bias2_sqrt) {
	const T shrink = decoupled ? 1 - lr * wd : T(1), l2 = decoupled ? T(0) : wd, step = lr / bias1;
	for (int64_t i = 0; i < n; i++) {
		T g = G[i] + l2 * P[i];
		T p = P[i] * shrink;
		M[i] = M[i] * beta1 + g * (1 - beta1);
		V[i] = V[i] * beta2 + g * g * (1 - beta2);
		P[i] = p - step * M[i] / (std::sqrt(V[i]) / bias2_sqrt + eps);
	}
}

template void adam_update<float, MG_ISA>(float *, const float *, float *, float *, int64_t, float, float, float, float, float,
                                 bool, float, float);
template void adam_update<double, MG_ISA>(double *, const double *, double *, double *, int64_t, double, double, double,
                                  double, double, bool, double, double);

} // namespace mg
