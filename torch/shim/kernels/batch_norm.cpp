// The autograd function of the fused training-mode batch norm (maths in
// batch_norm.h) and its entry point; the CPU loops are in batch_norm_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "batch_norm.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Training-mode batch norm as an autograd function; the running statistics
// are updated in place, outside autograd.
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
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_forward, scalar_t)(xc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), n, c,
				                       c0, c1, static_cast<scalar_t>(eps), y.data_ptr<scalar_t>(),
				                       mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), var.data_ptr<scalar_t>());
			});
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
		const int64_t n = x.size(0), c = x.size(1);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_backward", [&] {
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_backward, scalar_t)(x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
				                        mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), n, c, c0, c1,
				                        gx.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), gb.data_ptr<scalar_t>());
			});
		});
		return {gx, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_fused_batch_norm(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                             mg_tensor running_var, double momentum, double eps, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(x->t), "batch_norm: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(x->t.dim() == 2, "batch_norm: the kernel takes 2-d input, not ", x->t.sizes());
		mg_check_cpu("batch_norm", {weight->t, bias->t, running_mean->t, running_var->t});
		*out = mg_wrap(BatchNormTrain::apply(x->t, weight->t, bias->t, running_mean->t, running_var->t, momentum, eps));
	})
}
