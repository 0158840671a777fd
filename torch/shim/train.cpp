// Autograd, randomness, neural-network functions, optimisers and runtime settings.
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>

#ifdef MG_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "internal.h"

namespace {

at::Generator default_generator(int device_type, int device_index) {
	return at::globalContext().defaultGenerator(
	    at::Device(static_cast<at::DeviceType>(device_type), static_cast<at::DeviceIndex>(device_index)));
}

} // namespace

// ---- runtime ----

const char *mg_torch_version(void) { return TORCH_VERSION; }

int mg_cuda_device_count(void) {
	try {
		return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
	} catch (...) {
		return 0;
	}
}

mg_error mg_cuda_synchronize(int device_index) {
	MG_TRY({
		TORCH_CHECK(at::hasCUDA(), "CUDA is not available");
		at::detail::getCUDAHooks().deviceSynchronize(static_cast<int64_t>(device_index));
	})
}

mg_error mg_set_num_threads(int n) {
	MG_TRY({
		at::set_num_threads(n);
		// Debian's libtorch does its matrix products in OpenBLAS, whose own
		// thread pool busy-waits and ignores at::set_num_threads: bound it too.
		// PyTorch's wheels use MKL instead, which at::set_num_threads governs.
		using setter = void (*)(int);
		if (auto f = reinterpret_cast<setter>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
	})
}

int mg_get_num_threads(void) { return at::get_num_threads(); }

const char *mg_openblas_core(void) {
	using getter = char *(*)(void);
	auto f = reinterpret_cast<getter>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
	return f ? f() : nullptr;
}

mg_error mg_set_deterministic(int on) { MG_TRY(at::globalContext().setDeterministicAlgorithms(on != 0, false)) }

mg_error mg_cuda_capability(int device_index, int *major, int *minor) {
	MG_TRY({
#ifdef MG_WITH_CUDA
		auto props = at::cuda::getDeviceProperties(device_index);
		*major = props->major;
		*minor = props->minor;
#else
		TORCH_CHECK(false, "the shim was built without CUDA");
#endif
	})
}

mg_error mg_set_allow_tf32(int on) {
	MG_TRY({
		at::globalContext().setAllowTF32CuBLAS(on != 0);
		at::globalContext().setAllowTF32CuDNN(on != 0);
	})
}

mg_error mg_cuda_peak_memory(int device_index, int reset, int64_t *peak) {
	MG_TRY({
#ifdef MG_WITH_CUDA
		auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
		*peak = stats.allocated_bytes[0].peak; // [0]: the aggregate over pool kinds
		if (reset) c10::cuda::CUDACachingAllocator::resetPeakStats(device_index);
#else
		TORCH_CHECK(false, "the shim was built without CUDA");
#endif
	})
}

// ---- randomness ----

mg_error mg_manual_seed(uint64_t seed) { MG_TRY(at::manual_seed(seed)) }

mg_error mg_rng_state(int device_type, int device_index, mg_tensor *out) {
	MG_TRY({
		auto gen = default_generator(device_type, device_index);
		std::lock_guard<std::mutex> lock(gen.mutex());
		*out = mg_wrap(gen.get_state());
	})
}

mg_error mg_set_rng_state(int device_type, int device_index, mg_tensor state) {
	MG_TRY({
		auto gen = default_generator(device_type, device_index);
		std::lock_guard<std::mutex> lock(gen.mutex());
		gen.set_state(state->t);
	})
}

mg_error mg_bernoulli(mg_tensor probs, mg_tensor *out) { MG_TRY(*out = mg_wrap(at::bernoulli(probs->t))) }

mg_error mg_dropout(mg_tensor a, double p, int train, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::dropout(a->t, p, train != 0)))
}

// ---- neural-network functions ----

mg_error mg_embedding(mg_tensor weight, mg_tensor indices, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::embedding(weight->t, indices->t)))
}

