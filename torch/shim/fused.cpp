// Fused graph kernels: one pass over a node's incoming edges instead of a
// dozen tensor ops, forward and backward.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <initializer_list>
#include <mutex>

#include <vector>

#include "gen_kernels.h"
#include "internal.h"

#ifdef MG_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "gen_kernels_cuda.h"
#endif

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// gen_kernels.cpp is compiled for AVX2 and FMA.
bool avx2_fma() {
	static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return has;
}

bool cpu_kernels(const at::Tensor &x) {
	return avx2_fma() && x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
}

// The CPU kernels read their index and mask tensors through raw pointers:
// those must be on the CPU too (an undefined tensor stands for "none").
void check_cpu(const char *op, std::initializer_list<at::Tensor> ts) {
	for (const auto &t : ts) {
		TORCH_CHECK(!t.defined() || t.device().is_cpu(), op, ": the CPU kernel got a tensor on ", t.device());
	}
}

#ifdef MG_WITH_CUDA
cudaStream_t stream_of(const at::Tensor &x) { return c10::cuda::getCurrentCUDAStream(x.device().index()).stream(); }

void check_launch(cudaError_t err) { TORCH_CHECK(err == cudaSuccess, "CUDA kernel launch: ", cudaGetErrorString(err)); }
#endif

// Whether GENAggregate has a kernel for x: the CPU loops (AVX2 and FMA) or,
// in a shim built with CUDA, the CUDA ones.
bool aggregation_kernel(const at::Tensor &x) {
	if (x.is_cuda()) {
#ifdef MG_WITH_CUDA
		return x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
#else
		return false;
#endif
	}
	return cpu_kernels(x);
}

