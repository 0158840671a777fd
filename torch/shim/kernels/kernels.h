// What the kernels' autograd functions and entry points (the <name>.cpp files,
// compiled for the baseline CPU, with ATen) share. Each kernel is a file
// family in this folder: <name>.h (its maths, once, and the loops'
// declarations), <name>_cpu.cpp (the CPU loops, compiled for AVX2 and FMA, and the lane-wise ones
// also for AVX-512: isa.h),
// <name>.cpp (autograd function and mg_fused_<name>, declared in shim.h) and,
// where one exists, <name>.cu (CUDA).
#pragma once

#include <initializer_list>

#include "../internal.h"

// Whether the CPU has AVX2 and FMA, which the *_cpu.cpp files are compiled for.
bool mg_avx2_fma();

// One draw from the CPU generator: the seed of a dropout mask (dropout.h).
uint64_t mg_dropout_seed();

// Whether the lane-wise CPU loops run in their AVX-512 build (isa.h): the CPU
// has AVX-512 F, VL, BW and DQ, and MICROGRAPH_NO_AVX512 is not set in the
// environment (which tests and users can set to run the AVX2 build).
bool mg_avx512();

namespace mg {

// cpu_loop is the build of a lane-wise CPU loop this CPU runs (isa.h): its
// AVX-512 instantiation where mg_avx512(), else its AVX2 one.
template <typename Fn> Fn *cpu_loop(Fn *avx2, Fn *avx512) { return mg_avx512() ? avx512 : avx2; }

} // namespace mg

// MG_CPU_LOOP(mg::gen_forward, scalar_t)(…) calls the loop's build for this CPU.
#define MG_CPU_LOOP(fn, T) mg::cpu_loop(fn<T, mg::Isa::avx2>, fn<T, mg::Isa::avx512>)

// Whether the CPU kernels take x: float32 or float64 on the CPU of a machine
// with AVX2 and FMA.
bool mg_cpu_kernels(const at::Tensor &x);

// The CPU kernels read their index and mask tensors through raw pointers:
// those must be on the CPU too (an undefined tensor stands for "none").
void mg_check_cpu(const char *op, std::initializer_list<at::Tensor> ts);

// The fewest channels a thread takes of batch norm's n rows (at::parallel_for
// over channels): about 32k values, libtorch's own grain, and at least 16.
inline int64_t mg_batch_norm_grain(int64_t n) { return n > 0 && 32768 / n > 16 ? 32768 / n : 16; }