mg_error mg_batch_norm(mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                       mg_tensor running_var, int training, double momentum, double eps, mg_tensor *out) {
	MG_TRY({
		c10::optional<at::Tensor> rm, rv;
		if (running_mean != nullptr) rm = running_mean->t;
		if (running_var != nullptr) rv = running_var->t;
		*out = mg_wrap(at::batch_norm(x->t, weight->t, bias->t, rm, rv, training != 0, momentum, eps,
		                              /*cudnn_enabled=*/true));
	})
}

mg_error mg_embedding_bag_sum(mg_tensor weight, mg_tensor indices, mg_tensor *out) {
	MG_TRY({
		const auto &x = indices->t;
		TORCH_CHECK(x.dim() == 2, "embedding_bag_sum: indices must be 2-d, got ", x.sizes());
		auto offsets = at::arange(0, x.numel(), x.size(1), x.options().dtype(at::kLong));
		*out = mg_wrap(std::get<0>(at::embedding_bag(weight->t, x.reshape(-1), offsets, false, /*mode=sum*/ 0)));
	})
}

// ---- autograd ----

int mg_set_grad_enabled(int enabled) {
	bool prev = c10::GradMode::is_enabled();
	c10::GradMode::set_enabled(enabled != 0);
	return prev ? 1 : 0;
}

mg_error mg_set_requires_grad(mg_tensor t, int requires_grad) { MG_TRY(t->t.set_requires_grad(requires_grad != 0)) }

mg_error mg_detach(mg_tensor t, mg_tensor *out) { MG_TRY(*out = mg_wrap(t->t.detach())) }

mg_error mg_grad(mg_tensor t, mg_tensor *out) {
	MG_TRY({
		const auto &g = t->t.grad();
		*out = g.defined() ? mg_wrap(g) : nullptr;
	})
}

mg_error mg_backward(mg_tensor t) { MG_TRY(t->t.backward()) }

// ---- optimisation ----

mg_error mg_adam_step(const mg_tensor *params, const mg_tensor *exp_avg, const mg_tensor *exp_avg_sq,
                      int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int decoupled) {
	MG_TRY({
		auto update = [&](int, at::Tensor &p, at::Tensor grad, at::Tensor &m, at::Tensor &v, double bias1,
		                  double bias2_sqrt) {
			if (weight_decay != 0) {
				if (decoupled) {
					p.mul_(1 - lr * weight_decay);
				} else {
					grad = grad.add(p, weight_decay);
				}
			}
			m.mul_(beta1).add_(grad, 1 - beta1);
			v.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
			auto denom = (v.sqrt() / bias2_sqrt).add_(eps);
			p.addcdiv_(m, denom, -lr / bias1);
		};
		mg_adam_each(params, exp_avg, exp_avg_sq, steps, n, beta1, beta2, update);
	})
}

mg_error mg_zero_grad(const mg_tensor *params, int n) {
	MG_TRY({
		for (int i = 0; i < n; i++) params[i]->t.mutable_grad() = at::Tensor();
	})
}

mg_error mg_clip_grad_norm(const mg_tensor *params, int n, double max_norm, mg_tensor *total_norm) {
	MG_TRY({
		c10::NoGradGuard no_grad;
		std::vector<at::Tensor> norms;
		for (int i = 0; i < n; i++) {
			const auto &g = params[i]->t.grad();
			if (g.defined()) norms.push_back(at::norm(g, 2));
		}
		at::Tensor total;
		if (norms.empty()) {
			total = at::zeros({}, at::kFloat);
		} else {
			total = at::norm(at::stack(norms), 2);
			// Scale by min(1, max_norm / (total + 1e-6)) on the device: no host round trip.
			auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
			for (int i = 0; i < n; i++) {
				auto g = params[i]->t.grad();
				if (g.defined()) g.mul_(coef.to(g.device()));
			}
		}
		*total_norm = mg_wrap(total);
	})
}