// GENConv's softmax aggregation (docs/method.md §2). For the edges k→i (sorted
// by destination, CSR rowptr) with messages m_k = ReLU(h_src(k) + e_k) + ε:
//
//	out_i = Σ_k a_k m_k,   a_k = exp(t·m_k − max_k t·m_k) / Σ_k exp(…)   (per channel)
//
// Saved per node: the maximum z and the normaliser, so that backward rebuilds
// a_k exactly as forward computed it. Backward, for g = ∂L/∂out_i:
//
//	∂L/∂m_k = g·a_k                        (t fixed: a is a constant, as DeeperGCN)
//	∂L/∂m_k = g·a_k·(1 + t·(m_k − out_i))   (t learned)
//	∂L/∂t   = Σ_i Σ_k g·a_k·m_k·(m_k − out_i)
//
// and through the ReLU to e_k and, summed over the edges leaving each node,
// to h.
struct GENAggregate : public torch::autograd::Function<GENAggregate> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &h, const at::Tensor &e, const at::Tensor &t,
	                          const at::Tensor &src, const at::Tensor &rowptr, bool learn_t) {
		TORCH_CHECK(aggregation_kernel(h), "gen_aggregate: no fused kernel for ", h.device(), " and ",
		            h.scalar_type());
		TORCH_CHECK(h.dim() == 2 && e.dim() == 2 && h.size(1) == e.size(1), "gen_aggregate: h is ", h.sizes(),
		            " and e is ", e.sizes());
		TORCH_CHECK(src.size(0) == e.size(0) && rowptr.size(0) == h.size(0) + 1, "gen_aggregate: ", src.size(0),
		            " sources, ", e.size(0), " edges, ", rowptr.size(0), " offsets for ", h.size(0), " nodes");
		TORCH_CHECK(t.numel() == 1, "gen_aggregate: the temperature has ", t.numel(), " elements");
		TORCH_CHECK(e.device() == h.device() && t.device() == h.device() && src.device() == h.device() &&
		                rowptr.device() == h.device(),
		            "gen_aggregate: the tensors are on different devices");
		auto hc = h.contiguous(), ec = e.contiguous(), tc = t.to(h.scalar_type()).contiguous();
		auto sc = src.contiguous(), rc = rowptr.contiguous();
		const int64_t n = hc.size(0), d = hc.size(1);
		auto out = at::empty_like(hc), zmax = at::empty_like(hc), den = at::empty_like(hc);
		auto messages = at::empty_like(ec);
		if (hc.is_cuda()) {
			// Checking the offsets would read them back to the host; the
			// batches were checked when they were built.
#ifdef MG_WITH_CUDA
			const c10::cuda::CUDAGuard guard(hc.device());
			AT_DISPATCH_FLOATING_TYPES(hc.scalar_type(), "gen_aggregate_forward_cuda", [&] {
				check_launch(mg::gen_forward_cuda(hc.data_ptr<scalar_t>(), ec.data_ptr<scalar_t>(),
				                                  sc.data_ptr<int64_t>(), rc.data_ptr<int64_t>(),
				                                  tc.data_ptr<scalar_t>(), n, d, messages.data_ptr<scalar_t>(),
				                                  out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(),
				                                  den.data_ptr<scalar_t>(), stream_of(hc)));
			});
#endif
		} else {
			const int64_t *R = rc.data_ptr<int64_t>(), *S = sc.data_ptr<int64_t>();
			TORCH_CHECK(R[0] == 0 && R[n] == ec.size(0), "gen_aggregate: offsets do not cover the edges");
			for (int64_t i = 0; i < n; i++) {
				TORCH_CHECK(R[i] <= R[i + 1], "gen_aggregate: offsets decrease at node ", i);
			}
			for (int64_t k = 0; k < ec.size(0); k++) {
				TORCH_CHECK(S[k] >= 0 && S[k] < n, "gen_aggregate: source ", S[k], " of edge ", k, " out of range");
			}
			AT_DISPATCH_FLOATING_TYPES(hc.scalar_type(), "gen_aggregate_forward", [&] {
				const scalar_t tv = tc.item<scalar_t>();
				at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
					mg::gen_forward(hc.data_ptr<scalar_t>(), ec.data_ptr<scalar_t>(), S, R, tv, d, begin, end,
					                messages.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
					                zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>());
				});
			});
		}
		ctx->save_for_backward({tc, sc, rc, out});
		ctx->saved_data["messages"] = messages;
		ctx->saved_data["zmax"] = zmax;
		ctx->saved_data["den"] = den;
		ctx->saved_data["learn_t"] = learn_t;
		return out;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &t = saved[0], &src = saved[1], &rowptr = saved[2], &out = saved[3];
		auto messages = ctx->saved_data["messages"].toTensor();
		auto zmax = ctx->saved_data["zmax"].toTensor(), den = ctx->saved_data["den"].toTensor();
		const bool learn_t = ctx->saved_data["learn_t"].toBool();
		auto go = grads[0].contiguous();
		const int64_t n = out.size(0), d = out.size(1);
		auto grad_pre = at::empty_like(messages);
		at::Tensor grad_h, grad_t_parts;
		if (out.is_cuda()) {
			if (learn_t) grad_t_parts = at::empty_like(out);
#ifdef MG_WITH_CUDA
			const c10::cuda::CUDAGuard guard(out.device());
			AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "gen_aggregate_backward_cuda", [&] {
				check_launch(mg::gen_backward_cuda(
				    messages.data_ptr<scalar_t>(), rowptr.data_ptr<int64_t>(), t.data_ptr<scalar_t>(), learn_t, n,
				    d, out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
				    go.data_ptr<scalar_t>(), grad_pre.data_ptr<scalar_t>(),
				    learn_t ? grad_t_parts.data_ptr<scalar_t>() : nullptr,
				    stream_of(out)));
			});
