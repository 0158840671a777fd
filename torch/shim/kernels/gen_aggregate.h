// GENConv's softmax aggregation (docs/method.md §2), fused: one pass over each
// node's incoming edges instead of a dozen tensor ops, forward and backward.
//
// For the edges k→i, sorted by destination (CSR offsets R, sources S), with
// messages m_k = ReLU(h_S(k) + e_k) + ε (ε = kGENMessageEpsilon), per channel,
// where the bond embedding e_k = Tab[B_k] is row B_k of a small table of
// every bond-feature combination (so no E×d bond tensor, nor its gradient,
// is ever made):
//
//	out_i = Σ_k a_k m_k,   a_k = exp(t·m_k − Z_i) / D_i,
//	Z_i = max_k t·m_k,     D_i = Σ_k exp(t·m_k − Z_i)
//
// and the op's result is x_i = h_i + out_i, the input of GENConv's MLP (one
// pass instead of a separate sum, whose gradient autograd would add up
// again). A node without edges gets out = 0 (Z = 0, D = 1). Forward keeps,
// per node, Z and D, so that backward rebuilds a_k exactly as forward
// computed it (the CPU makes the messages again from h and the table; CUDA
// keeps them). Backward, for g = ∂L/∂x_i = ∂L/∂out_i:
//
//	∂L/∂m_k = g·a_k                        (t fixed: a is a constant, as DeeperGCN)
//	∂L/∂m_k = g·a_k·(1 + t·(m_k − out_i))   (t learned)
//	∂L/∂t   = Σ_i Σ_k g·a_k·m_k·(m_k − out_i)
//
// then through the ReLU (m_k > ε is its gate) to e_k, summed over the edges
// of each table row into ∂L/∂Tab, and summed over the edges leaving each
// node into ∂L/∂h, to which g itself is added last.
//
// Files: gen_aggregate_cpu.cpp (CPU loops), gen_aggregate.cu (CUDA, one
// thread per node and channel, the same arithmetic), gen_aggregate.cpp (the
// autograd function and mg_fused_gen_aggregate). Every loop walks a node's
// edges in order, so results are deterministic.
#pragma once

#include <cstdint>

#if defined(MG_WITH_CUDA) || defined(__CUDACC__)
#include <cuda_runtime_api.h>
#endif

#include "common.h"
#include "isa.h"

namespace mg {

// ε of the messages: keeps every message positive, as DeeperGCN. The Go
// side's copy is torch.GENMessageEpsilon (a test checks they agree).
constexpr double kGENMessageEpsilon = 1e-7;

namespace {

template <typename T>
MG_HOST_DEVICE inline T gen_message(T h, T e) {
	T pre = h + e;
	return (pre > 0 ? pre : T(0)) + T(kGENMessageEpsilon);
}

} // namespace

// Nodes [begin, end) of the forward pass on the CPU: the aggregations O,
// each node's Z and D, and X = H + O (n×d each). The messages are made from
// H and Tab where they are needed, here and in backward, never stored.
template <typename T, Isa isa = Isa::avx2>
void gen_forward(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, int64_t d,
                 int64_t begin, int64_t end, T *O, T *Z, T *D, T *X);

// Channels [c0, c1) of the backward pass on the CPU, for all n nodes: from
// the output's gradient G, each edge's gradient (never stored) added into its
// source node's row of GH and its bond's row of GTab, edges in order, then G
// itself into GH (x = h + out). GH's slice is overwritten; GTab's must start
// at zero, and touched (n bytes, one per node: its row written yet) too.
// When learn_t, GTC gets each (node, channel)'s part of the temperature's
// gradient, which gen_temperature_parts sums per node. Threads split the
// channels, so every sum runs in the same order at any count.
template <typename T, Isa isa = Isa::avx2>
void gen_backward(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, T t, bool learn_t,
                  int64_t n, int64_t d, int64_t c0, int64_t c1, const T *O, const T *Z, const T *D, const T *G, T *GH,
                  T *GTab, T *GTC, uint8_t *touched);

// Nodes [begin, end): GT[i] = Σ_c GTC[i, c]. The sum runs across the lanes
// of a vector, so it is called in its AVX2 build on every CPU.
template <typename T, Isa isa = Isa::avx2>
void gen_temperature_parts(const T *GTC, int64_t d, int64_t begin, int64_t end, T *GT);

#if defined(MG_WITH_CUDA) || defined(__CUDACC__)
// The same for all n nodes at once on a GPU, launched on stream; t points to
// the temperature on the device, so that nothing is read back to the host.
// GT gets each (node, channel)'s part of the temperature's gradient (n×d)
// when learn_t, and may be null otherwise. They return the launch's error.
template <typename T>
cudaError_t gen_forward_cuda(const T *H, const T *Tab, const int64_t *B, const int64_t *S, const int64_t *R, const T *t,
                             int64_t n, int64_t d, T *M, T *O, T *Z, T *D, cudaStream_t stream);
template <typename T>
cudaError_t gen_backward_cuda(const T *M, const int64_t *R, const T *t, bool learn_t, int64_t n, int64_t d,
                              const T *O, const T *Z, const T *D, const T *G, T *GP, T *GT, cudaStream_t stream);
#endif

} // namespace mg
