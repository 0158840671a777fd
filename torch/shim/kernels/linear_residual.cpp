// The autograd function of the linear layer's bias and residual (maths in
// linear_residual.h) and mg_fused_linear_residual; the CPU loop is in
// linear_residual_cpu.cpp.
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels.h"
#include "linear_residual.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Z = (Y + b) + R as an autograd function.
struct BiasResidual : public torch::autograd::Function<BiasResidual> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &y, const at::Tensor &b, const at::Tensor &r) {
		auto yc = y.contiguous(), bc = b.contiguous(), rc = r.contiguous();
		TORCH_CHECK(yc.dim() == 2 && rc.sizes() == yc.sizes() && bc.dim() == 1 && bc.size(0) == yc.size(1),
		            "linear_residual: the product is ", yc.sizes(), ", the bias ", bc.sizes(), ", the residual ",
		            rc.sizes());
		TORCH_CHECK(bc.scalar_type() == yc.scalar_type() && rc.scalar_type() == yc.scalar_type(),
		            "linear_residual: the product, bias and residual differ in dtype");
		auto z = at::empty_like(yc);
		const int64_t n = yc.size(0), c = yc.size(1);
		AT_DISPATCH_FLOATING_TYPES(yc.scalar_type(), "linear_residual", [&] {
			at::parallel_for(0, n, std::max<int64_t>(1, 32768 / std::max<int64_t>(c, 1)), [&](int64_t begin, int64_t end) {
				MG_CPU_LOOP(mg::bias_residual, scalar_t)(yc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(),
				                                         rc.data_ptr<scalar_t>(), c, begin, end, z.data_ptr<scalar_t>());
			});
		});
		ctx->saved_data["bias_shape"] = b.sizes();
		return z;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		const auto &g = grads[0];
		auto shape = ctx->saved_data["bias_shape"].toIntVector();
		return {g, at::sum_to(g, shape), g};
	}
};

} // namespace

mg_error mg_fused_linear_residual(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor residual,
                                  mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(x->t), "linear_residual: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(x->t.dim() == 2, "linear_residual: the kernel takes 2-d input, not ", x->t.sizes());
		mg_check_cpu("linear_residual", {weight->t, bias->t, residual->t});
		*out = mg_wrap(BiasResidual::apply(at::mm(x->t, weight->t.t()), bias->t, residual->t));
	})
}