#endif
			// Into the source nodes: index_add, deterministic (sorted) when
			// deterministic algorithms are on.
			grad_h = at::zeros_like(out).index_add_(0, src, grad_pre);
		} else {
			grad_t_parts = at::empty({n}, out.options());
			// Sum the edges' gradients into their source nodes, in edge order.
			grad_h = at::zeros_like(out);
			AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "gen_aggregate_backward", [&] {
				const scalar_t tv = t.item<scalar_t>();
				at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
					std::vector<scalar_t> scratch(d);
					mg::gen_backward(messages.data_ptr<scalar_t>(), rowptr.data_ptr<int64_t>(), tv, learn_t, d,
					                 begin, end, out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(),
					                 den.data_ptr<scalar_t>(), go.data_ptr<scalar_t>(),
					                 grad_pre.data_ptr<scalar_t>(), grad_t_parts.data_ptr<scalar_t>(),
					                 scratch.data());
				});
				mg::bag_sum_backward(grad_pre.data_ptr<scalar_t>(), src.data_ptr<int64_t>(), 1, d, src.numel(),
				                     grad_h.data_ptr<scalar_t>());
			});
		}
		at::Tensor grad_t;
		if (learn_t) grad_t = grad_t_parts.sum().reshape(t.sizes());
		return {grad_h, grad_pre, grad_t, at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

// Dropout with a counter-based mask: one seed drawn from the CPU generator
// per call (so masks follow manual_seed and saved generator states), then a
// hash of (seed, element) per element. Backward regenerates the mask.
struct FastDropout : public torch::autograd::Function<FastDropout> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, double p) {
		uint64_t seed;
		{
			auto gen = at::globalContext().defaultGenerator(at::kCPU);
			std::lock_guard<std::mutex> lock(gen.mutex());
			seed = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
		}
		ctx->saved_data["seed"] = static_cast<int64_t>(seed);
		ctx->saved_data["p"] = p;
		return apply_mask(x, seed, p);
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
		return {apply_mask(grads[0], seed, ctx->saved_data["p"].toDouble()), at::Tensor()};
	}

	static at::Tensor apply_mask(const at::Tensor &x, uint64_t seed, double p) {
		auto xc = x.contiguous();
		auto y = at::empty_like(xc);
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "dropout", [&] {
			const scalar_t scale = static_cast<scalar_t>(1 / (1 - p));
			at::parallel_for(0, xc.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
				mg::dropout_mask(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), begin, end, seed,
				                 static_cast<float>(p), scale);
			});
		});
		return y;
	}
};

// Sum of table rows per index row (embedding_bag, mode sum), with a
// sequential, deterministic backward scatter.
struct BagSum : public torch::autograd::Function<BagSum> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &weight, const at::Tensor &indices) {
		auto w = weight.contiguous(), idx = indices.contiguous();
		TORCH_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, "embedding_bag_sum: indices must be 2-d int64");
		check_cpu("embedding_bag_sum", {idx});
		const int64_t n = idx.size(0), f = idx.size(1), d = w.size(1);
		const int64_t *I = idx.data_ptr<int64_t>();
		for (int64_t i = 0; i < n * f; i++) {
			TORCH_CHECK(I[i] >= 0 && I[i] < w.size(0), "embedding_bag_sum: index ", I[i], " out of range for ",
			            w.size(0), " rows");
		}
		TORCH_CHECK(f > 0, "embedding_bag_sum: no indices per row");
		auto out = at::empty({n, d}, w.options());
		AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "bag_sum", [&] {
			at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
				mg::bag_sum_forward(w.data_ptr<scalar_t>(), I, f, d, begin, end, out.data_ptr<scalar_t>());
			});
		});
		ctx->save_for_backward({idx});
		ctx->saved_data["rows"] = w.size(0);
		return out;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto idx = ctx->get_saved_variables()[0];
		auto g = grads[0].contiguous();
		auto gw = at::zeros({ctx->saved_data["rows"].toInt(), g.size(1)}, g.options());
		AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "bag_sum_backward", [&] {
			mg::bag_sum_backward(g.data_ptr<scalar_t>(), idx.data_ptr<int64_t>(), idx.size(1), g.size(1), idx.size(0),
			                     gw.data_ptr<scalar_t>());
		});
		return {gw, at::Tensor()};
	}
};

