// The CPU loops of the counter-based dropout (maths in dropout.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "dropout.h"

#include <algorithm>

namespace mg {

namespace {

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

// each_mask_bit walks the mask of elements [begin, end) for seed and p, calling
// f(i, kept) for each: the hash of (seed, i) mapped to [0, 1) is at least p.
template <typename F>
inline void each_mask_bit(int64_t begin, int64_t end, uint64_t seed, float p, F f) {
	const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
	// In runs of indices that share their upper 32 bits, so that the hash is
	// all 32-bit lanes (eight to a vector) and the index is a 32-bit counter.
	for (int64_t start = begin; start < end;) {
		const int64_t stop = std::min({end, ((start >> 32) + 1) << 32, start + (int64_t(1) << 31)});
		const uint32_t first = static_cast<uint32_t>(start), top = hi + static_cast<uint32_t>(start >> 32);
		const uint32_t count = static_cast<uint32_t>(stop - start);
		for (uint32_t j = 0; j < count; j++) {
			uint32_t h = mix(((first + j) * 0x9e3779b9u + lo) ^ top);
			float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f); // 24 bits: [0, 1)
			f(start + j, u >= p);
		}
		start = stop;
	}
}

} // namespace

template <typename T, Isa isa>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { Y[i] = kept ? X[i] * scale : T(0); });
}

template <typename T, Isa isa>
void relu_dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { Y[i] = kept && X[i] > 0 ? X[i] * scale : T(0); });
}

template <typename T, Isa isa>
void relu_dropout_grad(const T *G, const T *X, T *GX, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	each_mask_bit(begin, end, seed, p, [=](int64_t i, bool kept) { GX[i] = kept && X[i] > 0 ? G[i] * scale : T(0); });
}

template void dropout_mask<float, MG_ISA>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void dropout_mask<double, MG_ISA>(const double *, double *, int64_t, int64_t, uint64_t, float, double);
template void relu_dropout_mask<float, MG_ISA>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void relu_dropout_mask<double, MG_ISA>(const double *, double *, int64_t, int64_t, uint64_t, float, double);
template void relu_dropout_grad<float, MG_ISA>(const float *, const float *, float *, int64_t, int64_t, uint64_t, float,
                                               float);
template void relu_dropout_grad<double, MG_ISA>(const double *, const double *, double *, int64_t, int64_t, uint64_t,
                                                float, double);

} // namespace mg
