// The autograd function of the fused dropout (maths in dropout.h) and its
// entry point; the CPU loop is in dropout_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "dropout.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Dropout as an autograd function: the seed is all that backward needs.
struct FastDropout : public torch::autograd::Function<FastDropout> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, double p) {
		const uint64_t seed = mg_dropout_seed();
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
				MG_CPU_LOOP(mg::dropout_mask, scalar_t)(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), begin, end, seed,
				                 static_cast<float>(p), scale);
			});
		});
		return y;
	}
};

// Dropout of ReLU(x) as one autograd function: backward needs the seed and
// x, whose sign is the ReLU's gate.
struct FastReluDropout : public torch::autograd::Function<FastReluDropout> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, double p) {
		const uint64_t seed = mg_dropout_seed();
		auto xc = x.contiguous();
		auto y = at::empty_like(xc);
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "relu_dropout", [&] {
			const scalar_t scale = static_cast<scalar_t>(1 / (1 - p));
			auto loop = MG_CPU_LOOP(mg::relu_dropout_mask, scalar_t);
			at::parallel_for(0, xc.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
				loop(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), begin, end, seed, static_cast<float>(p), scale);
			});
		});
		ctx->save_for_backward({xc});
		ctx->saved_data["seed"] = static_cast<int64_t>(seed);
		ctx->saved_data["p"] = p;
		return y;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
		const double p = ctx->saved_data["p"].toDouble();
		auto x = ctx->get_saved_variables()[0];
		auto g = grads[0].contiguous();
		auto gx = at::empty_like(g);
		AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "relu_dropout_backward", [&] {
			const scalar_t scale = static_cast<scalar_t>(1 / (1 - p));
			auto loop = MG_CPU_LOOP(mg::relu_dropout_grad, scalar_t);
			at::parallel_for(0, g.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
				loop(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), begin, end, seed,
				     static_cast<float>(p), scale);
			});
		});
		return {gx, at::Tensor()};
	}
};

} // namespace

uint64_t mg_dropout_seed() {
	auto gen = at::globalContext().defaultGenerator(at::kCPU);
	std::lock_guard<std::mutex> lock(gen.mutex());
	return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

mg_error mg_fused_dropout(mg_tensor a, double p, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(a->t), "dropout: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(p > 0 && p < 1, "dropout: the kernel takes 0 < p < 1, not ", p);
		*out = mg_wrap(FastDropout::apply(a->t, p));
	})
}

mg_error mg_fused_relu_dropout(mg_tensor a, double p, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(a->t), "relu_dropout: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(p > 0 && p < 1, "relu_dropout: the kernel takes 0 < p < 1, not ", p);
		*out = mg_wrap(FastReluDropout::apply(a->t, p));
	})
}