// The weighted mean of the rows of x in each group: out[g] = Σ_p w_p·x[rows_p]
// / max(Σ_p w_p, 1) over the p with groups_p = g (0 for an empty group),
// accumulated in order on the CPU, so it is deterministic without sorting.
struct GroupMean : public torch::autograd::Function<GroupMean> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &rows,
	                          const at::Tensor &groups, const at::Tensor &weights, int64_t num_groups) {
		auto xc = x.contiguous(), rc = rows.contiguous(), gc = groups.contiguous(), wc = weights.contiguous();
		const int64_t p = rc.numel(), d = xc.size(1);
		TORCH_CHECK(gc.numel() == p && wc.numel() == p && wc.scalar_type() == xc.scalar_type(),
		            "group_mean: rows, groups and weights must match, with x's dtype");
		const int64_t *R = rc.data_ptr<int64_t>(), *G = gc.data_ptr<int64_t>();
		for (int64_t i = 0; i < p; i++) {
			TORCH_CHECK(R[i] >= 0 && R[i] < xc.size(0) && G[i] >= 0 && G[i] < num_groups,
			            "group_mean: membership ", i, " (row ", R[i], ", group ", G[i], ") out of range");
		}
		auto out = at::zeros({num_groups, d}, xc.options());
		auto counts = at::zeros({num_groups}, xc.options());
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "group_mean", [&] {
			mg::group_sum_forward(xc.data_ptr<scalar_t>(), R, G, wc.data_ptr<scalar_t>(), p, d,
			                      out.data_ptr<scalar_t>(), counts.data_ptr<scalar_t>());
		});
		out.div_(counts.clamp_min(1).unsqueeze(1));
		ctx->save_for_backward({rc, gc, wc});
		ctx->saved_data["counts"] = counts;
		ctx->saved_data["rows"] = xc.size(0);
		return out;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		auto counts = ctx->saved_data["counts"].toTensor();
		auto g = grads[0].contiguous();
		auto gx = at::zeros({ctx->saved_data["rows"].toInt(), g.size(1)}, g.options());
		AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "group_mean_backward", [&] {
			mg::group_mean_backward(g.data_ptr<scalar_t>(), saved[0].data_ptr<int64_t>(), saved[1].data_ptr<int64_t>(),
			                        saved[2].data_ptr<scalar_t>(), counts.data_ptr<scalar_t>(), saved[0].numel(),
			                        g.size(1), gx.data_ptr<scalar_t>());
		});
		return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

// The graph-to-subgraph contrastive loss (docs/method.md §6) from its logits y
// (B × B·S) and the live slots (float 1/0): the mean over rows with at least
// one live own slot of −Σ_{own live j} log softmax over live columns (y_i)_j.
struct BlockContrast : public torch::autograd::Function<BlockContrast> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &y, const at::Tensor &live, int64_t per) {
		auto yc = y.contiguous(), lc = live.contiguous();
		const int64_t rows = yc.size(0), cols = yc.size(1);
		TORCH_CHECK(cols == rows * per && lc.numel() == cols && lc.scalar_type() == yc.scalar_type(),
		            "block_contrast: logits ", yc.sizes(), " for ", per, " slots per row and ", lc.numel(), " live flags");
		auto lse = at::empty({rows}, yc.options()), loss = at::empty({rows}, yc.options());
		auto npos = at::empty({rows}, yc.options());
		AT_DISPATCH_FLOATING_TYPES(yc.scalar_type(), "block_contrast", [&] {
			at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
				mg::block_contrast_forward(yc.data_ptr<scalar_t>(), lc.data_ptr<scalar_t>(), cols, per, begin, end,
				                           lse.data_ptr<scalar_t>(), loss.data_ptr<scalar_t>(), npos.data_ptr<scalar_t>());
			});
		});
		auto has = npos.gt(0).to(yc.scalar_type());
		auto count = has.sum().clamp_min(1);
		ctx->save_for_backward({yc, lc});
		ctx->saved_data["lse"] = lse;
		ctx->saved_data["npos"] = npos;
		ctx->saved_data["count"] = count;
		ctx->saved_data["per"] = per;
		return (loss * has).sum() / count;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &y = saved[0], &live = saved[1];
		auto lse = ctx->saved_data["lse"].toTensor(), npos = ctx->saved_data["npos"].toTensor();
		auto coef = (grads[0] / ctx->saved_data["count"].toTensor()).expand({y.size(0)}).contiguous();
		auto gy = at::empty_like(y);
		const int64_t per = ctx->saved_data["per"].toInt();
		AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "block_contrast_backward", [&] {
			at::parallel_for(0, y.size(0), 16, [&](int64_t begin, int64_t end) {
				mg::block_contrast_backward(y.data_ptr<scalar_t>(), live.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(),
				                            npos.data_ptr<scalar_t>(), coef.data_ptr<scalar_t>(), y.size(1), per, begin,
				                            end, gy.data_ptr<scalar_t>());
			});
		});
		return {gy, at::Tensor(), at::Tensor()};
	}
};

