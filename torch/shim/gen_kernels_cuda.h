// CUDA versions of gen_forward and gen_backward (gen_kernels.h) for all n
// nodes at once, launched on stream; t points to the temperature on the
// device, so that no value is read back to the host. They return the launch's
// error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mg {

template <typename T>
cudaError_t gen_forward_cuda(const T *H, const T *E, const int64_t *S, const int64_t *R, const T *t, int64_t n,
                             int64_t d, T *M, T *O, T *Z, T *D, cudaStream_t stream);

// GT gets each (node, channel)'s part of the temperature's gradient (n×d),
// when learn_t (GT may be null otherwise).
template <typename T>
cudaError_t gen_backward_cuda(const T *M, const int64_t *R, const T *t, bool learn_t, int64_t n, int64_t d,
                              const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT, cudaStream_t stream);

} // namespace mg
