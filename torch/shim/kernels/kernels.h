// What the kernels' autograd functions and entry points (the <name>.cpp files,
// compiled for the baseline CPU, with ATen) share. Each kernel is a file
// family in this folder: <name>.h (its maths, once, and the loops'
// declarations), <name>_cpu.cpp (the CPU loops, compiled for AVX2 and FMA),
// <name>.cpp (autograd function and mg_fused_<name>, declared in shim.h) and,
// where one exists, <name>.cu (CUDA).
#pragma once

#include <initializer_list>

#include "../internal.h"

// Whether the CPU has AVX2 and FMA, which the *_cpu.cpp files are compiled for.
bool mg_avx2_fma();

// Whether the CPU kernels take x: float32 or float64 on the CPU of a machine
// with AVX2 and FMA.
bool mg_cpu_kernels(const at::Tensor &x);

// The CPU kernels read their index and mask tensors through raw pointers:
// those must be on the CPU too (an undefined tensor stands for "none").
void mg_check_cpu(const char *op, std::initializer_list<at::Tensor> ts);

// The fewest channels a thread takes of batch norm's n rows (at::parallel_for
// over channels): about 32k values, libtorch's own grain, and at least 16.
inline int64_t mg_batch_norm_grain(int64_t n) { return n > 0 && 32768 / n > 16 ? 32768 / n : 16; }
