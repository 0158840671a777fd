/* The C API of micrograph's libtorch shim (libmgtorch.so).
 *
 * Every C++ type stays behind this header: tensors are opaque handles, everything
 * else is a C scalar or array. The Go package torch links only against this
 * library, so the same Go binary runs on any libtorch the shim was rebuilt for.
 *
 * Conventions:
 *  - A function that can fail returns mg_error: NULL on success, otherwise a
 *    message allocated with malloc that the caller frees. C++ exceptions never
 *    cross this boundary.
 *  - Results come back through the last arguments (out pointers). A returned
 *    mg_tensor is a new handle owned by the caller and released with mg_free.
 *  - dtype codes are c10::ScalarType values; device types are c10::DeviceType
 *    values (0 CPU, 1 CUDA); a device index of -1 means the current device.
 */
#ifndef MICROGRAPH_TORCH_SHIM_H
#define MICROGRAPH_TORCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef char *mg_error;
typedef struct mg_tensor_s *mg_tensor;

/* The readable head of every handle: the id of the scope that was open on the
 * creating thread (0: none). Go reads it without another call. */
typedef struct {
	uint64_t scope;
} mg_tensor_head;

typedef struct {
	int dtype;
	int device_type;
	int device_index;
	int pinned;        /* page-locked host memory; ignored when CUDA is absent */
	int requires_grad;
} mg_options;

enum mg_unary_op {
	MG_NEG, MG_EXP, MG_LOG, MG_SQRT, MG_ABS, MG_RECIPROCAL, MG_RELU, MG_LOGICAL_NOT, MG_ISFINITE, MG_GELU
};

enum mg_binary_op {
	MG_ADD, MG_SUB, MG_MUL, MG_DIV, MG_POW, MG_MINIMUM, MG_REMAINDER, MG_FLOOR_DIVIDE,
	MG_NE, MG_LT, MG_LE, MG_GT, MG_GE
};

enum mg_reduce_op { MG_SUM, MG_MEAN, MG_AMAX, MG_AMIN, MG_ALL };

enum mg_factory_kind { MG_EMPTY, MG_ZEROS, MG_ONES, MG_FULL, MG_RAND };

/* ---- lifecycle, scopes, diagnostics ---- */
void mg_free(mg_tensor t);
int64_t mg_live_tensors(void);
/* Scopes are a per-thread stack of ids: handles created on this thread while
 * a scope is open carry its id. mg_scope_push returns the previous top (0: none). */
uint64_t mg_scope_push(uint64_t id);
/* Pops id; returns 0 (and pops nothing) when id is not the top of the stack. */
int mg_scope_pop(uint64_t id);
const char *mg_torch_version(void);
int mg_cuda_device_count(void);
mg_error mg_cuda_synchronize(int device_index);
mg_error mg_set_num_threads(int n);
int mg_get_num_threads(void);
/* The kernels OpenBLAS chose for this CPU (its openblas_get_corename, e.g.
 * "Haswell"), or NULL when no OpenBLAS is loaded (PyTorch's wheels use MKL). */
const char *mg_openblas_core(void);
/* Deterministic algorithms only (PyTorch's use_deterministic_algorithms). */
mg_error mg_set_deterministic(int on);
/* The compute capability of a GPU (8.0 is Ampere, the first with bfloat16
 * and TF32 tensor cores). Fails when the shim was built without CUDA. */
mg_error mg_cuda_capability(int device_index, int *major, int *minor);
/* Lets cuBLAS and cuDNN compute float32 products in TF32 (on: 1). */
mg_error mg_set_allow_tf32(int on);
/* Peak bytes allocated on a GPU since the last reset; reset restarts the count.
 * Fails when the shim was built without CUDA. */
mg_error mg_cuda_peak_memory(int device_index, int reset, int64_t *peak);
/* Routes libtorch's CPU allocations of 1 MiB and more through a pool of
 * reusable blocks, and makes glibc keep the smaller ones in its heap
 * (mallopt), for the whole process. The glibc part is skipped, and 0
 * returned, when MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or
 * MALLOC_TOP_PAD_ is set in the environment. */
int mg_tune_allocator(void);

