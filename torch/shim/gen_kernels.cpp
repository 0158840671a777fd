// Compiled with -O3 -mavx2 -mfma (see the Makefile). Nothing here may call
// into other translation units' inline code: that could be shared with
// baseline-compiled code by the linker.
#include "gen_kernels.h"

#include <cmath>
#include <cstring>
#include <vector>

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
                 int64_t end, T *M, T *O, T *Z, T *D) {
	for (int64_t i = begin; i < end; i++) {
		T *z = Z + i * d, *den = D + i * d, *o = O + i * d;
		if (R[i] == R[i + 1]) {
			for (int64_t c = 0; c < d; c++) o[c] = z[c] = 0, den[c] = 1;
			continue;
		}
		if (R[i + 1] - R[i] == 1) {
			// One incoming edge (a terminal atom): its weight is exactly 1.
			const T *hj = H + S[R[i]] * d, *ek = E + R[i] * d;
			T *m = M + R[i] * d;
			for (int64_t c = 0; c < d; c++) {
				m[c] = o[c] = message(hj[c], ek[c]);
				z[c] = t * o[c];
				den[c] = 1;
			}
			continue;
		}
		// Pass 1: the messages and the maximum of t·m.
		for (int64_t c = 0; c < d; c++) z[c] = T(-1e30);
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *hj = H + S[k] * d, *ek = E + k * d;
			T *m = M + k * d;
			for (int64_t c = 0; c < d; c++) {
				m[c] = message(hj[c], ek[c]);
				T v = t * m[c];
				z[c] = v > z[c] ? v : z[c];
			}
		}
		// Pass 2: the weighted sums.
		for (int64_t c = 0; c < d; c++) den[c] = o[c] = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *m = M + k * d;
			for (int64_t c = 0; c < d; c++) {
				T w = vexp(t * m[c] - z[c]);
				den[c] += w;
				o[c] += w * m[c];
			}
		}
		for (int64_t c = 0; c < d; c++) o[c] /= den[c];
	}
}

template <typename T>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, T eps, T *Y, T *M, T *V, T *VAR) {
	for (int64_t j = 0; j < c; j++) M[j] = VAR[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) M[j] += x[j];
	}
	for (int64_t j = 0; j < c; j++) M[j] /= n;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		for (int64_t j = 0; j < c; j++) VAR[j] += (x[j] - M[j]) * (x[j] - M[j]);
	}
	for (int64_t j = 0; j < c; j++) {
		VAR[j] /= n;
		V[j] = 1 / std::sqrt(VAR[j] + eps);
	}
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c;
		T *y = Y + i * c;
		for (int64_t j = 0; j < c; j++) y[j] = (x[j] - M[j]) * V[j] * W[j] + B[j];
	}
}

template <typename T>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, T *GX,
                         T *GW, T *GB) {
	for (int64_t j = 0; j < c; j++) GW[j] = GB[j] = 0;
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		for (int64_t j = 0; j < c; j++) {
			GB[j] += g[j];
			GW[j] += g[j] * (x[j] - M[j]) * V[j];
		}
	}
	for (int64_t i = 0; i < n; i++) {
		const T *x = X + i * c, *g = G + i * c;
		T *gx = GX + i * c;
		for (int64_t j = 0; j < c; j++) {
			T xhat = (x[j] - M[j]) * V[j];
			gx[j] = W[j] * V[j] * (g[j] - GB[j] / n - xhat * GW[j] / n);
		}
	}
}

template <typename T>
void adam_update(T *P, const T *G, T *M, T *V, int64_t n, T lr, T beta1, T beta2, T eps, T wd, bool decoupled,
                 T bias1, T bias2_sqrt) {
	const T shrink = decoupled ? 1 - lr * wd : T(1), l2 = decoupled ? T(0) : wd, step = lr / bias1;
	for (int64_t i = 0; i < n; i++) {
		T g = G[i] + l2 * P[i];
		T p = P[i] * shrink;
		M[i] = M[i] * beta1 + g * (1 - beta1);
		V[i] = V[i] * beta2 + g * g * (1 - beta2);
		P[i] = p - step * M[i] / (std::sqrt(V[i]) / bias2_sqrt + eps);
	}
}

// The target of the orthogonality term: c·I on the selected diagonal, with
// c = 1/√(number of selected columns).
template <typename T>
inline T ortho_scale(const T *sel, int64_t k) {
	T j = 0;
	for (int64_t a = 0; a < k; a++) j += sel ? sel[a] : T(1);
	return j > 0 ? 1 / std::sqrt(j) : T(0);
}

