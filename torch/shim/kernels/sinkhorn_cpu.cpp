// The CPU loops of Sinkhorn-Knopp (maths and phases in sinkhorn.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "sinkhorn.h"

#include "simd.h"
#include <vector>

namespace mg {

void sinkhorn_exp(const float *Q, int64_t n, int64_t k, float lambda, float *A, float *ROWS) {
	for (int64_t j = 0; j < k; j++) {
		float *a = A + j * n;
		for (int64_t l = 0; l < n; l++) a[l] = vexp(lambda * Q[l * k + j]);
		float row = 0;
#pragma omp simd reduction(+ : row)
		for (int64_t l = 0; l < n; l++) row += a[l];
		ROWS[j] = row;
	}
}

void sinkhorn_row_sums(const float *A, int64_t n, int64_t k, float *ROWS) {
	for (int64_t j = 0; j < k; j++) {
		const float *a = A + j * n;
		float row = 0;
#pragma omp simd reduction(+ : row)
		for (int64_t l = 0; l < n; l++) row += a[l];
		ROWS[j] = row;
	}
}

void sinkhorn_scale_rows(float *A, int64_t n, int64_t k, const float *ROWS) {
	for (int64_t j = 0; j < k; j++) {
		float *a = A + j * n;
		const float scale = (1.0f / k) / ROWS[j];
		for (int64_t l = 0; l < n; l++) a[l] *= scale;
	}
}

void sinkhorn_scale_columns(float *A, int64_t n, int64_t k, int64_t total, float *COL) {
	for (int64_t l = 0; l < n; l++) COL[l] = 0;
	for (int64_t j = 0; j < k; j++) {
		const float *a = A + j * n;
		for (int64_t l = 0; l < n; l++) COL[l] += a[l];
	}
	for (int64_t l = 0; l < n; l++) COL[l] = (1.0f / total) / COL[l];
	for (int64_t j = 0; j < k; j++) {
		float *a = A + j * n;
		for (int64_t l = 0; l < n; l++) a[l] *= COL[l];
	}
}

void sinkhorn_argmax(const float *A, int64_t n, int64_t k, int64_t *MOTIF) {
	for (int64_t l = 0; l < n; l++) {
		int64_t best = 0;
		for (int64_t j = 1; j < k; j++) {
			if (A[j * n + l] > A[best * n + l]) best = j;
		}
		MOTIF[l] = best;
	}
}

void sinkhorn(const float *Q, int64_t n, int64_t k, float lambda, int iters, float *A, int64_t *MOTIF) {
	std::vector<float> rows(k), col(n);
	sinkhorn_exp(Q, n, k, lambda, A, rows.data());
	// ΣA is summed in double: n·k terms.
	double total = 0;
	for (int64_t j = 0; j < k; j++) total += rows[j];
	const float inv_total = static_cast<float>(1 / total);
	for (int64_t i = 0; i < k * n; i++) A[i] *= inv_total;
	for (int it = 0; it < iters; it++) {
		sinkhorn_row_sums(A, n, k, rows.data());
		sinkhorn_scale_rows(A, n, k, rows.data());
		sinkhorn_scale_columns(A, n, k, n, col.data());
	}
	sinkhorn_argmax(A, n, k, MOTIF);
}

} // namespace mg
