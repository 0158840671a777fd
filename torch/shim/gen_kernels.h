// Loops of the fused GENConv aggregation (fused.cpp), on raw arrays. They live
// in their own translation unit, free of ATen, which the Makefile compiles for
// AVX2+FMA: the channel loops vectorise, exp included. fused.cpp offers the
// fused path only on CPUs that have AVX2 and FMA.
#pragma once

#include <cstdint>

namespace mg {

// Nodes [begin, end) of the forward pass: per node i and channel c, over the
// edges k of [R[i], R[i+1]) with m = ReLU(H[S[k]] + E[k]) + 1e-7 (kept in
// M, per edge), Z = max t·m, D = Σ exp(t·m − Z), O = Σ exp(t·m − Z)·m / D.
// A node without edges gets O = 0, Z = 0, D = 1.
template <typename T>
void gen_forward(const T *H, const T *E, const int64_t *S, const int64_t *R, T t, int64_t d, int64_t begin,
                 int64_t end, T *M, T *O, T *Z, T *D);

// Nodes [begin, end) of the backward pass: the gradient of the messages'
// pre-activations (GP, per edge) from the output's gradient G and the
// messages M, and each node's part of the temperature's gradient (GT) when
// learn_t. scratch holds d values.
template <typename T>
void gen_backward(const T *M, const int64_t *R, T t, bool learn_t, int64_t d, int64_t begin, int64_t end, const T *O,
                  const T *Z, const T *D, const T *G, T *GP, T *GT, T *scratch);

// Training-mode batch norm of X (n×c), per channel: mean M, inverse standard
// deviation V = 1/√(biased variance + eps), Y = (X − M)·V·W + B; VAR gets the
// biased variance. Backward from G: GW = Σ G·X̂, GB = Σ G and
// GX = W·V·(G − GB/n − X̂·GW/n), X̂ = (X − M)·V.
template <typename T>
void batch_norm_forward(const T *X, const T *W, const T *B, int64_t n, int64_t c, T eps, T *Y, T *M, T *V, T *VAR);
template <typename T>
void batch_norm_backward(const T *X, const T *G, const T *W, const T *M, const T *V, int64_t n, int64_t c, T *GX,
                         T *GW, T *GB);

// Dropout of elements [begin, end) of X into Y: element i is kept, and
// scaled by scale, when a hash of (seed, i) mapped to [0, 1) is at least p.
// The same seed gives the same mask, so backward regenerates it.
template <typename T>
void dropout_mask(const T *X, T *Y, int64_t begin, int64_t end, uint64_t seed, float p, T scale);

// Row sums of a lookup table: O[i] = Σ_f W[I[i·F + f]] for rows [begin, end)
// (embedding_bag, mode sum), and the backward scatter GW[I[i·F + f]] += G[i].
template <typename T>
void bag_sum_forward(const T *W, const int64_t *I, int64_t F, int64_t d, int64_t begin, int64_t end, T *O);
template <typename T>
void bag_sum_backward(const T *G, const int64_t *I, int64_t F, int64_t d, int64_t n, T *GW);

// Weighted group sums of rows, for pooling subgraphs: O[g] += Wt[p]·X[Rows[p]]
// for each p with Groups[p] = g, in order (deterministic), and the counts
// C[g] += Wt[p]. Backward: GX[Rows[p]] += Wt[p]/max(C[g], 1) · G[g].
template <typename T>
void group_sum_forward(const T *X, const int64_t *Rows, const int64_t *Groups, const T *Wt, int64_t p, int64_t d,
                       T *O, T *C);
template <typename T>
void group_mean_backward(const T *G, const int64_t *Rows, const int64_t *Groups, const T *Wt, const T *C, int64_t p,
                         int64_t d, T *GX);

// Rows [begin, end) of the graph-to-subgraph contrast over logits Y (rows ×
// cols, cols = rows·S) with column weights L (1 live, 0 not): per row i,
// LSE[i] = log Σ_j L_j exp(Y_ij) and LOSS[i] = −Σ_{j in i's block, live}
// (Y_ij − LSE[i]), with NPOS[i] the number of such j (the loss counts only
// when NPOS[i] > 0). Backward, with C = ∂L/∂(row loss): GY_ij = C·L_j·
// (NPOS[i]·exp(Y_ij − LSE[i]) − [j in i's block]).
template <typename T>
void block_contrast_forward(const T *Y, const T *L, int64_t cols, int64_t S, int64_t begin, int64_t end, T *LSE,
                            T *LOSS, T *NPOS);
template <typename T>
void block_contrast_backward(const T *Y, const T *L, const T *LSE, const T *NPOS, const T *C, int64_t cols,
                             int64_t S, int64_t begin, int64_t end, T *GY);

// Rows [begin, end) of Y = X / max(‖X_row‖₂, eps) (d columns), keeping each
// row's divisor in NRM; backward: GX = (GY − Y·⟨Y, GY⟩) / NRM for rows whose
// norm exceeds eps, GY / eps for the others (the clamp is constant there).
template <typename T>
void normalize_forward(const T *X, int64_t d, T eps, int64_t begin, int64_t end, T *Y, T *NRM);
template <typename T>
void normalize_backward(const T *Y, const T *GY, const T *NRM, int64_t d, T eps, int64_t begin, int64_t end, T *GX);

// Sinkhorn-Knopp on A (K×N, float32) in place, docs/method.md §3: A = exp(λ·Q)ᵀ
// from Q (N×K), A /= ΣA, then iters rounds of row and column scaling to
// 1/K and 1/N; MOTIF[l] = argmax_k A[k][l] (first maximum).
void sinkhorn(const float *Q, int64_t n, int64_t k, float lambda, int iters, float *A, int64_t *MOTIF);

// One Adam/AdamW update of n parameters in place (PyTorch's rule; see
// mg_adam_step): decoupled shrinks P by (1 − lr·wd) first, otherwise wd·P is
// added to the gradient; then M, V move towards G and G², and
// P −= lr/bias1 · M / (√V/bias2_sqrt + eps).
template <typename T>
void adam_update(T *P, const T *G, T *M, T *V, int64_t n, T lr, T beta1, T beta2, T eps, T wd, bool decoupled,
                 T bias1, T bias2_sqrt);

// MinCut regulariser (docs/method.md §5) of molecules [begin, end), node rows Q
// (K columns) in CSR layout: molecule g's nodes are [GP[g], GP[g+1]), the
// incoming edges of node v are [R[v], R[v+1]) from sources S. SEL, when not
// null, masks the columns of each molecule (B×K, 1/0). Per molecule: CUT[g]
// (0 without edges), ORTHO[g], and what backward needs: NUM, DEN, the Gram
// matrix GRAM (K×K per molecule, masked) and its norm FRO.
template <typename T>
void mincut_forward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                    int64_t begin, int64_t end, T *CUT, T *ORTHO, T *NUM, T *DEN, T *GRAM, T *FRO);
// Backward from GC[g] = ∂L/∂cut_g and GO[g] = ∂L/∂ortho_g into GQ (node rows).
template <typename T>
void mincut_backward(const T *Q, const int64_t *R, const int64_t *S, const int64_t *GP, const T *SEL, int64_t k,
                     int64_t begin, int64_t end, const T *ORTHO, const T *NUM, const T *DEN, const T *GRAM,
                     const T *FRO, const T *GC, const T *GO, T *GQ, T *scratch);

} // namespace mg
