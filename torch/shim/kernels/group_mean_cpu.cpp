// The CPU loops of the weighted group mean (maths in group_mean.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "group_mean.h"


namespace mg {

template <typename T, Isa isa>
void group_sum_forward(const T *X, const int64_t *Rows, const int64_t *Groups, const T *Wt, int64_t p, int64_t d,
                       T *O, T *C) {
	for (int64_t i = 0; i < p; i++) {
		const T w = Wt[i];
		if (w == 0) continue;
		const T *x = X + Rows[i] * d;
		T *o = O + Groups[i] * d;
		for (int64_t c = 0; c < d; c++) o[c] += w * x[c];
		C[Groups[i]] += w;
	}
}

template <typename T, Isa isa>
void group_mean_backward(const T *G, const int64_t *Rows, const int64_t *Groups, const T *Wt, const T *C, int64_t p,
                         int64_t d, T *GX) {
	for (int64_t i = 0; i < p; i++) {
		const T w = Wt[i];
		if (w == 0) continue;
		const T count = C[Groups[i]];
		const T scale = w / (count > 1 ? count : T(1));
		const T *g = G + Groups[i] * d;
		T *gx = GX + Rows[i] * d;
		for (int64_t c = 0; c < d; c++) gx[c] += scale * g[c];
	}
}

template void group_sum_forward<float, MG_ISA>(const float *, const int64_t *, const int64_t *, const float *, int64_t,
                                       int64_t, float *, float *);
template void group_sum_forward<double, MG_ISA>(const double *, const int64_t *, const int64_t *, const double *, int64_t,
                                        int64_t, double *, double *);
template void group_mean_backward<float, MG_ISA>(const float *, const int64_t *, const int64_t *, const float *,
                                         const float *, int64_t, int64_t, float *);
template void group_mean_backward<double, MG_ISA>(const double *, const int64_t *, const int64_t *, const double *,
                                          const double *, int64_t, int64_t, double *);

} // namespace mg
