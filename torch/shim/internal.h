// Shared by the shim's translation units; never included from Go.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <vector>

#include "shim.h"

// A handle: the scope id Go reads, then the tensor (one intrusive pointer).
struct mg_tensor_s {
	mg_tensor_head head;
	at::Tensor t;
};

// Wraps a result in a new handle tagged with this thread's current scope.
mg_tensor mg_wrap(at::Tensor t);

// Copies msg into a malloc'd mg_error.
mg_error mg_error_from(const char *msg);

at::TensorOptions mg_tensor_options(const mg_options &o);
std::vector<at::Tensor> mg_unwrap_all(const mg_tensor *ts, int n);

// The loop of mg_adam_step and mg_fused_adam_step (torch.optim.Adam/AdamW,
// single-tensor form): for each parameter i with a gradient, advances its step
// count t and calls update(i, p, grad, m, v, bias1, bias2_sqrt) with the bias
// corrections 1 − β₁ᵗ and √(1 − β₂ᵗ), without autograd.
template <typename Update>
void mg_adam_each(const mg_tensor *params, const mg_tensor *exp_avg, const mg_tensor *exp_avg_sq, int64_t *steps,
                  int n, double beta1, double beta2, Update update) {
	c10::NoGradGuard no_grad;
	for (int i = 0; i < n; i++) {
		auto &p = params[i]->t;
		at::Tensor grad = p.grad();
		if (!grad.defined()) continue;
		const double step = static_cast<double>(++steps[i]);
		update(i, p, grad, exp_avg[i]->t, exp_avg_sq[i]->t, 1 - std::pow(beta1, step),
		       std::sqrt(1 - std::pow(beta2, step)));
	}
}

inline at::IntArrayRef mg_dims(const int64_t *dims, int n) { return at::IntArrayRef(dims, static_cast<size_t>(n)); }

// Runs the body and turns every C++ exception into an mg_error, so that no
// exception crosses into Go (where it would abort the process).
#define MG_TRY(...)                                                \
	try {                                                          \
		__VA_ARGS__;                                               \
		return nullptr;                                            \
	} catch (const c10::Error &e) {                                \
		return mg_error_from(e.what_without_backtrace());          \
	} catch (const std::exception &e) {                            \
		return mg_error_from(e.what());                            \
	} catch (...) {                                                \
		return mg_error_from("unknown C++ exception");             \
	}
