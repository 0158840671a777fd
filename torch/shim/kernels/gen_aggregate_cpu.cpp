// The CPU loops of the GENConv aggregation (maths in gen_aggregate.h), compiled
// for AVX2 and FMA (Makefile): see kernels/simd.h for what this translation
// unit may include.
#include "gen_aggregate.h"

#include "simd.h"

namespace mg {

template <typename T, Isa isa>
void gen_forward(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, int64_t d,
                 int64_t begin, int64_t end, T *O, T *Z, T *D, T *X) {
	for (int64_t i = begin; i < end; i++) {
		T *z = Z + i * d, *den = D + i * d, *o = O + i * d;
		if (R[i] == R[i + 1]) {
			for (int64_t c = 0; c < d; c++) o[c] = z[c] = 0, den[c] = 1;
		} else if (R[i + 1] - R[i] == 1) {
			// One incoming edge (a terminal atom): its weight is exactly 1.
			const T *hj = H + S[R[i]] * d, *ek = Tab + B[R[i]] * d;
			for (int64_t c = 0; c < d; c++) {
				o[c] = gen_message(hj[c], ek[c]);
				z[c] = t * o[c];
				den[c] = 1;
			}
		} else {
			// Pass 1: the maximum of t·m. Pass 2 makes the messages again
			// from rows pass 1 just brought into cache: cheaper than
			// storing them (E×d) and reading them back.
			for (int64_t c = 0; c < d; c++) z[c] = T(kNoMaximum);
			for (int64_t k = R[i]; k < R[i + 1]; k++) {
				const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
				for (int64_t c = 0; c < d; c++) {
					T v = t * gen_message(hj[c], ek[c]);
					z[c] = v > z[c] ? v : z[c];
				}
			}
			// Pass 2: the weighted sums.
			for (int64_t c = 0; c < d; c++) den[c] = o[c] = 0;
			for (int64_t k = R[i]; k < R[i + 1]; k++) {
				const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
				for (int64_t c = 0; c < d; c++) {
					T m = gen_message(hj[c], ek[c]);
					T w = vexp(t * m - z[c]);
					den[c] += w;
					o[c] += w * m;
				}
			}
			for (int64_t c = 0; c < d; c++) o[c] /= den[c];
		}
		const T *hi = H + i * d;
		T *x = X + i * d;
		for (int64_t c = 0; c < d; c++) x[c] = hi[c] + o[c];
	}
}

namespace {

// backward_nodes is gen_backward for a fixed learn_t, so that the channel
// loop has no branch; the temperature's gradient is summed per channel (a
// vector, not a scalar reduction) and then over channels. The message of a
// zero pre-activation is exactly ε, so m > ε is the ReLU's gate.
template <typename T, bool learn_t>
void backward_nodes(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, int64_t d,
                    int64_t begin, int64_t end, const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT, T *gt) {
	const T eps = T(kGENMessageEpsilon);
	for (int64_t i = begin; i < end; i++) {
		const T *o = O + i * d, *z = Z + i * d, *den = D + i * d, *g = G + i * d;
		GT[i] = 0;
		if (R[i + 1] - R[i] == 1) {
			// One incoming edge: a = 1 and m = out, so the gradient passes
			// straight to the message and none goes to t.
			const T *hj = H + S[R[i]] * d, *ek = Tab + B[R[i]] * d;
			T *gp = GP + R[i] * d;
			for (int64_t c = 0; c < d; c++) gp[c] = gen_message(hj[c], ek[c]) > eps ? g[c] : T(0);
			continue;
		}
		for (int64_t c = 0; c < d; c++) gt[c] = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
			T *gp = GP + k * d;
			for (int64_t c = 0; c < d; c++) {
				const T m = gen_message(hj[c], ek[c]);
				// The gate as a factor: with a select GCC would sink the
				// whole gradient into a branch and not vectorise.
				T on = m > eps ? T(1) : T(0);
				T grad = g[c] * vexp(t * m - z[c]) / den[c];
				if (learn_t) {
					gt[c] += grad * m * (m - o[c]);
					grad *= 1 + t * (m - o[c]);
				}
				gp[c] = grad * on;
			}
		}
		T sum = 0;
#pragma omp simd reduction(+ : sum)
		for (int64_t c = 0; c < d; c++) sum += gt[c];
		GT[i] = sum;
	}
}

} // namespace

template <typename T, Isa isa>
void gen_backward(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, bool learn_t,
                  int64_t d, int64_t begin, int64_t end, const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT,
                  T *scratch) {
	if (learn_t) {
		backward_nodes<T, true>(H, Tab, B, S, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	} else {
		backward_nodes<T, false>(H, Tab, B, S, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	}
}

template <typename T, Isa isa>
void gen_scatter_back(const T *GP, const int64_t *S, const int64_t *B, int64_t edges, int64_t d, int64_t c0,
                      int64_t c1, T *GH, T *GTab) {
	for (int64_t k = 0; k < edges; k++) {
		const T *gp = GP + k * d;
		T *gh = GH + S[k] * d, *gt = GTab + B[k] * d;
		for (int64_t c = c0; c < c1; c++) {
			gh[c] += gp[c];
			gt[c] += gp[c];
		}
	}
}

template void gen_forward<float, MG_ISA>(const float *, const float *, const int64_t *, const int64_t *, const int64_t *, float,
                                 int64_t, int64_t, int64_t, float *, float *, float *, float *);
template void gen_forward<double, MG_ISA>(const double *, const double *, const int64_t *, const int64_t *, const int64_t *,
                                  double, int64_t, int64_t, int64_t, double *, double *, double *, double *);
template void gen_backward<float, MG_ISA>(const float *, const float *, const int64_t *, const int64_t *, const int64_t *,
                                  float, bool, int64_t, int64_t, int64_t, const float *, const float *,
                                  const float *, const float *, float *, float *, float *);
template void gen_backward<double, MG_ISA>(const double *, const double *, const int64_t *, const int64_t *, const int64_t *,
                                   double, bool, int64_t, int64_t, int64_t, const double *, const double *,
                                   const double *, const double *, double *, double *, double *);
template void gen_scatter_back<float, MG_ISA>(const float *, const int64_t *, const int64_t *, int64_t, int64_t, int64_t,
                                      int64_t, float *, float *);
template void gen_scatter_back<double, MG_ISA>(const double *, const int64_t *, const int64_t *, int64_t, int64_t, int64_t,
                                       int64_t, double *, double *);

} // namespace mg