/* The CPU pool's counts since mg_tune_allocator (zeros before). */
typedef struct {
	int64_t allocated;    /* blocks obtained from the system */
	int64_t reused;       /* allocations served by a freed block */
	int64_t pooled_bytes; /* bytes obtained from the system, never returned */
} mg_pool_stats;
mg_pool_stats mg_cpu_pool_stats(void);

/* ---- metadata (cannot fail on a live handle) ---- */
int mg_dim(mg_tensor t);
void mg_shape(mg_tensor t, int64_t *shape);
int mg_dtype(mg_tensor t);
void mg_device(mg_tensor t, int *type, int *index);
int mg_requires_grad(mg_tensor t);

/* ---- creation and host transfer ---- */
mg_error mg_from_data(const void *data, const int64_t *shape, int ndim, mg_options o, mg_tensor *out);
mg_error mg_factory(int kind, const int64_t *shape, int ndim, double value, mg_options o, mg_tensor *out);
mg_error mg_arange(double start, double end, double step, mg_options o, mg_tensor *out);
mg_error mg_copy_to_host(mg_tensor t, void *dst, int64_t nbytes);
mg_error mg_data_ptr(mg_tensor t, void **out);
mg_error mg_item(mg_tensor t, double *f, int64_t *i);
mg_error mg_to(mg_tensor t, mg_options o, int non_blocking, mg_tensor *out);
mg_error mg_copy_(mg_tensor dst, mg_tensor src, int non_blocking);
mg_error mg_clone(mg_tensor t, mg_tensor *out);

/* ---- in-place fills (initialisation, buffers) ---- */
mg_error mg_fill_(mg_tensor t, double value);
mg_error mg_add_scalar_(mg_tensor t, double value);
mg_error mg_uniform_(mg_tensor t, double lo, double hi);
mg_error mg_normal_(mg_tensor t, double mean, double std);

/* ---- elementwise ---- */
mg_error mg_unary(int op, mg_tensor a, mg_tensor *out);
mg_error mg_binary(int op, mg_tensor a, mg_tensor b, mg_tensor *out);
/* A whole-number scalar keeps an integer tensor integral. */
mg_error mg_binary_scalar(int op, mg_tensor a, double s, mg_tensor *out);
mg_error mg_clamp(mg_tensor a, double lo, double hi, int has_lo, int has_hi, mg_tensor *out);
mg_error mg_where(mg_tensor cond, mg_tensor a, mg_tensor b, mg_tensor *out);
mg_error mg_masked_fill(mg_tensor a, mg_tensor mask, double value, mg_tensor *out);

/* ---- reductions and normalisations; ndims == 0 reduces over every element ---- */
mg_error mg_reduce(int op, mg_tensor a, const int64_t *dims, int ndims, int keepdim, mg_tensor *out);
mg_error mg_argmax(mg_tensor a, int64_t dim, int keepdim, mg_tensor *out);
/* The positions of a 1-D tensor's nonzero elements, ascending (int64). */
mg_error mg_nonzero(mg_tensor a, mg_tensor *out);
mg_error mg_norm(mg_tensor a, double p, const int64_t *dims, int ndims, int keepdim, mg_tensor *out);
mg_error mg_cumsum(mg_tensor a, int64_t dim, mg_tensor *out);
mg_error mg_softmax(mg_tensor a, int64_t dim, int log, mg_tensor *out);
mg_error mg_normalize(mg_tensor a, double p, int64_t dim, double eps, mg_tensor *out);

/* ---- linear algebra ---- */
mg_error mg_matmul(mg_tensor a, mg_tensor b, mg_tensor *out);
mg_error mg_linear(mg_tensor x, mg_tensor w, mg_tensor b /* may be NULL */, mg_tensor *out);

/* ---- shape ---- */
mg_error mg_reshape(mg_tensor a, const int64_t *shape, int ndim, mg_tensor *out);
mg_error mg_expand(mg_tensor a, const int64_t *shape, int ndim, mg_tensor *out);
mg_error mg_transpose(mg_tensor a, int64_t d0, int64_t d1, mg_tensor *out);
mg_error mg_unsqueeze(mg_tensor a, int64_t dim, mg_tensor *out);
mg_error mg_squeeze(mg_tensor a, int64_t dim, mg_tensor *out);
mg_error mg_narrow(mg_tensor a, int64_t dim, int64_t start, int64_t length, mg_tensor *out);
mg_error mg_cat(const mg_tensor *ts, int n, int64_t dim, mg_tensor *out);
mg_error mg_stack(const mg_tensor *ts, int n, int64_t dim, mg_tensor *out);