// y = x / max(‖x‖₂, eps) row by row, with the one-pass backward.
struct RowNormalize : public torch::autograd::Function<RowNormalize> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, double eps) {
		auto xc = x.contiguous();
		auto y = at::empty_like(xc), nrm = at::empty({xc.size(0)}, xc.options());
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "normalize", [&] {
			at::parallel_for(0, xc.size(0), 256, [&](int64_t begin, int64_t end) {
				mg::normalize_forward(xc.data_ptr<scalar_t>(), xc.size(1), static_cast<scalar_t>(eps), begin, end,
				                      y.data_ptr<scalar_t>(), nrm.data_ptr<scalar_t>());
			});
		});
		ctx->save_for_backward({y});
		ctx->saved_data["nrm"] = nrm;
		ctx->saved_data["eps"] = eps;
		return y;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto y = ctx->get_saved_variables()[0];
		auto nrm = ctx->saved_data["nrm"].toTensor();
		auto gy = grads[0].contiguous();
		auto gx = at::empty_like(gy);
		const double eps = ctx->saved_data["eps"].toDouble();
		AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "normalize_backward", [&] {
			at::parallel_for(0, y.size(0), 256, [&](int64_t begin, int64_t end) {
				mg::normalize_backward(y.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), nrm.data_ptr<scalar_t>(),
				                       y.size(1), static_cast<scalar_t>(eps), begin, end, gx.data_ptr<scalar_t>());
			});
		});
		return {gx, at::Tensor()};
	}
};

