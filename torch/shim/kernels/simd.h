// Shared by the kernels' CPU loops (the *_cpu.cpp files), which the Makefile
// compiles with -O3 -mavx2 -mfma (and the lane-wise ones once more for
// AVX-512: isa.h): their loops vectorise, exp included. The
// shim offers those kernels only on CPUs that have AVX2 and FMA
// (mg_fused_kernels). A *_cpu.cpp file includes no ATen header and calls no
// other translation unit's inline code: the linker could share such code
// with baseline-compiled translation units, and run it on CPUs without AVX2.
// What is defined here has internal linkage for the same reason.
#pragma once

#include <cstdint>
#include <cstring>

#include "common.h"

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

} // namespace
} // namespace mg
