// The CPU loops of training-mode batch norm (maths in batch_norm.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "batch_norm.h"

#include <cmath>

namespace mg {

// Every loop runs over the channels [c0, c1) of each row (row stride c):
// threads take channel ranges, and each channel's sums run over the rows in
// order whatever the range.

template <typename T, Isa isa>
void batch_norm_sums(const T *X, int64_t n, int64_t c, int64_t c0, int64_t c1, T *S) {
	for (int64_t j = c0; j < c1; j++) S[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = c0; j < c1; j++) S[j] += x[j];
	}
}

template <typename T, Isa isa>
void batch_norm_squares(const T *X, const T *M, int64_t n, int64_t c, int64_t c0, int64_t c1, T *Q) {
	for (int64_t j = c0; j < c1; j++) Q[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = c0; j < c1; j++) Q[j] += (x[j] - M[j]) * (x[j] - M[j]);
	}
}

template <typename T, Isa isa>
void batch_norm_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                      int64_t c1, T *Y) {
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		T *y = Y + i * c;
		for (int64_t j = c0; j < c1; j++) y[j] = (x[j] - M[j]) * V[j] * W[j] + B[j];
	}
}

template <typename T, Isa isa>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, int64_t c0, int64_t c1, T eps, T *Y,
                        T *M, T *V, T *VAR) {
	batch_norm_sums<T, isa>(X, n, c, c0, c1, M);
	for (int64_t j = c0; j < c1; j++) M[j] /= n;
	batch_norm_squares<T, isa>(X, M, n, c, c0, c1, VAR);
	for (int64_t j = c0; j < c1; j++) {
		VAR[j] /= n;
		V[j] = 1 / std::sqrt(VAR[j] + eps);
	}
	batch_norm_apply<T, isa>(X, W, B, M, V, n, c, c0, c1, Y);
}

template <typename T, Isa isa>
void batch_norm_backward_sums(const T *X, const T *G, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                              int64_t c1, T *GW, T *GB) {
	for (int64_t j = c0; j < c1; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		for (int64_t j = c0; j < c1; j++) {
			GB[j] += g[j];
			GW[j] += g[j] * (x[j] - M[j]) * V[j];
		}
	}
}

template <typename T, Isa isa>
void batch_norm_backward_apply(const T *X, const T *G, const T *W, const T *M, const T *V, const T *GW, const T *GB,
                               int64_t n, int64_t c, int64_t c0, int64_t c1, T count, T *GX) {
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		T *gx = GX + i * c;
		for (int64_t j = c0; j < c1; j++) {
			T xhat = (x[j] - M[j]) * V[j];
			gx[j] = W[j] * V[j] * (g[j] - GB[j] / count - xhat * GW[j] / count);
		}
	}
}

template <typename T, Isa isa>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                         int64_t c1, T *GX, T *GW, T *GB) {
	batch_norm_backward_sums<T, isa>(X, G, M, V, n, c, c0, c1, GW, GB);
	batch_norm_backward_apply<T, isa>(X, G, W, M, V, GW, GB, n, c, c0, c1, static_cast<T>(n), GX);
}

#define MG_BATCH_NORM(T)                                                                                          \
	template void batch_norm_forward<T, MG_ISA>(const T *, const T *, const T *, int64_t, int64_t, int64_t, int64_t, T, T *, \
	                                    T *, T *, T *);                                                             \
	template void batch_norm_backward<T, MG_ISA>(const T *, const T *, const T *, const T *, const T *, int64_t, int64_t,    \
	                                     int64_t, int64_t, T *, T *, T *);                                          \
	template void batch_norm_sums<T, MG_ISA>(const T *, int64_t, int64_t, int64_t, int64_t, T *);                          \
	template void batch_norm_squares<T, MG_ISA>(const T *, const T *, int64_t, int64_t, int64_t, int64_t, T *);            \
	template void batch_norm_apply<T, MG_ISA>(const T *, const T *, const T *, const T *, const T *, int64_t, int64_t,     \
	                                  int64_t, int64_t, T *);                                                       \
	template void batch_norm_backward_sums<T, MG_ISA>(const T *, const T *, const T *, const T *, int64_t, int64_t,        \
	                                          int64_t, int64_t, T *, T *);                                          \
	template void batch_norm_backward_apply<T, MG_ISA>(const T *, const T *, const T *, const T *, const T *, const T *,   \
	                                           const T *, int64_t, int64_t, int64_t, int64_t, T, T *);
MG_BATCH_NORM(float)
MG_BATCH_NORM(double)

} // namespace mg