template <typename T>
void mincut_forward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                    int64_t begin, int64_t end, T *CUT, T *ORTHO, T *NUM, T *DEN, T *GRAM, T *FRO) {
	for (int64_t g = begin; g < end; g++) {
		const T *sel = SEL ? SEL + g * k : nullptr;
		T *G = GRAM + g * k * k;
		for (int64_t i = 0; i < k * k; i++) G[i] = 0;
		T num = 0, den = 0;
		for (int64_t v = GP[g]; v < GP[g + 1]; v++) {
			const T *qv = Q + v * k;
			T sq = 0;
			for (int64_t a = 0; a < k; a++) sq += qv[a] * qv[a];
			den += static_cast<T>(R[v + 1] - R[v]) * sq;
			for (int64_t e = R[v]; e < R[v + 1]; e++) {
				const T *qu = Q + S[e] * k;
				T dot = 0;
				for (int64_t a = 0; a < k; a++) dot += qu[a] * qv[a];
				num += dot;
			}
			for (int64_t a = 0; a < k; a++) {
				T *row = G + a * k;
				for (int64_t b = 0; b < k; b++) row[b] += qv[a] * qv[b];
			}
		}
		if (sel) {
			for (int64_t a = 0; a < k; a++) {
				for (int64_t b = 0; b < k; b++) G[a * k + b] *= sel[a] * sel[b];
			}
		}
		T fro = 0;
		for (int64_t i = 0; i < k * k; i++) fro += G[i] * G[i];
		fro = std::sqrt(fro);
		fro = fro > T(1e-30) ? fro : T(1e-30); // as the composed form's clamp
		const T c = ortho_scale(sel, k);
		T ortho = 0;
		if (c > 0) {
			for (int64_t a = 0; a < k; a++) {
				for (int64_t b = 0; b < k; b++) {
					T diff = G[a * k + b] / fro - (a == b && (!sel || sel[a] > 0) ? c : T(0));
					ortho += diff * diff;
				}
			}
			ortho = std::sqrt(ortho);
		}
		NUM[g] = num;
		DEN[g] = den;
		CUT[g] = den > 0 ? -num / den : T(0);
		ORTHO[g] = ortho;
		FRO[g] = fro;
	}
}

template <typename T>
void mincut_backward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                     int64_t begin, int64_t end, const T *ORTHO, const T *NUM, const T *DEN, const T *GRAM,
                     const T *FRO, const T *GC, const T *GO, T *GQ, T *scratch) {
	T *dG = scratch; // k×k: ∂L/∂G, symmetrised and doubled
	for (int64_t g = begin; g < end; g++) {
		const T *sel = SEL ? SEL + g * k : nullptr;
		const T *G = GRAM + g * k * k;
		const T fro = FRO[g], ortho = ORTHO[g], c = ortho_scale(sel, k);
		for (int64_t i = 0; i < k * k; i++) dG[i] = 0;
		if (ortho > 0 && GO[g] != 0) {
			T tr = 0;
			for (int64_t a = 0; a < k; a++) tr += (!sel || sel[a] > 0) ? G[a * k + a] : T(0);
			const T w = GO[g] / ortho, common = (fro - c * tr) / (fro * fro * fro);
			for (int64_t a = 0; a < k; a++) {
				for (int64_t b = 0; b < k; b++) {
					T target = a == b && (!sel || sel[a] > 0) ? c : T(0);
					T d = w * ((G[a * k + b] / fro - target) / fro - G[a * k + b] * common);
					if (sel) d *= sel[a] * sel[b];
					dG[a * k + b] = d;
				}
			}
			// G is symmetric: ∂L/∂q = (∂L/∂G + ∂L/∂Gᵀ)·q.
			for (int64_t a = 0; a < k; a++) {
				for (int64_t b = a; b < k; b++) {
					T sym = dG[a * k + b] + dG[b * k + a];
					dG[a * k + b] = dG[b * k + a] = sym;
				}
			}
		}
		const T den = DEN[g];
		const T gnum = den > 0 ? -GC[g] / den : T(0);                  // ∂L/∂num
		const T gden = den > 0 ? GC[g] * NUM[g] / (den * den) : T(0); // ∂L/∂den
		for (int64_t v = GP[g]; v < GP[g + 1]; v++) {
			const T *qv = Q + v * k;
			T *gv = GQ + v * k;
			const T deg = static_cast<T>(R[v + 1] - R[v]);
			for (int64_t a = 0; a < k; a++) {
				T acc = 2 * gden * deg * qv[a];
				const T *row = dG + a * k;
				for (int64_t b = 0; b < k; b++) acc += row[b] * qv[b];
				gv[a] += acc;
			}
			// num = Σ over edges u→v of ⟨q_u, q_v⟩: both ends get the other's row.
			for (int64_t e = R[v]; e < R[v + 1]; e++) {
				const T *qu = Q + S[e] * k;
				T *gu = GQ + S[e] * k;
				for (int64_t a = 0; a < k; a++) {
					gv[a] += gnum * qu[a];
					gu[a] += gnum * qv[a];
				}
			}
		}
	}
}

