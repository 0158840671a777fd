// The autograd function of the fused block contrast (maths in
// block_contrast.h) and its entry point; the CPU loops are in
// block_contrast_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "block_contrast.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The loss as an autograd function of y; live is a constant.
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

} // namespace

mg_error mg_fused_block_contrast(mg_tensor y, mg_tensor live, int64_t per, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(y->t), "block_contrast: the kernel runs on CPUs with AVX2 and FMA");
		mg_check_cpu("block_contrast", {live->t});
		*out = mg_wrap(BlockContrast::apply(y->t, live->t, per));
	})
}
