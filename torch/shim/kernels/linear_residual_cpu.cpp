// The CPU loop of the linear layer's bias and residual (maths in
// linear_residual.h), compiled for AVX2 and FMA (Makefile): see
// kernels/simd.h for what this translation unit may include.
#include "linear_residual.h"

namespace mg {

template <typename T, Isa isa>
void bias_residual(const T *Y, const T *b, const T *R, int64_t c, int64_t begin, int64_t end, T *Z) {
	for (int64_t i = begin; i < end; i++) {
		const T *y = Y + i * c, *r = R + i * c;
		T *z = Z + i * c;
		for (int64_t j = 0; j < c; j++) z[j] = (y[j] + b[j]) + r[j];
	}
}

template void bias_residual<float, MG_ISA>(const float *, const float *, const float *, int64_t, int64_t, int64_t,
                                           float *);
template void bias_residual<double, MG_ISA>(const double *, const double *, const double *, int64_t, int64_t,
                                            int64_t, double *);

} // namespace mg
