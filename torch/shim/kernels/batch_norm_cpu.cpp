// The CPU loops of training-mode batch norm (maths in batch_norm.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "batch_norm.h"

#include <cmath>

#include "dropout_mask.h"

namespace mg {

namespace {

// normalized is the batch norm of x[j]: forward, and backward where it
// rebuilds the gate of a following ReLU.
template <typename T>
inline T normalized(const T *x, const T *W, const T *B, const T *M, const T *V, int64_t j) {
	return (x[j] - M[j]) * V[j] * W[j] + B[j];
}

// One row's part of the backward sums GW and GB, channels [c0, c1).
template <typename T>
inline void backward_sums_row(const T *x, const T *g, const T *M, const T *V, int64_t c0, int64_t c1, T *GW, T *GB) {
	for (int64_t j = c0; j < c1; j++) {
		GB[j] += g[j];
		GW[j] += g[j] * (x[j] - M[j]) * V[j];
	}
}

// One row of the input's gradient gx, channels [c0, c1), given the sums.
template <typename T>
inline void backward_apply_row(const T *x, const T *g, const T *W, const T *M, const T *V, const T *GW, const T *GB,
                               int64_t c0, int64_t c1, T count, T *gx) {
	for (int64_t j = c0; j < c1; j++) {
		T xhat = (x[j] - M[j]) * V[j];
		gx[j] = W[j] * V[j] * (g[j] - GB[j] / count - xhat * GW[j] / count);
	}
}

// The gradient of row i's dropout input, channels [c0, c1): the output's
// gradient g, scaled, where the dropout passed the element, else 0. After a
// ReLU that is where the output Z is positive (a kept positive value stays
// positive when scaled up); without one, where the mask of seed and p keeps
// it. GY is indexed by channel.
template <typename T, bool relu>
inline void dropped_gradient_row(const T *G, const T *Z, int64_t c, int64_t c0, int64_t c1, int64_t i, uint64_t seed,
                                 float p, T scale, T *GY) {
	const T *g = G + i * c, *z = Z + i * c;
	if (relu) {
		for (int64_t j = c0; j < c1; j++) GY[j] = z[j] > 0 ? g[j] * scale : T(0);
		return;
	}
	const int64_t base = i * c;
	each_mask_bit(base + c0, base + c1, seed, p, [=](int64_t k, bool kept) {
		const int64_t j = k - base;
		GY[j] = kept ? g[j] * scale : T(0);
	});
}

} // namespace

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
		for (int64_t j = c0; j < c1; j++) y[j] = normalized(x, W, B, M, V, j);
	}
}

template <typename T, Isa isa>
void batch_norm_statistics(const T *X, int64_t n, int64_t c, int64_t c0, int64_t c1, T eps, T *M, T *V, T *VAR) {
	batch_norm_sums<T, isa>(X, n, c, c0, c1, M);
	for (int64_t j = c0; j < c1; j++) M[j] /= n;
	batch_norm_squares<T, isa>(X, M, n, c, c0, c1, VAR);
	for (int64_t j = c0; j < c1; j++) {
		VAR[j] /= n;
		V[j] = 1 / std::sqrt(VAR[j] + eps);
	}
}

template <typename T, Isa isa>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, int64_t c0, int64_t c1, T eps, T *Y,
                        T *M, T *V, T *VAR) {
	batch_norm_statistics<T, isa>(X, n, c, c0, c1, eps, M, V, VAR);
	batch_norm_apply<T, isa>(X, W, B, M, V, n, c, c0, c1, Y);
}

template <typename T, Isa isa>
void batch_norm_backward_sums(const T *X, const T *G, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                              int64_t c1, T *GW, T *GB) {
	for (int64_t j = c0; j < c1; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) backward_sums_row(X + i * c, G + i * c, M, V, c0, c1, GW, GB);
}