// Batch norm of 2-d input in training mode: batch statistics, and the
// running ones moved by momentum (with the unbiased variance), as PyTorch.
struct BatchNormTrain : public torch::autograd::Function<BatchNormTrain> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
	                          at::Tensor running_mean, at::Tensor running_var, double momentum, double eps) {
		auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
		const int64_t n = xc.size(0), c = xc.size(1);
		TORCH_CHECK(n > 1, "batch_norm: expected more than 1 value per channel when training");
		TORCH_CHECK(wc.numel() == c && bc.numel() == c, "batch_norm: ", c, " channels, weight ", wc.sizes());
		auto y = at::empty_like(xc), mean = at::empty({c}, xc.options()), invstd = at::empty({c}, xc.options());
		auto var = at::empty({c}, xc.options());
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm", [&] {
			mg::batch_norm_forward(xc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), n, c,
			                       static_cast<scalar_t>(eps), y.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(),
			                       invstd.data_ptr<scalar_t>(), var.data_ptr<scalar_t>());
		});
		{
			at::NoGradGuard no_grad;
			running_mean.mul_(1 - momentum).add_(mean, momentum);
			running_var.mul_(1 - momentum).add_(var * (static_cast<double>(n) / (n - 1)), momentum);
		}
		ctx->save_for_backward({xc, wc});
		ctx->saved_data["mean"] = mean;
		ctx->saved_data["invstd"] = invstd;
		return y;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &x = saved[0], &w = saved[1];
		auto mean = ctx->saved_data["mean"].toTensor(), invstd = ctx->saved_data["invstd"].toTensor();
		auto g = grads[0].contiguous();
		auto gx = at::empty_like(x), gw = at::empty_like(w), gb = at::empty_like(w);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_backward", [&] {
			mg::batch_norm_backward(x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
			                        mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), x.size(0), x.size(1),
			                        gx.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), gb.data_ptr<scalar_t>());
		});
		return {gx, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

// The MinCut regulariser per molecule (docs/method.md §5): outputs cut_g and
// ortho_g (B each); selected is B×K of 1/0, or empty for all columns.
struct MinCut : public torch::autograd::Function<MinCut> {
	static variable_list forward(AutogradContext *ctx, const at::Tensor &q, const at::Tensor &rowptr,
	                             const at::Tensor &src, const at::Tensor &graphptr, const at::Tensor &selected) {
		auto qc = q.contiguous(), rc = rowptr.contiguous(), sc = src.contiguous(), gc = graphptr.contiguous();
		const int64_t b = gc.size(0) - 1, k = qc.size(1), n = qc.size(0);
		TORCH_CHECK(rc.size(0) == n + 1 && gc[0].item<int64_t>() == 0 && gc[b].item<int64_t>() == n,
		            "mincut: offsets do not match ", n, " nodes");
		auto sel = selected.numel() > 0 ? selected.to(qc.scalar_type()).contiguous() : selected;
		TORCH_CHECK(sel.numel() == 0 || sel.numel() == b * k, "mincut: selected must be ", b, "×", k);
		auto opts = qc.options();
		auto cut = at::empty({b}, opts), ortho = at::empty({b}, opts), num = at::empty({b}, opts);
		auto den = at::empty({b}, opts), gram = at::empty({b, k, k}, opts), fro = at::empty({b}, opts);
		AT_DISPATCH_FLOATING_TYPES(qc.scalar_type(), "mincut", [&] {
			const scalar_t *S = sel.numel() > 0 ? sel.data_ptr<scalar_t>() : nullptr;
			at::parallel_for(0, b, 16, [&](int64_t begin, int64_t end) {
				mg::mincut_forward(qc.data_ptr<scalar_t>(), rc.data_ptr<int64_t>(), sc.data_ptr<int64_t>(),
				                   gc.data_ptr<int64_t>(), S, k, begin, end, cut.data_ptr<scalar_t>(),
				                   ortho.data_ptr<scalar_t>(), num.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
				                   gram.data_ptr<scalar_t>(), fro.data_ptr<scalar_t>());
			});
		});
		ctx->save_for_backward({qc, rc, sc, gc, sel});
		// ortho is also an output: kept here as an alias without autograd
		// history, since holding the output itself would form a cycle
		// (output → its grad_fn → this context → output) and leak the graph.
		ctx->saved_data["ortho"] = ortho.detach();
		ctx->saved_data["num"] = num;
		ctx->saved_data["den"] = den;
		ctx->saved_data["gram"] = gram;
		ctx->saved_data["fro"] = fro;
		return {cut, ortho};
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &q = saved[0], &rowptr = saved[1], &src = saved[2], &graphptr = saved[3], &sel = saved[4];
		const int64_t b = graphptr.size(0) - 1, k = q.size(1);
		auto gc = grads[0].defined() ? grads[0].contiguous() : at::zeros({b}, q.options());
		auto go = grads[1].defined() ? grads[1].contiguous() : at::zeros({b}, q.options());
		auto gq = at::zeros_like(q);
		auto ortho = ctx->saved_data["ortho"].toTensor(), num = ctx->saved_data["num"].toTensor();
		auto den = ctx->saved_data["den"].toTensor(), gram = ctx->saved_data["gram"].toTensor();
		auto fro = ctx->saved_data["fro"].toTensor();
		AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "mincut_backward", [&] {
			const scalar_t *S = sel.numel() > 0 ? sel.data_ptr<scalar_t>() : nullptr;
			at::parallel_for(0, b, 16, [&](int64_t begin, int64_t end) {
				std::vector<scalar_t> scratch(k * k);
				mg::mincut_backward(q.data_ptr<scalar_t>(), rowptr.data_ptr<int64_t>(), src.data_ptr<int64_t>(),
				                    graphptr.data_ptr<int64_t>(), S, k, begin, end, ortho.data_ptr<scalar_t>(),
				                    num.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(), gram.data_ptr<scalar_t>(),
				                    fro.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(), go.data_ptr<scalar_t>(),
				                    gq.data_ptr<scalar_t>(), scratch.data());
			});
		});
		return {gq, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_mincut(mg_tensor q, mg_tensor rowptr, mg_tensor src, mg_tensor graphptr, mg_tensor selected,
                   mg_tensor *cut, mg_tensor *ortho) {
	MG_TRY({
		TORCH_CHECK(cpu_kernels(q->t), "mincut: the kernel runs on CPUs with AVX2 and FMA");
		check_cpu("mincut", {rowptr->t, src->t, graphptr->t, selected != nullptr ? selected->t : at::Tensor()});
		auto sel = selected != nullptr ? selected->t : at::empty({0}, q->t.options());
		auto out = MinCut::apply(q->t, rowptr->t, src->t, graphptr->t, sel);
		*cut = mg_wrap(out[0]);
		*ortho = mg_wrap(out[1]);
	})
}

at::Tensor mg_batch_norm_train(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
                               const at::Tensor &running_mean, const at::Tensor &running_var, double momentum,
                               double eps) {
	return BatchNormTrain::apply(x, w, b, running_mean, running_var, momentum, eps);
}

// Used by mg_adam_step: one vectorised loop per parameter on the CPU. It
// declines (false) what the kernel cannot take.
bool mg_adam_kernel(at::Tensor &p, const at::Tensor &grad, at::Tensor &m, at::Tensor &v, double lr, double beta1,
                    double beta2, double eps, double weight_decay, bool decoupled, double bias1, double bias2_sqrt) {
	const int64_t n = p.numel();
	if (!cpu_kernels(p) || !p.is_contiguous() || !m.is_contiguous() || !v.is_contiguous() || grad.numel() != n ||
	    m.numel() != n || v.numel() != n ||
	    grad.scalar_type() != p.scalar_type() || m.scalar_type() != p.scalar_type() ||
	    v.scalar_type() != p.scalar_type()) {
		return false;
	}
	auto g = grad.contiguous();
	AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "adam", [&] {
		using T = scalar_t;
		mg::adam_update(p.data_ptr<T>(), g.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(), n, T(lr), T(beta1),
		                T(beta2), T(eps), T(weight_decay), decoupled, T(bias1), T(bias2_sqrt));
	});
	return true;
}

// Used by mg_normalize for rows of 2-d tensors on the CPU.
at::Tensor mg_row_normalize(const at::Tensor &x, double eps) { return RowNormalize::apply(x, eps); }

bool mg_cpu_kernels(const at::Tensor &x) { return cpu_kernels(x); }

mg_error mg_sinkhorn(mg_tensor q, double lambda, int iters, mg_tensor *motif, mg_tensor *balanced) {
	MG_TRY({
		TORCH_CHECK(cpu_kernels(q->t) && q->t.dim() == 2, "sinkhorn: the kernel takes a 2-d CPU tensor (AVX2 and FMA)");
		auto qf = q->t.detach().to(at::kFloat).contiguous();
		const int64_t n = qf.size(0), k = qf.size(1);
		auto a = at::empty({k, n}, qf.options());
		auto m = at::empty({n}, qf.options().dtype(at::kLong));
		mg::sinkhorn(qf.data_ptr<float>(), n, k, static_cast<float>(lambda), iters, a.data_ptr<float>(),
		             m.data_ptr<int64_t>());
		*motif = mg_wrap(m);
		*balanced = mg_wrap(a);
	})
}

mg_error mg_block_contrast(mg_tensor y, mg_tensor live, int64_t per, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(cpu_kernels(y->t), "block_contrast: the kernel runs on CPUs with AVX2 and FMA");
		check_cpu("block_contrast", {live->t});
		*out = mg_wrap(BlockContrast::apply(y->t, live->t, per));
	})
}

