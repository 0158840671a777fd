// The autograd function of the fused row normalisation (maths in
// normalize.h) and its entry point; the CPU loops are in normalize_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "normalize.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Row normalisation as an autograd function, with the one-pass backward.
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

} // namespace

mg_error mg_fused_normalize(mg_tensor a, double eps, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(a->t), "normalize: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(a->t.dim() == 2, "normalize: the kernel takes the rows of a 2-d tensor, not ", a->t.sizes());
		*out = mg_wrap(RowNormalize::apply(a->t, eps));
	})
}
