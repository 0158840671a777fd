// The CPU loops of the row normalisation (maths in normalize.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "normalize.h"

#include <cmath>

namespace mg {

template <typename T>
void normalize_forward(const T *X, int64_t d, T eps, int64_t begin, int64_t end, T *Y, T *NRM) {
	for (int64_t i = begin; i < end; i++) {
		const T *x = X + i * d;
		T ss = 0;
#pragma omp simd reduction(+ : ss)
		for (int64_t c = 0; c < d; c++) ss += x[c] * x[c];
		T nrm = std::sqrt(ss);
		nrm = nrm > eps ? nrm : eps;
		NRM[i] = nrm;
		T *y = Y + i * d;
		for (int64_t c = 0; c < d; c++) y[c] = x[c] / nrm;
	}
}

template <typename T>
void normalize_backward(const T *Y, const T *GY, const T *NRM, int64_t d, T eps, int64_t begin, int64_t end, T *GX) {
	for (int64_t i = begin; i < end; i++) {
		const T *y = Y + i * d, *gy = GY + i * d;
		T *gx = GX + i * d;
		const T nrm = NRM[i];
		T dot = 0;
		if (nrm > eps) {
#pragma omp simd reduction(+ : dot)
			for (int64_t c = 0; c < d; c++) dot += y[c] * gy[c];
		}
		for (int64_t c = 0; c < d; c++) gx[c] = (gy[c] - y[c] * dot) / nrm;
	}
}

template void normalize_forward<float>(const float *, int64_t, float, int64_t, int64_t, float *, float *);
template void normalize_forward<double>(const double *, int64_t, double, int64_t, int64_t, double *, double *);
template void normalize_backward<float>(const float *, const float *, const float *, int64_t, float, int64_t,
                                        int64_t, float *);
template void normalize_backward<double>(const double *, const double *, const double *, int64_t, double, int64_t,
                                         int64_t, double *);

} // namespace mg