mg_error mg_group_mean(mg_tensor x, mg_tensor rows, mg_tensor groups, mg_tensor weights, int64_t num_groups,
                       mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(cpu_kernels(x->t), "group_mean: the kernel runs on CPUs with AVX2 and FMA");
		check_cpu("group_mean", {rows->t, groups->t, weights->t});
		*out = mg_wrap(GroupMean::apply(x->t, rows->t, groups->t, weights->t, num_groups));
	})
}

int mg_fused_kernels(int device_type) { return device_type == 0 && avx2_fma() ? 1 : 0; }

int mg_fused_aggregation(int device_type) {
	if (device_type == 0) return mg_fused_kernels(0);
#ifdef MG_WITH_CUDA
	return device_type == 1 ? 1 : 0;
#else
	return 0;
#endif
}

mg_error mg_gen_aggregate(mg_tensor h, mg_tensor e, mg_tensor t, mg_tensor src, mg_tensor rowptr, int learn_t,
                          mg_tensor *out) {
	MG_TRY(*out = mg_wrap(GENAggregate::apply(h->t, e->t, t->t, src->t, rowptr->t, learn_t != 0)))
}

mg_error mg_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out) {
	MG_TRY({
		const auto &x = indices->t;
		TORCH_CHECK(x.dim() == 2, "embedding_bag_sum: indices must be 2-d, got ", x.sizes());
		if (cpu_kernels(weight->t)) {
			*out = mg_wrap(BagSum::apply(weight->t, x));
			return nullptr;
		}
		auto offsets = at::arange(0, x.numel(), x.size(1), x.options().dtype(at::kLong));
		*out = mg_wrap(std::get<0>(at::embedding_bag(weight->t, x.reshape(-1), offsets, false, /*mode=sum*/ 0)));
	})
}

mg_error mg_dropout(mg_tensor a, double p, int train, mg_tensor *out) {
	MG_TRY({
		if (train && p > 0 && p < 1 && cpu_kernels(a->t)) {
			*out = mg_wrap(FastDropout::apply(a->t, p));
		} else {
			*out = mg_wrap(at::dropout(a->t, p, train != 0));
		}
	})
}
