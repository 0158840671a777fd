// The autograd function of the fused embedding-bag sum (maths in
// embedding_bag_sum.h) and its entry point; the CPU loops are in
// embedding_bag_sum_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "embedding_bag_sum.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The bag sum as an autograd function, with the sequential backward scatter.
struct BagSum : public torch::autograd::Function<BagSum> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &weight, const at::Tensor &indices) {
		auto w = weight.contiguous(), idx = indices.contiguous();
		TORCH_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, "embedding_bag_sum: indices must be 2-d int64");
		mg_check_cpu("embedding_bag_sum", {idx});
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
				MG_CPU_LOOP(mg::bag_sum_forward, scalar_t)(w.data_ptr<scalar_t>(), I, f, d, begin, end, out.data_ptr<scalar_t>());
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
			MG_CPU_LOOP(mg::bag_sum_backward, scalar_t)(g.data_ptr<scalar_t>(), idx.data_ptr<int64_t>(), idx.size(1), g.size(1), idx.size(0),
			                     gw.data_ptr<scalar_t>());
		});
		return {gw, at::Tensor()};
	}
};

} // namespace

mg_error mg_fused_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(weight->t),
		            "embedding_bag_sum: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		*out = mg_wrap(BagSum::apply(weight->t, indices->t));
	})
}
