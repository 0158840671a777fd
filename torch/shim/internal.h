// Shared by the shim's translation units; never included from Go.
#pragma once

#include <ATen/ATen.h>

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
