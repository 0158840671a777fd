// Compiled with -O3 -mavx2 -mfma (see the Makefile). Nothing here may call
// into other translation units' inline code: that could be shared with
// baseline-compiled code by the linker.
#include "gen_kernels.h"

#include <cstring>

namespace mg {
namespace {

inline float bits_to_float(int32_t i) {
	float f;
	std::memcpy(&f, &i, sizeof f);
	return f;
}

inline double bits_to_double(int64_t i) {
	double f;
	std::memcpy(&f, &i, sizeof f);
	return f;
}

// exp(x) = 2ⁿ·exp(r), n = round(x/ln 2), r = x − n·ln 2 (two-part ln 2), |r| ≤
// ln(2)/2; exp(r) by Taylor series, degree 7 for float (error r⁸/8! < 6e-9) and
// 13 for double (< 1e-17). Branch-free, so loops over it vectorise. Arguments
// are clamped to the normal range: results below it are tiny non-zeros
// instead of denormals, which softmax weights cannot tell apart.
inline float vexp(float x) {
	x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
	float k = x * 1.44269504088896341f;
	int32_t n = static_cast<int32_t>(k + (k >= 0 ? 0.5f : -0.5f));
	float fn = static_cast<float>(n);
	float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
	float p = 1.0f / 5040;
	p = p * r + 1.0f / 720;
	p = p * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	return p * bits_to_float((n + 127) << 23);
}

inline double vexp(double x) {
	x = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
	double k = x * 1.4426950408889634;
	// int32, not int64: AVX2 converts doubles to int32 only (|n| ≤ 1023).
	int32_t n = static_cast<int32_t>(k + (k >= 0 ? 0.5 : -0.5));
	double fn = static_cast<double>(n);
	double r = (x - fn * 6.93147180369123816490e-01) - fn * 1.90821492927058770002e-10;
	double p = 1.0 / 6227020800.0; // 1/13!
	p = p * r + 1.0 / 479001600.0;
	p = p * r + 1.0 / 39916800.0;
	p = p * r + 1.0 / 3628800.0;
	p = p * r + 1.0 / 362880.0;
	p = p * r + 1.0 / 40320.0;
	p = p * r + 1.0 / 5040.0;
	p = p * r + 1.0 / 720.0;
	p = p * r + 1.0 / 120.0;
	p = p * r + 1.0 / 24.0;
	p = p * r + 1.0 / 6.0;
	p = p * r + 0.5;
	p = p * r + 1.0;
	p = p * r + 1.0;
	return p * bits_to_double(static_cast<int64_t>(n + 1023) << 52);
}

template <typename T>
inline T message(T h, T e) {
	T pre = h + e;
	return (pre > 0 ? pre : T(0)) + T(1e-7);
}

} // namespace

template <typename T>
void gen_forward(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, int64_t d, int64_t begin,
                 int64_t end, T *O, T *Z, T *D) {
	for (int64_t i = begin; i < end; i++) {
		if (R[i] == R[i + 1]) continue;
		T *z = Z + i * d, *den = D + i * d, *o = O + i * d;
		// Pass 1: the maximum of t·m; the first edge starts it.
		const T *h0 = H + S[R[i]] * d, *e0 = E + R[i] * d;
		for (int64_t c = 0; c < d; c++) z[c] = t * message(h0[c], e0[c]);
		for (int64_t k = R[i] + 1; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = E + k * d;
			for (int64_t c = 0; c < d; c++) {
				T v = t * message(hj[c], ek[c]);
				z[c] = v > z[c] ? v : z[c];
			}
		}
		// Pass 2: the weighted sums.
		for (int64_t c = 0; c < d; c++) den[c] = o[c] = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = E + k * d;
			for (int64_t c = 0; c < d; c++) {
				T m = message(hj[c], ek[c]);
				T w = vexp(t * m - z[c]);
				den[c] += w;
				o[c] += w * m;
			}
		}
		for (int64_t c = 0; c < d; c++) o[c] /= den[c];
	}
}

// backward_nodes is gen_backward for a fixed learn_t, so that the channel
// loop has no branch; the temperature's gradient is summed per channel (a
// vector, not a scalar reduction) and then over channels.
template <typename T, bool learn_t>
void backward_nodes(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, int64_t d, int64_t begin,
                    int64_t end, const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT, T *gt) {
	for (int64_t i = begin; i < end; i++) {
		const T *o = O + i * d, *z = Z + i * d, *den = D + i * d, *g = G + i * d;
		for (int64_t c = 0; c < d; c++) gt[c] = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = E + k * d;
			T *gp = GP + k * d;
			for (int64_t c = 0; c < d; c++) {
				// The ReLU's gate as a factor: with a select GCC would sink
				// the whole gradient into a branch and not vectorise.
				T pre = hj[c] + ek[c];
				T on = pre > 0 ? T(1) : T(0);
				T m = pre * on + T(1e-7);
				T grad = g[c] * vexp(t * m - z[c]) / den[c];
				if (learn_t) {
					gt[c] += grad * m * (m - o[c]);
					grad *= 1 + t * (m - o[c]);
				}
				gp[c] = grad * on;
			}
		}
		T sum = 0;
		for (int64_t c = 0; c < d; c++) sum += gt[c];
		GT[i] = sum;
	}
}

template <typename T>
void gen_backward(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, bool learn_t, int64_t d,
                  int64_t begin, int64_t end, const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT, T *scratch) {
	if (learn_t) {
		backward_nodes<T, true>(H, E, S, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	} else {
		backward_nodes<T, false>(H, E, S, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	}
}

template void gen_forward<float>(const float *, const float *, const int64_t *, const int64_t *, float, int64_t,
                                 int64_t, int64_t, float *, float *, float *);
template void gen_forward<double>(const double *, const double *, const int64_t *, const int64_t *, double, int64_t,
                                  int64_t, int64_t, double *, double *, double *);
template void gen_backward<float>(const float *, const float *, const int64_t *, const int64_t *, float, bool,
                                  int64_t, int64_t, int64_t, const float *, const float *, const float *,
                                  const float *, float *, float *, float *);
template void gen_backward<double>(const double *, const double *, const int64_t *, const int64_t *, double, bool,
                                   int64_t, int64_t, int64_t, const double *, const double *, const double *,
                                   const double *, double *, double *, double *);

} // namespace mg
