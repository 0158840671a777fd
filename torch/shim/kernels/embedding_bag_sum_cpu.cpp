// The CPU loops of the embedding-bag sum (maths in embedding_bag_sum.h),
// compiled for AVX2 and FMA (Makefile): see kernels/simd.h for what this
// translation unit may include.
#include "embedding_bag_sum.h"


namespace mg {

template <typename T, Isa isa>
void bag_sum_forward(const T *W, const int64_t *I, int64_t F, int64_t d, int64_t begin, int64_t end, T *O) {
	for (int64_t i = begin; i < end; i++) {
		T *o = O + i * d;
		const T *w0 = W + I[i * F] * d;
		for (int64_t c = 0; c < d; c++) o[c] = w0[c];
		for (int64_t f = 1; f < F; f++) {
			const T *w = W + I[i * F + f] * d;
			for (int64_t c = 0; c < d; c++) o[c] += w[c];
		}
	}
}

template <typename T, Isa isa>
void bag_sum_backward(const T *G, const int64_t *I, int64_t F, int64_t d, int64_t n, T *GW) {
	for (int64_t i = 0; i < n; i++) {
		const T *g = G + i * d;
		for (int64_t f = 0; f < F; f++) {
			T *gw = GW + I[i * F + f] * d;
			for (int64_t c = 0; c < d; c++) gw[c] += g[c];
		}
	}
}

template void bag_sum_forward<float, MG_ISA>(const float *, const int64_t *, int64_t, int64_t, int64_t, int64_t, float *);
template void bag_sum_forward<double, MG_ISA>(const double *, const int64_t *, int64_t, int64_t, int64_t, int64_t, double *);
template void bag_sum_backward<float, MG_ISA>(const float *, const int64_t *, int64_t, int64_t, int64_t, float *);
template void bag_sum_backward<double, MG_ISA>(const double *, const int64_t *, int64_t, int64_t, int64_t, double *);

} // namespace mg
