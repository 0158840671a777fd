// The fused Adam step's entry point (maths in adam.h); the CPU loop is in
// adam_cpu.cpp.
#include "adam.h"
#include "kernels.h"

mg_error mg_fused_adam_step(const mg_tensor *params, const mg_tensor *exp_avg, const mg_tensor *exp_avg_sq,
                            int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                            double weight_decay, int decoupled) {
	MG_TRY({
		auto update = [&](int i, at::Tensor &p, const at::Tensor &grad, at::Tensor &m, at::Tensor &v, double bias1,
		                  double bias2_sqrt) {
			TORCH_CHECK(mg_cpu_kernels(p), "adam: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
			const int64_t numel = p.numel();
			TORCH_CHECK(p.is_contiguous() && m.is_contiguous() && v.is_contiguous() && grad.numel() == numel &&
			                m.numel() == numel && v.numel() == numel && grad.scalar_type() == p.scalar_type() &&
			                m.scalar_type() == p.scalar_type() && v.scalar_type() == p.scalar_type(),
			            "adam: parameter ", i, " and its moments must be contiguous, with its gradient's size and dtype");
			mg_check_cpu("adam", {grad, m, v});
			auto g = grad.contiguous();
			AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "adam", [&] {
				using T = scalar_t;
				MG_CPU_LOOP(mg::adam_update, T)(p.data_ptr<T>(), g.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(), numel, T(lr),
				                T(beta1), T(beta2), T(eps), T(weight_decay), decoupled != 0, T(bias1), T(bias2_sqrt));
			});
		};
		mg_adam_each(params, exp_avg, exp_avg_sq, steps, n, beta1, beta2, update);
	})
}