template void mincut_forward<float>(const float *, const int64_t *, const int64_t *, const int64_t *, const float *,
                                    int64_t, int64_t, int64_t, float *, float *, float *, float *, float *, float *);
template void mincut_forward<double>(const double *, const int64_t *, const int64_t *, const int64_t *,
                                     const double *, int64_t, int64_t, int64_t, double *, double *, double *, double *,
                                     double *, double *);
template void mincut_backward<float>(const float *, const int64_t *, const int64_t *, const int64_t *, const float *,
                                     int64_t, int64_t, int64_t, const float *, const float *, const float *,
                                     const float *, const float *, const float *, const float *, float *, float *);
template void mincut_backward<double>(const double *, const int64_t *, const int64_t *, const int64_t *,
                                      const double *, int64_t, int64_t, int64_t, const double *, const double *,
                                      const double *, const double *, const double *, const double *, const double *,
                                      double *, double *);

template void adam_update<float>(float *, const float *, float *, float *, int64_t, float, float, float, float, float,
                                 bool, float, float);
template void adam_update<double>(double *, const double *, double *, double *, int64_t, double, double, double,
                                  double, double, bool, double, double);

template void batch_norm_forward<float>(const float *, const float *, const float *, int64_t, int64_t, float, float *,
                                        float *, float *, float *);
template void batch_norm_forward<double>(const double *, const double *, const double *, int64_t, int64_t, double,
                                         double *, double *, double *, double *);
template void batch_norm_backward<float>(const float *, const float *, const float *, const float *, const float *,
                                         int64_t, int64_t, float *, float *, float *);
template void batch_norm_backward<double>(const double *, const double *, const double *, const double *,
                                          const double *, int64_t, int64_t, double *, double *, double *);

