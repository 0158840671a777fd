// Fused graph kernels: one pass over a node's incoming edges instead of a
// dozen tensor ops, forward and backward.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "gen_kernels.h"
#include "internal.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// GENConv's softmax aggregation (method.md §2). For the edges k→i (sorted
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
		TORCH_CHECK(h.device().is_cpu() && mg_gen_aggregate_supported(0),
		            "gen_aggregate: the fused kernel needs a CPU with AVX2 and FMA");
		TORCH_CHECK(h.dim() == 2 && e.dim() == 2 && h.size(1) == e.size(1), "gen_aggregate: h is ", h.sizes(),
		            " and e is ", e.sizes());
		TORCH_CHECK(src.size(0) == e.size(0) && rowptr.size(0) == h.size(0) + 1, "gen_aggregate: ", src.size(0),
		            " sources, ", e.size(0), " edges, ", rowptr.size(0), " offsets for ", h.size(0), " nodes");
		auto hc = h.contiguous(), ec = e.contiguous();
		auto sc = src.contiguous(), rc = rowptr.contiguous();
		auto out = at::zeros_like(hc), zmax = at::zeros_like(hc), den = at::ones_like(hc);
		const int64_t n = hc.size(0), d = hc.size(1);
		AT_DISPATCH_FLOATING_TYPES(hc.scalar_type(), "gen_aggregate_forward", [&] {
			const scalar_t tv = t.item<scalar_t>();
			at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
				mg::gen_forward(hc.data_ptr<scalar_t>(), ec.data_ptr<scalar_t>(), sc.data_ptr<int64_t>(),
				                rc.data_ptr<int64_t>(), tv, d, begin, end, out.data_ptr<scalar_t>(),
				                zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>());
			});
		});
		ctx->save_for_backward({hc, ec, t, sc, rc, out});
		ctx->saved_data["zmax"] = zmax;
		ctx->saved_data["den"] = den;
		ctx->saved_data["learn_t"] = learn_t;
		return out;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &h = saved[0], &e = saved[1], &t = saved[2], &src = saved[3], &rowptr = saved[4], &out = saved[5];
		auto zmax = ctx->saved_data["zmax"].toTensor(), den = ctx->saved_data["den"].toTensor();
		const bool learn_t = ctx->saved_data["learn_t"].toBool();
		auto go = grads[0].contiguous();
		const int64_t n = h.size(0), d = h.size(1);
		auto grad_pre = at::empty_like(e);
		auto grad_t_node = at::zeros({n}, h.options());
		AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "gen_aggregate_backward", [&] {
			const scalar_t tv = t.item<scalar_t>();
			at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
				std::vector<scalar_t> scratch(d);
				mg::gen_backward(h.data_ptr<scalar_t>(), e.data_ptr<scalar_t>(), src.data_ptr<int64_t>(),
				                 rowptr.data_ptr<int64_t>(), tv, learn_t, d, begin, end, out.data_ptr<scalar_t>(),
				                 zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(), go.data_ptr<scalar_t>(),
				                 grad_pre.data_ptr<scalar_t>(), grad_t_node.data_ptr<scalar_t>(), scratch.data());
			});
		});
		auto grad_h = at::zeros_like(h).index_add_(0, src, grad_pre);
		at::Tensor grad_t;
		if (learn_t) grad_t = grad_t_node.sum().reshape(t.sizes());
		return {grad_h, grad_pre, grad_t, at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

// gen_kernels.cpp is compiled for AVX2 and FMA.
int mg_gen_aggregate_supported(int device_type) {
	return device_type == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
}

mg_error mg_gen_aggregate(mg_tensor h, mg_tensor e, mg_tensor t, mg_tensor src, mg_tensor rowptr, int learn_t,
                          mg_tensor *out) {
	MG_TRY(*out = mg_wrap(GENAggregate::apply(h->t, e->t, t->t, src->t, rowptr->t, learn_t != 0)))
}

mg_error mg_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out) {
	MG_TRY({
		const auto &x = indices->t;
		TORCH_CHECK(x.dim() == 2, "embedding_bag_sum: indices must be 2-d, got ", x.sizes());
		auto offsets = at::arange(0, x.numel(), x.size(1), x.options().dtype(at::kLong));
		*out = mg_wrap(std::get<0>(at::embedding_bag(weight->t, x.reshape(-1), offsets, false, /*mode=sum*/ 0)));
	})
}
