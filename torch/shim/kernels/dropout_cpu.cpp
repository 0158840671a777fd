// The CPU loops of the counter-based dropout (maths in dropout.h), compiled for
// AVX2 and FMA (Makefile): see kernels/simd.h for what this translation unit
// may include.
#include "dropout.h"


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

} // namespace

template <typename T>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale) {
	const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
	for (int64_t i = begin; i < end; i++) {
		uint32_t h = mix((static_cast<uint32_t>(i) * 0x9e3779b9u + lo) ^ (hi + static_cast<uint32_t>(i >> 32)));
		float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f); // 24 bits: [0, 1)
		Y[i] = u >= p ? X[i] * scale : T(0);
	}
}

template void dropout_mask<float>(const float *, float *, int64_t, int64_t, uint64_t, float, float);
template void dropout_mask<double>(const double *, double *, int64_t, int64_t, uint64_t, float, double);

} // namespace mg
