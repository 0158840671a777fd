// The counter-based dropout mask (dropout.h), shared by the CPU loops that
// apply it: dropout_cpu.cpp and batch_norm_cpu.cpp (batch norm followed by
// dropout). Internal linkage, as simd.h explains.
#pragma once

#include <algorithm>
#include <cstdint>

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
} // namespace mg