/* ---- indexing, scatter and segments ---- */
mg_error mg_index_select(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor *out);
mg_error mg_gather(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor *out);
mg_error mg_index_add(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor src, mg_tensor *out);
/* Reduces the rows of data in segments [offsets[i], offsets[i+1]) (CSR offsets,
 * int64, length S+1). reduce: MG_SUM, MG_MEAN, MG_AMAX or MG_AMIN. Empty
 * segments take `initial` when has_initial, else the reduction's identity. */
mg_error mg_segment_reduce(mg_tensor data, mg_tensor offsets, int reduce, int has_initial,
                           double initial, mg_tensor *out);
mg_error mg_scatter(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor src, mg_tensor *out);
/* Stable sort along dim. */
mg_error mg_sort(mg_tensor a, int64_t dim, int descending, mg_tensor *values, mg_tensor *indices);
mg_error mg_one_hot(mg_tensor a, int64_t classes, mg_tensor *out);

/* ---- randomness ---- */
mg_error mg_manual_seed(uint64_t seed);
mg_error mg_rng_state(int device_type, int device_index, mg_tensor *out);
mg_error mg_set_rng_state(int device_type, int device_index, mg_tensor state);
mg_error mg_bernoulli(mg_tensor probs, mg_tensor *out);
mg_error mg_dropout(mg_tensor a, double p, int train, mg_tensor *out);

/* ---- neural-network functions ---- */
mg_error mg_embedding(mg_tensor weight, mg_tensor indices, mg_tensor *out);
/* Updates running_mean and running_var in place when training; both may be
 * NULL (batch statistics only). */
mg_error mg_batch_norm(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                       mg_tensor running_var, int training, double momentum, double eps,
                       mg_tensor *out);

/* Row i of the result sums the rows of weight at indices[i, :] (N×F):
 * libtorch's embedding_bag, mode sum. */
mg_error mg_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out);

/* ---- fused kernels (kernels/: each kernel's maths is in kernels/<name>.h) ----
 * Hand-written kernels, called by name; every other entry point is libtorch's.
 * The CPU kernels take float32 and float64 tensors on CPUs with AVX2 and FMA,
 * and refuse anything else: callers check mg_fused_kernels first. */
/* Whether the fused kernels run on a device type: the CPU's need AVX2 and FMA. */
int mg_fused_kernels(int device_type);
/* The vector width, in bits, of the fused CPU kernels' lane-wise loops: 512
 * where they run their AVX-512 build, 256 for AVX2, 0 where none runs. */
int mg_kernel_isa(void);
/* Whether mg_fused_gen_aggregate runs on a device type: on the CPU as above,
 * on CUDA when the shim was built with CUDA. */
int mg_fused_aggregation(int device_type);
/* GENConv's softmax aggregation over the edges src→i sorted by destination
 * (CSR rowptr); edge k's bond embedding is row bond[k] of table; t is a 0-d
 * tensor; with learn_t = 0 the softmax weights are constants in
 * backpropagation. */
mg_error mg_fused_gen_aggregate(mg_tensor h, mg_tensor table, mg_tensor bond, mg_tensor t, mg_tensor src,
                                mg_tensor rowptr, int learn_t, mg_tensor *out);
/* Training-mode batch norm of 2-d x; updates running_mean and running_var in place. */
mg_error mg_fused_batch_norm(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                             mg_tensor running_var, double momentum, double eps, mg_tensor *out);
/* mg_fused_batch_norm followed by mg_fused_dropout (mg_fused_relu_dropout when
 * relu), bit for bit, without storing the batch norm's output
 * (kernels/batch_norm.h). */
mg_error mg_fused_batch_norm_dropout(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                                     mg_tensor running_var, double momentum, double eps, double p, int relu,
                                     mg_tensor *out);