template <typename T, Isa isa>
void batch_norm_backward_apply(const T *X, const T *G, const T *W, const T *M, const T *V, const T *GW, const T *GB,
                               int64_t n, int64_t c, int64_t c0, int64_t c1, T count, T *GX) {
	for (int64_t i = 0; i < n; i++) backward_apply_row(X + i * c, G + i * c, W, M, V, GW, GB, c0, c1, count, GX + i * c);
}

template <typename T, Isa isa>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                         int64_t c1, T *GX, T *GW, T *GB) {
	batch_norm_backward_sums<T, isa>(X, G, M, V, n, c, c0, c1, GW, GB);
	batch_norm_backward_apply<T, isa>(X, G, W, M, V, GW, GB, n, c, c0, c1, static_cast<T>(n), GX);
}

namespace {

template <typename T, bool relu>
void dropout_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c, int64_t c0,
                   int64_t c1, uint64_t seed, float p, T scale, T *Z) {
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		T *z = Z + i * c;
		const int64_t base = i * c;
		each_mask_bit(base + c0, base + c1, seed, p, [=](int64_t k, bool kept) {
			const int64_t j = k - base;
			const T y = normalized(x, W, B, M, V, j);
			z[j] = kept && (!relu || y > 0) ? y * scale : T(0);
		});
	}
}

template <typename T, bool relu>
void dropout_backward(const T *X, const T *G, const T *Z, const T *W, const T *M, const T *V, int64_t n, int64_t c,
                      int64_t c0, int64_t c1, uint64_t seed, float p, T scale, T *GX, T *GW, T *GB, T *GY) {
	for (int64_t j = c0; j < c1; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		dropped_gradient_row<T, relu>(G, Z, c, c0, c1, i, seed, p, scale, GY);
		backward_sums_row(X + i * c, GY, M, V, c0, c1, GW, GB);
	}
	for (int64_t i = 0; i < n; i++) {
		dropped_gradient_row<T, relu>(G, Z, c, c0, c1, i, seed, p, scale, GY);
		backward_apply_row(X + i * c, GY, W, M, V, GW, GB, c0, c1, static_cast<T>(n), GX + i * c);
	}
}

} // namespace

template <typename T, Isa isa>
void batch_norm_dropout_apply(const T *X, const T *W, const T *B, const T *M, const T *V, int64_t n, int64_t c,
                              int64_t c0, int64_t c1, uint64_t seed, float p, T scale, bool relu, T *Z) {
	if (relu) {
		dropout_apply<T, true>(X, W, B, M, V, n, c, c0, c1, seed, p, scale, Z);
	} else {
		dropout_apply<T, false>(X, W, B, M, V, n, c, c0, c1, seed, p, scale, Z);
	}
}

template <typename T, Isa isa>
void batch_norm_dropout_backward(const T *X, const T *G, const T *Z, const T *W, const T *M, const T *V, int64_t n,
                                 int64_t c, int64_t c0, int64_t c1, uint64_t seed, float p, T scale, bool relu, T *GX,
                                 T *GW, T *GB, T *GY) {
	if (relu) {
		dropout_backward<T, true>(X, G, Z, W, M, V, n, c, c0, c1, seed, p, scale, GX, GW, GB, GY);
	} else {
		dropout_backward<T, false>(X, G, Z, W, M, V, n, c, c0, c1, seed, p, scale, GX, GW, GB, GY);
	}
}

#define MG_BATCH_NORM(T)                                                                                          \
	template void batch_norm_statistics<T, MG_ISA>(const T *, int64_t, int64_t, int64_t, int64_t, T, T *, T *, T *);        \
	template void batch_norm_dropout_apply<T, MG_ISA>(const T *, const T *, const T *, const T *, const T *, int64_t,      \
	                                          int64_t, int64_t, int64_t, uint64_t, float, T, bool, T *);            \
	template void batch_norm_dropout_backward<T, MG_ISA>(const T *, const T *, const T *, const T *, const T *, const T *, \
	                                             int64_t, int64_t, int64_t, int64_t, uint64_t, float, T, bool, T *,   \
	                                             T *, T *, T *);                                                    \
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
