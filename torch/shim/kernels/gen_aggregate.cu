// The CUDA loops of the GENConv aggregation (maths in gen_aggregate.h): the
// same arithmetic as gen_aggregate_cpu.cpp, one thread per (node, channel),
// so that neighbouring threads read neighbouring channels of an edge
// (coalesced). Built only when the shim is built against a CUDA libtorch
// (Makefile, nvcc).
#include <cuda_runtime.h>

#include "gen_aggregate.h"

namespace mg {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t work) {
	const int64_t b = (work + kThreads - 1) / kThreads;
	return static_cast<int>(b < 65535 * 32 ? b : 65535 * 32); // the loops stride over the rest
}

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }

template <typename T>
__global__ void forward_kernel(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R,
                               const T *tp, int64_t n, int64_t d, T *M, T *O, T *Z, T *D) {
	const T t = *tp;
	for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n * d;
	     idx += int64_t(gridDim.x) * blockDim.x) {
		const int64_t i = idx / d, c = idx - i * d, first = R[i], last = R[i + 1];
		if (first == last) {
			O[idx] = 0, Z[idx] = 0, D[idx] = 1;
			continue;
		}
		T z = T(kNoMaximum);
		for (int64_t k = first; k < last; k++) {
			const T m = gen_message(H[S[k] * d + c], Tab[B[k] * d + c]);
			M[k * d + c] = m;
			z = t * m > z ? t * m : z;
		}
		T den = 0, out = 0;
		for (int64_t k = first; k < last; k++) {
			const T m = M[k * d + c], w = exp_of(t * m - z);
			den += w;
			out += w * m;
		}
		O[idx] = out / den, Z[idx] = z, D[idx] = den;
	}
}

template <typename T>
__global__ void backward_kernel(const T *M, const int64_t *R, const T *tp, bool learn_t, int64_t n, int64_t d,
                                const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT) {
	const T t = *tp, eps = T(kGENMessageEpsilon);
	for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n * d;
	     idx += int64_t(gridDim.x) * blockDim.x) {
		const int64_t i = idx / d, c = idx - i * d;
		const T o = O[idx], z = Z[idx], den = D[idx], g = G[idx];
		T gt = 0;
		for (int64_t k = R[i]; k < R[i + 1]; k++) {
			const T m = M[k * d + c];
			T grad = g * exp_of(t * m - z) / den;
			if (learn_t) {
				gt += grad * m * (m - o);
				grad *= 1 + t * (m - o);
			}
			GP[k * d + c] = m > eps ? grad : T(0);
		}
		if (learn_t) GT[idx] = gt;
	}
}

} // namespace

template <typename T>
cudaError_t gen_forward_cuda(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, const T *t,
                             int64_t n, int64_t d, T *M, T *O, T *Z, T *D, cudaStream_t stream) {
	if (n * d == 0) return cudaSuccess;
	forward_kernel<T><<<blocks_for(n * d), kThreads, 0, stream>>>(H, Tab, B, S, R, t, n, d, M, O, Z, D);
	return cudaGetLastError();
}

template <typename T>
cudaError_t gen_backward_cuda(const T *M, const int64_t *R, const T *t, bool learn_t, int64_t n, int64_t d, const T *O,
                       const T *Z, const T *D, const T *G, T *GP, T *GT, cudaStream_t stream) {
	if (n * d == 0) return cudaSuccess;
	backward_kernel<T><<<blocks_for(n * d), kThreads, 0, stream>>>(M, R, t, learn_t, n, d, O, Z, D, G, GP, GT);
	return cudaGetLastError();
}

template cudaError_t gen_forward_cuda<float>(const float *, const float *, const int64_t *, const int64_t *,
                                             const int64_t *, const float *, int64_t, int64_t, float *, float *,
                                             float *, float *, cudaStream_t);
template cudaError_t gen_forward_cuda<double>(const double *, const double *, const int64_t *, const int64_t *,
                                              const int64_t *, const double *, int64_t, int64_t, double *, double *,
                                              double *, double *, cudaStream_t);
template cudaError_t gen_backward_cuda<float>(const float *, const int64_t *, const float *, bool, int64_t, int64_t,
                                       const float *, const float *, const float *, const float *, float *, float *,
                                       cudaStream_t);
template cudaError_t gen_backward_cuda<double>(const double *, const int64_t *, const double *, bool, int64_t, int64_t,
                                        const double *, const double *, const double *, const double *, double *,
                                        double *, cudaStream_t);

} // namespace mg