/* x·weightᵀ + bias + residual for 2-d x, the bits of mg_linear's result
 * plus residual, in one pass after the product (kernels/linear_residual.h). */
mg_error mg_fused_linear_residual(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor residual,
                                  mg_tensor *out);
/* The rows of 2-d a over max(their L2 norm, eps). */
mg_error mg_fused_normalize(mg_tensor a, double eps, mg_tensor *out);
/* mg_adam_step's update, one loop per parameter. */
mg_error mg_fused_adam_step(const mg_tensor *params, const mg_tensor *exp_avg, const mg_tensor *exp_avg_sq,
                            int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                            double weight_decay, int decoupled);
/* Training-mode dropout, 0 < p < 1, with a mask drawn from one seed of the CPU generator. */
mg_error mg_fused_dropout(mg_tensor a, double p, mg_tensor *out);
/* Dropout of ReLU(a), fused: the same mask as mg_fused_dropout's for the same
 * generator state, applied where a > 0 (kernels/dropout.h). */
mg_error mg_fused_relu_dropout(mg_tensor a, double p, mg_tensor *out);
/* mg_embedding_bag_sum's result, with a deterministic backward. */
mg_error mg_fused_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out);
/* The weighted mean of the rows of x in each of num_groups groups, the p-th
 * membership adding weights[p]·x[rows[p]] to group groups[p]. */
mg_error mg_fused_group_mean(mg_tensor x, mg_tensor rows, mg_tensor groups, mg_tensor weights, int64_t num_groups,
                             mg_tensor *out);
/* Sinkhorn-Knopp assignment of q (N×K), in float32: motif (N, int64) and the
 * balanced matrix (K×N float32). */
mg_error mg_fused_sinkhorn(mg_tensor q, double lambda, int iters, mg_tensor *motif, mg_tensor *balanced);
/* The MinCut regulariser per molecule (graphptr: node ranges) of q (N×K) on a
 * destination-sorted CSR graph: cut and ortho, B each. selected (B×K, 1/0)
 * restricts the orthogonality term to some columns; NULL for all. */
mg_error mg_fused_mincut(mg_tensor q, mg_tensor rowptr, mg_tensor src, mg_tensor graphptr, mg_tensor selected,
                         mg_tensor *cut, mg_tensor *ortho);

/* ---- autograd ---- */
int mg_set_grad_enabled(int enabled); /* returns the previous mode of this thread */
mg_error mg_set_requires_grad(mg_tensor t, int requires_grad);
mg_error mg_detach(mg_tensor t, mg_tensor *out);
/* *out is NULL when t has no gradient. */
mg_error mg_grad(mg_tensor t, mg_tensor *out);
mg_error mg_backward(mg_tensor t);

/* ---- optimisation; parameters whose gradient is undefined are skipped ---- */
/* Adam (decoupled = 0) or AdamW (decoupled = 1), PyTorch's update rule.
 * steps[i] counts parameter i's updates; it is incremented for each parameter
 * updated. */
mg_error mg_adam_step(const mg_tensor *params, const mg_tensor *exp_avg, const mg_tensor *exp_avg_sq,
                      int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int decoupled);
/* Sets every gradient to undefined (PyTorch 2's set_to_none on every version). */
mg_error mg_zero_grad(const mg_tensor *params, int n);
/* Scales gradients so their global L2 norm is at most max_norm, without host
 * synchronisation; *total_norm is the norm before scaling (a 0-d tensor). */
mg_error mg_clip_grad_norm(const mg_tensor *params, int n, double max_norm, mg_tensor *total_norm);

/* ---- counting dispatched operators (opcount.cpp) ---- */
/* Starts counting the operators the dispatcher runs for this thread (each
 * top-level call through the dispatcher, internal redispatches not; backward
 * included). One thread counts at a time: fails if counting is under way. */
mg_error mg_op_count_begin(void);
/* Stops counting on this thread and returns the count since begin. */
mg_error mg_op_count_end(int64_t *ops);

/* ---- c10d process groups (distributed.cpp) ---- */
typedef struct mg_group_s *mg_group;
enum mg_group_reduce_op { MG_GROUP_SUM, MG_GROUP_MAX, MG_GROUP_MIN };
/* What a collective is for: a group's profile (mg_group_profile) counts each
 * kind apart. */
