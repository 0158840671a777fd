// Shared by the kernels' CPU loops and CUDA code: plain C++, no ATen.
#pragma once

#ifdef __CUDACC__
#define MG_HOST_DEVICE __host__ __device__
#else
#define MG_HOST_DEVICE
#endif

namespace mg {

// A finite stand-in for −∞ as the start of a running maximum: the loops
// compare with it and subtract it without producing NaN.
constexpr double kNoMaximum = -1e30;

} // namespace mg
