// The autograd function of the fused training-mode batch norm (maths in
// batch_norm.h) and its entry point; the CPU loops are in batch_norm_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "batch_norm.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// check_training_input refuses what training-mode batch norm cannot
// normalise: one row (no variance), or parameters of another width.
void check_training_input(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b) {
	const int64_t c = x.size(1);
	TORCH_CHECK(x.size(0) > 1, "batch_norm: expected more than 1 value per channel when training");
	TORCH_CHECK(w.numel() == c && b.numel() == c, "batch_norm: ", c, " channels, weight ", w.sizes());
}

// update_running moves the running statistics towards the batch's, with its
// unbiased variance, as PyTorch does, outside autograd.
void update_running(at::Tensor &running_mean, at::Tensor &running_var, const at::Tensor &mean, const at::Tensor &var,
                    int64_t n, double momentum) {
	c10::NoGradGuard no_grad;
	running_mean.mul_(1 - momentum).add_(mean, momentum);
	running_var.mul_(1 - momentum).add_(var * (static_cast<double>(n) / (n - 1)), momentum);
}

// Training-mode batch norm as an autograd function; the running statistics
// are updated in place, outside autograd.
struct BatchNormTrain : public torch::autograd::Function<BatchNormTrain> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
	                          at::Tensor running_mean, at::Tensor running_var, double momentum, double eps) {
		auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
		check_training_input(xc, wc, bc);
		const int64_t n = xc.size(0), c = xc.size(1);
		auto y = at::empty_like(xc), mean = at::empty({c}, xc.options()), invstd = at::empty({c}, xc.options());
		auto var = at::empty({c}, xc.options());
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm", [&] {
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_forward, scalar_t)(xc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), n, c,
				                       c0, c1, static_cast<scalar_t>(eps), y.data_ptr<scalar_t>(),
				                       mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), var.data_ptr<scalar_t>());
			});
		});
		update_running(running_mean, running_var, mean, var, n, momentum);
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

// Batch norm then dropout (after a ReLU when relu) as one autograd function
// (batch_norm.h): the running statistics move as BatchNormTrain moves them,
// and the seed is drawn where the dropout would draw it.
struct BatchNormDropout : public torch::autograd::Function<BatchNormDropout> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
	                          at::Tensor running_mean, at::Tensor running_var, double momentum, double eps, double p,
	                          bool relu) {
		auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
		check_training_input(xc, wc, bc);
		const int64_t n = xc.size(0), c = xc.size(1);
		auto mean = at::empty({c}, xc.options()), invstd = at::empty({c}, xc.options()), var = at::empty({c}, xc.options());
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm_statistics", [&] {
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_statistics, scalar_t)(xc.data_ptr<scalar_t>(), n, c, c0, c1,
				                                                 static_cast<scalar_t>(eps), mean.data_ptr<scalar_t>(),
				                                                 invstd.data_ptr<scalar_t>(), var.data_ptr<scalar_t>());
			});
		});
		update_running(running_mean, running_var, mean, var, n, momentum);
		const uint64_t seed = mg_dropout_seed();
		auto z = at::empty_like(xc);
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm_dropout", [&] {
			const scalar_t scale = static_cast<scalar_t>(1 / (1 - p));
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_dropout_apply, scalar_t)(
				    xc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(),
				    mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), n, c, c0, c1, seed, static_cast<float>(p),
				    scale, relu, z.data_ptr<scalar_t>());
			});
		});
		ctx->saved_data["mean"] = mean;
		ctx->saved_data["invstd"] = invstd;
		ctx->saved_data["seed"] = static_cast<int64_t>(seed);
		ctx->saved_data["p"] = p;
		ctx->saved_data["relu"] = relu;
		// z, the output: the input of the next layer, kept alive by it anyway.
		ctx->save_for_backward({xc, wc, z});
		return z;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &x = saved[0], &w = saved[1], &z = saved[2];
		auto mean = ctx->saved_data["mean"].toTensor(), invstd = ctx->saved_data["invstd"].toTensor();
		const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
		const double p = ctx->saved_data["p"].toDouble();
		const bool relu = ctx->saved_data["relu"].toBool();
		auto g = grads[0].contiguous();
		auto gx = at::empty_like(x), gw = at::empty_like(w), gb = at::empty_like(w), gy = at::empty_like(w);
		const int64_t n = x.size(0), c = x.size(1);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_dropout_backward", [&] {
			const scalar_t scale = static_cast<scalar_t>(1 / (1 - p));
			at::parallel_for(0, c, mg_batch_norm_grain(n), [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_dropout_backward, scalar_t)(
				    x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), z.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
				    mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), n, c, c0, c1, seed, static_cast<float>(p),
				    scale, relu, gx.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), gb.data_ptr<scalar_t>(),
				    gy.data_ptr<scalar_t>());
			});
		});
		return {gx, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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

mg_error mg_fused_batch_norm_dropout(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                                     mg_tensor running_var, double momentum, double eps, double p, int relu,
                                     mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(x->t), "batch_norm_dropout: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(x->t.dim() == 2, "batch_norm_dropout: the kernel takes 2-d input, not ", x->t.sizes());
		TORCH_CHECK(p > 0 && p < 1, "batch_norm_dropout: the kernel takes 0 < p < 1, not ", p);
		mg_check_cpu("batch_norm_dropout", {weight->t, bias->t, running_mean->t, running_var->t});
		*out = mg_wrap(BatchNormDropout::apply(x->t, weight->t, bias->t, running_mean->t, running_var->t, momentum, eps,
		                                       p, relu != 0));
	})
}
