// The autograd function of the fused group mean (maths in group_mean.h) and
// its entry point; the CPU loops are in group_mean_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "group_mean.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group mean as an autograd function, into x only.
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
			MG_CPU_LOOP(mg::group_sum_forward, scalar_t)(xc.data_ptr<scalar_t>(), R, G, wc.data_ptr<scalar_t>(), p, d,
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
			MG_CPU_LOOP(mg::group_mean_backward, scalar_t)(g.data_ptr<scalar_t>(), saved[0].data_ptr<int64_t>(), saved[1].data_ptr<int64_t>(),
			                        saved[2].data_ptr<scalar_t>(), counts.data_ptr<scalar_t>(), saved[0].numel(),
			                        g.size(1), gx.data_ptr<scalar_t>());
		});
		return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_fused_group_mean(mg_tensor x, mg_tensor rows, mg_tensor groups, mg_tensor weights, int64_t num_groups,
                             mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(x->t), "group_mean: the kernel runs on CPUs with AVX2 and FMA");
		mg_check_cpu("group_mean", {rows->t, groups->t, weights->t});
		*out = mg_wrap(GroupMean::apply(x->t, rows->t, groups->t, weights->t, num_groups));
	})
}
