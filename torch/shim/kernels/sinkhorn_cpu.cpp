// The CPU loops of Sinkhorn-Knopp (maths in sinkhorn.h), compiled for AVX2 and
// FMA (Makefile): see kernels/simd.h for what this translation unit may
// include.
#include "sinkhorn.h"

#include "simd.h"
#include <vector>

namespace mg {

void sinkhorn(const float *Q, int64_t n, int64_t k, float lambda, int iters, float *A, int64_t *MOTIF) {
	// A[j][l] = exp(λ·Q[l][j]); its total is summed in double: n·k terms.
	double total = 0;
	for (int64_t j = 0; j < k; j++) {
		float *a = A + j * n;
		for (int64_t l = 0; l < n; l++) a[l] = vexp(lambda * Q[l * k + j]);
		float row = 0;
#pragma omp simd reduction(+ : row)
		for (int64_t l = 0; l < n; l++) row += a[l];
		total += row;
	}
	const float inv_total = static_cast<float>(1 / total);
	for (int64_t i = 0; i < k * n; i++) A[i] *= inv_total;
	std::vector<float> col(n);
	for (int it = 0; it < iters; it++) {
		for (int64_t j = 0; j < k; j++) {
			float *a = A + j * n;
			float row = 0;
#pragma omp simd reduction(+ : row)
			for (int64_t l = 0; l < n; l++) row += a[l];
			const float scale = (1.0f / k) / row;
			for (int64_t l = 0; l < n; l++) a[l] *= scale;
		}
		for (int64_t l = 0; l < n; l++) col[l] = 0;
		for (int64_t j = 0; j < k; j++) {
			const float *a = A + j * n;
			for (int64_t l = 0; l < n; l++) col[l] += a[l];
		}
		for (int64_t l = 0; l < n; l++) col[l] = (1.0f / n) / col[l];
		for (int64_t j = 0; j < k; j++) {
			float *a = A + j * n;
			for (int64_t l = 0; l < n; l++) a[l] *= col[l];
		}
	}
	for (int64_t l = 0; l < n; l++) {
		int64_t best = 0;
		for (int64_t j = 1; j < k; j++) {
			if (A[j * n + l] > A[best * n + l]) best = j;
		}
		MOTIF[l] = best;
	}
}

} // namespace mg
