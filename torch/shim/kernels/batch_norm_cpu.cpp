// The CPU loops of training-mode batch norm (maths in batch_norm.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "batch_norm.h"

#include <cmath>

namespace mg {

template <typename T>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, T eps, T *Y, T *M, T *V, T *VAR) {
	for (int64_t j = 0; j < c; j++) M[j] = VAR[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) M[j] += x[j];
	}
	for (int64_t j = 0; j < c; j++) M[j] /= n;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) VAR[j] += (x[j] - M[j]) * (x[j] - M[j]);
	}
	for (int64_t j = 0; j < c; j++) {
		VAR[j] /= n;
		V[j] = 1 / std::sqrt(VAR[j] + eps);
	}
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		T *y = Y + i * c;
		for (int64_t j = 0; j < c; j++) y[j] = (x[j] - M[j]) * V[j] * W[j] + B[j];
	}
}

template <typename T>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, T *GX,
                         T *GW, T *GB) {
	for (int64_t j = 0; j < c; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		for (int64_t j = 0; j < c; j++) {
			GB[j] += g[j];
			GW[j] += g[j] * (x[j] - M[j]) * V[j];
		}
	}
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		T *gx = GX + i * c;
		for (int64_t j = 0; j < c; j++) {
			T xhat = (x[j] - M[j]) * V[j];
			gx[j] = W[j] * V[j] * (g[j] - GB[j] / n - xhat * GW[j] / n);
		}
	}
}

template void batch_norm_forward<float>(const float *, const float *, const float *, int64_t, int64_t, float, float *,
                                        float *, float *, float *);
template void batch_norm_forward<double>(const double *, const double *, const double *, int64_t, int64_t, double,
                                         double *, double *, double *, double *);
template void batch_norm_backward<float>(const float *, const float *, const float *, const float *, const float *,
                                         int64_t, int64_t, float *, float *, float *);
template void batch_norm_backward<double>(const double *, const double *, const double *, const double *,
                                          const double *, int64_t, int64_t, double *, double *, double *);

} // namespace mg
