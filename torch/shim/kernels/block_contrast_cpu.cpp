// The CPU loops of the block contrast (maths in block_contrast.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "block_contrast.h"

#include "simd.h"
#include <cmath>

namespace mg {

template <typename T>
void block_contrast_forward(const T *Y, const T *L, int64_t cols, int64_t S, int64_t begin, int64_t end, T *LSE,
                            T *LOSS, T *NPOS) {
	for (int64_t i = begin; i < end; i++) {
		const T *y = Y + i * cols;
		T mx = kNoMaximum;
#pragma omp simd reduction(max : mx)
		for (int64_t j = 0; j < cols; j++) {
			T v = L[j] > 0 ? y[j] : T(kNoMaximum);
			mx = v > mx ? v : mx;
		}
		T sum = 0;
#pragma omp simd reduction(+ : sum)
		for (int64_t j = 0; j < cols; j++) sum += L[j] * vexp(y[j] - mx);
		T lse = sum > 0 ? mx + std::log(sum) : T(0);
		T pos = 0, npos = 0;
		for (int64_t j = i * S; j < (i + 1) * S; j++) {
			pos += L[j] * (y[j] - lse);
			npos += L[j];
		}
		LSE[i] = lse;
		LOSS[i] = -pos;
		NPOS[i] = npos;
	}
}

template <typename T>
void block_contrast_backward(const T *Y, const T *L, const T *LSE, const T *NPOS, const T *C, int64_t cols,
                             int64_t S, int64_t begin, int64_t end, T *GY) {
	for (int64_t i = begin; i < end; i++) {
		const T *y = Y + i * cols;
		T *gy = GY + i * cols;
		const T c = NPOS[i] > 0 ? C[i] : T(0), np = NPOS[i], lse = LSE[i];
		for (int64_t j = 0; j < cols; j++) gy[j] = c * L[j] * np * vexp(y[j] - lse);
		for (int64_t j = i * S; j < (i + 1) * S; j++) gy[j] -= c * L[j];
	}
}

template void block_contrast_forward<float>(const float *, const float *, int64_t, int64_t, int64_t, int64_t,
                                            float *, float *, float *);
template void block_contrast_forward<double>(const double *, const double *, int64_t, int64_t, int64_t, int64_t,
                                             double *, double *, double *);
template void block_contrast_backward<float>(const float *, const float *, const float *, const float *,
                                             const float *, int64_t, int64_t, int64_t, int64_t, float *);
template void block_contrast_backward<double>(const double *, const double *, const double *, const double *,
                                              const double *, int64_t, int64_t, int64_t, int64_t, double *);

} // namespace mg
