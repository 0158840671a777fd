// The CPU loops of training-mode batch norm (maths in batch_norm.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "batch_norm.h"

#include <cmath>

namespace mg {

template <typename T>
void batch_norm_sums(const T *X, int64_t n, int64_t c, T *S) {
	for (int64_t j = 0; j < c; j++) S[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) S[j] += x[j];
	}
}

template <typename T>
void batch_norm_squares(const T *X, const T *M, int64_t n, int64_t c, T *Q) {
	for (int64_t j = 0; j < c; j++) Q[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) Q[j] += (x[j] - M[j]) * (x[j] - M[j]);
	}
}

template <typename T>
void batch_norm_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c, T *Y) {
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		T *y = Y + i * c;
		for (int64_t j = 0; j < c; j++) y[j] = (x[j] - M[j]) * V[j] * W[j] + B[j];
	}
}

template <typename T>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, T eps, T *Y, T *M, T *V, T *VAR) {
	batch_norm_sums(X, n, c, M);
	for (int64_t j = 0; j < c; j++) M[j] /= n;
	batch_norm_squares(X, M, n, c, VAR);
	for (int64_t j = 0; j < c; j++) {
		VAR[j] /= n;
		V[j] = 1 / std::sqrt(VAR[j] + eps);
	}
	batch_norm_apply(X, W, B, M, V, n, c, Y);
}

template <typename T>
void batch_norm_backward_sums(const T *X, const T *G, const T *M, const T *V, int64_t n, int64_t c, T *GW, T *GB) {
	for (int64_t j = 0; j < c; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		for (int64_t j = 0; j < c; j++) {
			GB[j] += g[j];
			GW[j] += g[j] * (x[j] - M[j]) * V[j];
		}
	}
}

template <typename T>
void batch_norm_backward_apply(const T *X, const T *G, const T *W, const T *M, const T *V, const T *GW, const T *GB,
                               int64_t n, int64_t c, T count, T *GX) {
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		T *gx = GX + i * c;
		for (int64_t j = 0; j < c; j++) {
			T xhat = (x[j] - M[j]) * V[j];
			gx[j] = W[j] * V[j] * (g[j] - GB[j] / count - xhat * GW[j] / count);
		}
	}
}

template <typename T>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, T *GX,
                         T *GW, T *GB) {
	batch_norm_backward_sums(X, G, M, V, n, c, GW, GB);
	batch_norm_backward_apply(X, G, W, M, V, GW, GB, n, c, static_cast<T>(n), GX);
}

template void batch_norm_forward<float>(const float *, const float *, const float *, int64_t, int64_t, float, float *,
                                        float *, float *, float *);
template void batch_norm_forward<double>(const double *, const double *, const double *, int64_t, int64_t, double,
                                         double *, double *, double *, double *);
template void batch_norm_backward<float>(const float *, const float *, const float *, const float *, const float *,
                                         int64_t, int64_t, float *, float *, float *);
template void batch_norm_backward<double>(const double *, const double *, const double *, const double *,
                                          const double *, int64_t, int64_t, double *, double *, double *);

#define MG_BATCH_NORM_PHASES(T)                                                                                  \
	template void batch_norm_sums<T>(const T *, int64_t, int64_t, T *);                                          \
	template void batch_norm_squares<T>(const T *, const T *, int64_t, int64_t, T *);                            \
	template void batch_norm_apply<T>(const T *, const T *, const T *, const T *, const T *, int64_t, int64_t, T *); \
	template void batch_norm_backward_sums<T>(const T *, const T *, const T *, const T *, int64_t, int64_t, T *, T *); \
	template void batch_norm_backward_apply<T>(const T *, const T *, const T *, const T *, const T *, const T *,    \
	                                           const T *, int64_t, int64_t, T, T *);
MG_BATCH_NORM_PHASES(float)
MG_BATCH_NORM_PHASES(double)

} // namespace mg
