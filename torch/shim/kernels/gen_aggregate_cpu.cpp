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
			// storing them (E×d) and reading them back. Each pass's first
			// edge starts the row (from kNoMaximum and from zeros, by the
			// same arithmetic as the edges after it, without a pass to set
			// the start).
			for (int64_t k = R[i]; k < R[i + 1]; k++) {
				const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
				if (k == R[i]) {
					for (int64_t c = 0; c < d; c++) {
						T v = t * gen_message(hj[c], ek[c]);
						z[c] = v > T(kNoMaximum) ? v : T(kNoMaximum);
					}
					continue;
				}
				for (int64_t c = 0; c < d; c++) {
					T v = t * gen_message(hj[c], ek[c]);
					z[c] = v > z[c] ? v : z[c];
				}
			}
			// Pass 2: the weighted sums. The first edge's w and w·m are
			// positive, so writing them equals adding them to zeros.
			for (int64_t k = R[i]; k < R[i + 1]; k++) {
				const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
				if (k == R[i]) {
					for (int64_t c = 0; c < d; c++) {
						T m = gen_message(hj[c], ek[c]);
						T w = vexp(t * m - z[c]);
						den[c] = w;
						o[c] = w * m;
					}
					continue;
				}
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

// add_to_source adds an edge's gradient gp (channels [c0, c1), made by
// grad(c)) into its source's row gh: the row's first edge writes 0 + gp, the
// same values as adding to zeros, without a pass to make the zeros.
template <typename T, typename F>
inline void add_to_source(T *__restrict__ gh, T *__restrict__ gtab, bool first, int64_t c0, int64_t c1, F grad) {
	if (first) {
		for (int64_t c = c0; c < c1; c++) {
			const T gp = grad(c);
			gh[c] = T(0) + gp;
			gtab[c] += gp;
		}
		return;
	}
	for (int64_t c = c0; c < c1; c++) {
		const T gp = grad(c);
		gh[c] += gp;
		gtab[c] += gp;
	}
}

// backward_slice is gen_backward for a fixed learn_t, so that the channel
// loop has no branch. The message of a zero pre-activation is exactly ε, so
// m > ε is the ReLU's gate.
template <typename T, bool learn_t>
void backward_slice(const T *__restrict__ H, const T *__restrict__ Tab, const int64_t *B, const int64_t *S,
                    const int64_t *R, T t, int64_t n, int64_t d, int64_t c0, int64_t c1, const T *__restrict__ O,
                    const T *__restrict__ Z, const T *__restrict__ D, const T *__restrict__ G, T *__restrict__ GH,
                    T *__restrict__ GTab, T *__restrict__ GTC, uint8_t *touched) {
	const T eps = T(kGENMessageEpsilon);
	for (int64_t i = 0; i < n; i++) {
		const T *o = O + i * d, *z = Z + i * d, *den = D + i * d, *g = G + i * d;
		T *gt = learn_t ? GTC + i * d : nullptr;
		if (learn_t) {
			for (int64_t c = c0; c < c1; c++) gt[c] = 0;
		}
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = Tab + B[k] * d;
			T *gh = GH + S[k] * d, *gtab = GTab + B[k] * d;
			const bool first = !touched[S[k]];
			touched[S[k]] = 1;
			if (R[i + 1] - R[i] == 1) {
				// One incoming edge: a = 1 and m = out, so the gradient
				// passes straight to the message and none goes to t.
				add_to_source(gh, gtab, first, c0, c1,
				              [=](int64_t c) { return gen_message(hj[c], ek[c]) > eps ? g[c] : T(0); });
				continue;
			}
			add_to_source(gh, gtab, first, c0, c1, [=](int64_t c) {
				const T m = gen_message(hj[c], ek[c]);
				// The gate as a factor: with a select GCC would sink the
				// whole gradient into a branch and not vectorise.
				T on = m > eps ? T(1) : T(0);
				T grad = g[c] * vexp(t * m - z[c]) / den[c];
				if (learn_t) {
					gt[c] += grad * m * (m - o[c]);
					grad *= 1 + t * (m - o[c]);
				}
				return grad * on;
			});
		}
	}
	for (int64_t i = 0; i < n; i++) {
		T *gh = GH + i * d;
		const T *g = G + i * d;
		if (touched[i]) {
			for (int64_t c = c0; c < c1; c++) gh[c] += g[c]; // x = h + out
		} else {
			for (int64_t c = c0; c < c1; c++) gh[c] = T(0) + g[c];
		}
	}
}

} // namespace

template <typename T, Isa isa>
void gen_backward(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, bool learn_t,
                  int64_t n, int64_t d, int64_t c0, int64_t c1, const T *O, const T *Z, const T *D, const T *G, T *GH,
                  T *GTab, T *GTC, uint8_t *touched) {
	if (learn_t) {
		backward_slice<T, true>(H, Tab, B, S, R, t, n, d, c0, c1, O, Z, D, G, GH, GTab, GTC, touched);
	} else {
		backward_slice<T, false>(H, Tab, B, S, R, t, n, d, c0, c1, O, Z, D, G, GH, GTab, GTC, touched);
	}
}

template <typename T, Isa isa>
void gen_temperature_parts(const T *GTC, int64_t d, int64_t begin, int64_t end, T *GT) {
	for (int64_t i = begin; i < end; i++) {
		const T *gt = GTC + i * d;
		T sum = 0;
#pragma omp simd reduction(+ : sum)
		for (int64_t c = 0; c < d; c++) sum += gt[c];
		GT[i] = sum;
	}
}

template void gen_forward<float, MG_ISA>(const float *, const float *, const int64_t *, const int64_t *, const int64_t *, float,
                                 int64_t, int64_t, int64_t, float *, float *, float *, float *);
template void gen_forward<double, MG_ISA>(const double *, const double *, const int64_t *, const int64_t *, const int64_t *,
                                  double, int64_t, int64_t, int64_t, double *, double *, double *, double *);
template void gen_backward<float, MG_ISA>(const float *, const float *, const int64_t *, const int64_t *, const int64_t *,
                                  float, bool, int64_t, int64_t, int64_t, int64_t, const float *, const float *,
                                  const float *, const float *, float *, float *, float *, uint8_t *);
template void gen_backward<double, MG_ISA>(const double *, const double *, const int64_t *, const int64_t *,
                                   const int64_t *, double, bool, int64_t, int64_t, int64_t, int64_t, const double *,
                                   const double *, const double *, const double *, double *, double *, double *,
                                   uint8_t *);
template void gen_temperature_parts<float, MG_ISA>(const float *, int64_t, int64_t, int64_t, float *);
template void gen_temperature_parts<double, MG_ISA>(const double *, int64_t, int64_t, int64_t, double *);

} // namespace mg