enum mg_group_kind {
	MG_KIND_OTHER,
	MG_KIND_SINKHORN,
	MG_KIND_NORM_FORWARD,
	MG_KIND_NORM_BACKWARD,
	MG_KIND_NEGATIVES_FORWARD,
	MG_KIND_NEGATIVES_BACKWARD,
	MG_KIND_LOSS_WEIGHTS,
	MG_KIND_LOSSES,
	MG_KIND_GRADIENTS,
	MG_GROUP_KINDS
};
/* The backends this shim was built with: 1 Gloo, 2 NCCL (a bit mask). */
int mg_group_backends(void);
/* Joins a group of size processes through a TCPStore at master_addr:
 * master_port (rank 0 serves it), then builds the backend ("gloo" or "nccl").
 * timeout_ms bounds the rendezvous and every collective. */
mg_error mg_group_new(const char *backend, const char *master_addr, int master_port, int rank, int size,
                      int64_t timeout_ms, mg_group *out);
void mg_group_free(mg_group g);
/* In place on a contiguous tensor; every rank ends with the reduction. kind:
 * an mg_group_kind. */
mg_error mg_group_all_reduce(mg_group g, mg_tensor t, int op, int kind);
mg_error mg_group_broadcast(mg_group g, mg_tensor t, int root, int kind);
/* *out stacks every rank's t (size × t's shape), in rank order. */
mg_error mg_group_all_gather(mg_group g, mg_tensor t, int kind, mg_tensor *out);
mg_error mg_group_barrier(mg_group g, int kind);
/* The sum over ranks of t as a differentiable function: the backward pass
 * sums the ranks' gradients (profiled as backward_kind). Every rank must call
 * it in the same order, in the forward and in the backward pass. */
mg_error mg_group_all_reduce_sum_autograd(mg_group g, mg_tensor t, int kind, int backward_kind, mg_tensor *out);
/* Training-mode batch norm of 2-d x over every rank's rows in the fused CPU
 * kernel (kernels/batch_norm.h), differentiable; CPUs with AVX2 and FMA. One
 * collective forward, one backward. */
mg_error mg_group_batch_norm(mg_group g, mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                             mg_tensor running_var, double momentum, double eps, mg_tensor *out);
/* mg_fused_sinkhorn over every rank's rows of q (kernels/sinkhorn.h): one
 * all-reduce per round (none for 0 rounds but one); motif and the balanced
 * matrix's columns are this rank's. CPUs with AVX2 and FMA. */
mg_error mg_group_sinkhorn(mg_group g, mg_tensor q, double lambda, int iters, mg_tensor *motif, mg_tensor *balanced);
/* The group's collectives since it was made, per mg_group_kind (arrays of
 * MG_GROUP_KINDS): how many, and the nanoseconds spent in them (issuing one,
 * and waiting for it: for the peers and for the transfer). */
void mg_group_profile(mg_group g, int64_t *calls, int64_t *nanoseconds);

/* A sum of gradients over the ranks that overlaps the backward pass: hooks on
 * the parameters copy each gradient into a flat bucket (about bucket_bytes;
 * the parameters in their order, best the order the backward pass makes
 * their gradients in) as backpropagation makes it, and a bucket's all-reduce
 * starts once it is whole and every bucket before it has started, on a
 * second group of the same processes, so that the other collectives never
 * queue behind it. */
typedef struct mg_grad_sum_s *mg_grad_sum;
mg_error mg_grad_sum_new(mg_group g, const mg_tensor *params, int n, int64_t bucket_bytes, mg_grad_sum *out);
/* Before a backward pass: starts the sum of values (contiguous; NULL: none)
 * over the ranks, and arms the hooks. */
mg_error mg_grad_sum_begin(mg_grad_sum s, mg_tensor values);
/* After it: starts what is left (a parameter without a gradient gives
 * zeros, and keeps none), waits for every sum, and replaces each gradient
 * by the ranks' sum; values too. */
mg_error mg_grad_sum_end(mg_grad_sum s);
/* Removes the hooks. */
void mg_grad_sum_free(mg_grad_sum s);

#ifdef __cplusplus
}
#endif

#endif