// backward_nodes is gen_backward for a fixed learn_t, so that the channel
// loop has no branch; the temperature's gradient is summed per channel (a
// vector, not a scalar reduction) and then over channels. The message of a
// zero pre-activation is exactly 1e-7, so m > 1e-7 is the ReLU's gate.
template <typename T, bool learn_t>
void backward_nodes(const T *M, const int64_t *R, T t, int64_t d, int64_t begin, int64_t end, const T *O, const T *Z,
                    const T *D, const T *G, T *GP, T *GT, T *gt) {
	const T eps = T(1e-7);
	for (int64_t i = begin; i < end; i++) {
		const T *o = O + i * d, *z = Z + i * d, *den = D + i * d, *g = G + i * d;
		GT[i] = 0;
		if (R[i + 1] - R[i] == 1) {
			// One incoming edge: a = 1 and m = out, so the gradient passes
			// straight to the message and none goes to t.
			const T *m = M + R[i] * d;
			T *gp = GP + R[i] * d;
			for (int64_t c = 0; c < d; c++) gp[c] = m[c] > eps ? g[c] : T(0);
			continue;
		}
		for (int64_t c = 0; c < d; c++) gt[c] = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T *m = M + k * d;
			T *gp = GP + k * d;
			for (int64_t c = 0; c < d; c++) {
				// The gate as a factor: with a select GCC would sink the
				// whole gradient into a branch and not vectorise.
				T on = m[c] > eps ? T(1) : T(0);
				T grad = g[c] * vexp(t * m[c] - z[c]) / den[c];
				if (learn_t) {
					gt[c] += grad * m[c] * (m[c] - o[c]);
					grad *= 1 + t * (m[c] - o[c]);
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

template <typename T>
void gen_backward(const T *M, const int64_t *R, T t, bool learn_t, int64_t d, int64_t begin, int64_t end, const T *O,
                  const T *Z, const T *D, const T *G, T *GP, T *GT, T *scratch) {
	if (learn_t) {
		backward_nodes<T, true>(M, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	} else {
		backward_nodes<T, false>(M, R, t, d, begin, end, O, Z, D, G, GP, GT, scratch);
	}
}

// A 32-bit avalanche hash of an element index and the seed (Chris Wellons'
// "lowbias32" mixer, after the index is spread by the golden-ratio constant):
// multiplies and shifts of 32-bit lanes only, so the mask loop vectorises.
inline uint32_t mix(uint32_t h) {
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

template <typename T>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
	for (int64_t i = begin; i < end; i++) {
		uint32_t h = mix((static_cast<uint32_t>(i) * 0x9e3779b9u + lo) ^ (hi + static_cast<uint32_t>(i >> 32)));
		float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f); // 24 bits: [0, 1)
		Y[i] = u >= p ? X[i] * scale : T(0);
	}
}

template <typename T>
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

template <typename T>
void bag_sum_backward(const T *G, const int64_t *I, int64_t F, int64_t d, int64_t n, T *GW) {
	for (int64_t i = 0; i < n; i++) {
		const T *g = G + i * d;
		for (int64_t f = 0; f < F; f++) {
			T *gw = GW + I[i * F + f] * d;
			for (int64_t c = 0; c < d; c++) gw[c] += g[c];
		}
	}
}

template <typename T>
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

template <typename T>
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

template void group_sum_forward<float>(const float *, const int64_t *, const int64_t *, const float *, int64_t,
                                       int64_t, float *, float *);
template void group_sum_forward<double>(const double *, const int64_t *, const int64_t *, const double *, int64_t,
                                        int64_t, double *, double *);
template void group_mean_backward<float>(const float *, const int64_t *, const int64_t *, const float *,
                                         const float *, int64_t, int64_t, float *);
template void group_mean_backward<double>(const double *, const int64_t *, const int64_t *, const double *,
                                          const double *, int64_t, int64_t, double *);

template <typename T>
void block_contrast_forward(const T *Y, const T *L, int64_t cols, int64_t S, int64_t begin, int64_t end, T *LSE,
                            T *LOSS, T *NPOS) {
	for (int64_t i = begin; i < end; i++) {
		const T *y = Y + i * cols;
		T mx = -1e30;
#pragma omp simd reduction(max : mx)
		for (int64_t j = 0; j < cols; j++) {
			T v = L[j] > 0 ? y[j] : T(-1e30);
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

template void normalize_forward<float>(const float *, int64_t, float, int64_t, int64_t, float *, float *);
template void normalize_forward<double>(const double *, int64_t, double, int64_t, int64_t, double *, double *);
template void normalize_backward<float>(const float *, const float *, const float *, int64_t, float, int64_t,
                                        int64_t, float *);
template void normalize_backward<double>(const double *, const double *, const double *, int64_t, double, int64_t,
                                         int64_t, double *);

template void dropout_mask<float>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void dropout_mask<double>(const double *, double *, int64_t, int64_t, uint64_t, float, double);
template void bag_sum_forward<float>(const float *, const int64_t *, int64_t, int64_t, int64_t, int64_t, float *);
template void bag_sum_forward<double>(const double *, const int64_t *, int64_t, int64_t, int64_t, int64_t, double *);
template void bag_sum_backward<float>(const float *, const int64_t *, int64_t, int64_t, int64_t, float *);
template void bag_sum_backward<double>(const double *, const int64_t *, int64_t, int64_t, int64_t, double *);

template void gen_forward<float>(const float *, const float *, const int64_t *, const int64_t *, float, int64_t,
                                 int64_t, int64_t, float *, float *, float *, float *);
template void gen_forward<double>(const double *, const double *, const int64_t *, const int64_t *, double, int64_t,
                                  int64_t, int64_t, double *, double *, double *, double *);
template void gen_backward<float>(const float *, const int64_t *, float, bool, int64_t, int64_t, int64_t,
                                  const float *, const float *, const float *, const float *, float *, float *,
                                  float *);
template void gen_backward<double>(const double *, const int64_t *, double, bool, int64_t, int64_t, int64_t,
                                   const double *, const double *, const double *, const double *, double *, double *,
                                   double *);

} // namespace mg
