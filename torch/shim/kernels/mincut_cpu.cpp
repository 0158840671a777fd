// The CPU loops of the MinCut regulariser (maths in mincut.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "mincut.h"

#include <cmath>

namespace mg {

namespace {

// The target of the orthogonality term: c·I on the selected diagonal, with
// c = 1/√(number of selected columns).
template <typename T>
inline T ortho_scale(const T *sel, int64_t k) {
	T j = 0;
	for (int64_t a = 0; a < k; a++) j += sel ? sel[a] : T(1);
	return j > 0 ? 1 / std::sqrt(j) : T(0);
}

} // namespace

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
		fro = fro > T(kMinCutNormFloor) ? fro : T(kMinCutNormFloor);
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

} // namespace mg
