// Tensors: lifecycle, creation, host transfer and the tensor ops the model uses.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <ATen/ScalarOps.h>

#include "internal.h"

namespace {

std::atomic<int64_t> live_tensors{0};
thread_local std::vector<uint64_t> scope_stack;

at::Scalar scalar_for(const at::Tensor &t, double s) {
	// Keep integer tensors integral when the scalar is a whole number.
	if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false) && std::floor(s) == s &&
	    std::fabs(s) < 9.007199254740992e15) {
		return at::Scalar(static_cast<int64_t>(s));
	}
	return at::Scalar(s);
}

at::Tensor binary(int op, const at::Tensor &a, const at::Tensor &b) {
	switch (op) {
	case MG_ADD: return at::add(a, b);
	case MG_SUB: return at::sub(a, b);
	case MG_MUL: return at::mul(a, b);
	case MG_DIV: return at::div(a, b);
	case MG_POW: return at::pow(a, b);
	case MG_MINIMUM: return at::minimum(a, b);
	case MG_REMAINDER: return at::remainder(a, b);
	case MG_FLOOR_DIVIDE: return at::div(a, b, "floor");
	case MG_NE: return at::ne(a, b);
	case MG_LT: return at::lt(a, b);
	case MG_LE: return at::le(a, b);
	case MG_GT: return at::gt(a, b);
	case MG_GE: return at::ge(a, b);
	}
	TORCH_CHECK(false, "unknown binary op ", op);
}

// segment_reduce's names of the reductions ("max"/"min" for amax/amin).
const char *segment_reduce_name(int reduce) {
	switch (reduce) {
	case MG_SUM: return "sum";
	case MG_MEAN: return "mean";
	case MG_AMAX: return "max";
	case MG_AMIN: return "min";
	}
	TORCH_CHECK(false, "unknown reduction ", reduce);
}

} // namespace

mg_tensor mg_wrap(at::Tensor t) {
	live_tensors.fetch_add(1, std::memory_order_relaxed);
	return new mg_tensor_s{{scope_stack.empty() ? 0 : scope_stack.back()}, std::move(t)};
}

mg_error mg_error_from(const char *msg) {
	size_t n = std::strlen(msg);
	char *e = static_cast<char *>(std::malloc(n + 1));
	if (e != nullptr) std::memcpy(e, msg, n + 1);
	return e;
}

at::TensorOptions mg_tensor_options(const mg_options &o) {
	auto opts = at::TensorOptions()
	                .dtype(static_cast<at::ScalarType>(o.dtype))
	                .device(at::Device(static_cast<at::DeviceType>(o.device_type),
	                                   static_cast<at::DeviceIndex>(o.device_index)));
	// Pinned memory needs the CUDA host allocator; without CUDA it is plain memory.
	if (o.pinned && o.device_type == 0 && at::hasCUDA()) opts = opts.pinned_memory(true);
	return opts;
}

std::vector<at::Tensor> mg_unwrap_all(const mg_tensor *ts, int n) {
	std::vector<at::Tensor> v;
	v.reserve(static_cast<size_t>(n));
	for (int i = 0; i < n; i++) v.push_back(ts[i]->t);
	return v;
}

// ---- lifecycle, scopes, metadata ----

void mg_free(mg_tensor t) {
	if (t == nullptr) return;
	live_tensors.fetch_sub(1, std::memory_order_relaxed);
	delete t;
}

int64_t mg_live_tensors(void) { return live_tensors.load(std::memory_order_relaxed); }

uint64_t mg_scope_push(uint64_t id) {
	uint64_t prev = scope_stack.empty() ? 0 : scope_stack.back();
	scope_stack.push_back(id);
	return prev;
}

int mg_scope_pop(uint64_t id) {
	if (scope_stack.empty() || scope_stack.back() != id) return 0;
	scope_stack.pop_back();
	return 1;
}

int mg_dim(mg_tensor t) { return static_cast<int>(t->t.dim()); }

void mg_shape(mg_tensor t, int64_t *shape) {
	auto s = t->t.sizes();
	std::copy(s.begin(), s.end(), shape);
}

int mg_dtype(mg_tensor t) { return static_cast<int>(t->t.scalar_type()); }

void mg_device(mg_tensor t, int *type, int *index) {
	auto d = t->t.device();
	*type = static_cast<int>(d.type());
	*index = d.has_index() ? d.index() : -1;
}

int mg_requires_grad(mg_tensor t) { return t->t.requires_grad() ? 1 : 0; }


// ---- creation and host transfer ----

mg_error mg_from_data(const void *data, const int64_t *shape, int ndim, mg_options o, mg_tensor *out) {
	MG_TRY({
		auto opts = mg_tensor_options(o);
		auto host = at::empty(mg_dims(shape, ndim), opts.device(at::kCPU));
		std::memcpy(host.data_ptr(), data, host.nbytes());
		// On the CPU the filled tensor is the result: no second copy.
		auto t = opts.device().is_cpu() ? host : host.to(opts.device(), /*non_blocking=*/false);
		if (o.requires_grad) t.set_requires_grad(true);
		*out = mg_wrap(t);
	})
}

mg_error mg_factory(int kind, const int64_t *shape, int ndim, double value, mg_options o, mg_tensor *out) {
	MG_TRY({
		auto size = mg_dims(shape, ndim);
		auto opts = mg_tensor_options(o);
		at::Tensor t;
		switch (kind) {
		case MG_EMPTY: t = at::empty(size, opts); break;
		case MG_ZEROS: t = at::zeros(size, opts); break;
		case MG_ONES: t = at::ones(size, opts); break;
		case MG_FULL: t = at::full(size, value, opts); break;
		case MG_RAND: t = at::rand(size, opts); break;
		default: TORCH_CHECK(false, "unknown factory ", kind);
		}
		if (o.requires_grad) t.set_requires_grad(true);
		*out = mg_wrap(t);
	})
}

mg_error mg_arange(double start, double end, double step, mg_options o, mg_tensor *out) {
	MG_TRY({
		auto opts = mg_tensor_options(o);
		if (at::isIntegralType(opts.dtype().toScalarType(), false)) {
			*out = mg_wrap(at::arange(static_cast<int64_t>(start), static_cast<int64_t>(end),
			                          static_cast<int64_t>(step), opts));
		} else {
			*out = mg_wrap(at::arange(start, end, step, opts));
		}
	})
}

mg_error mg_copy_to_host(mg_tensor t, void *dst, int64_t nbytes) {
	MG_TRY({
		auto host = t->t.detach().to(at::kCPU).contiguous();
		TORCH_CHECK(static_cast<int64_t>(host.nbytes()) == nbytes, "copy to host: tensor holds ",
		            host.nbytes(), " bytes, destination ", nbytes);
		std::memcpy(dst, host.data_ptr(), host.nbytes());
	})
}

mg_error mg_data_ptr(mg_tensor t, void **out) {
	MG_TRY({
		TORCH_CHECK(t->t.device().is_cpu() && t->t.is_contiguous(),
		            "data pointer: tensor must be contiguous and on the CPU");
		*out = t->t.data_ptr();
	})
}

mg_error mg_item(mg_tensor t, double *f, int64_t *i) {
	MG_TRY({
		auto s = t->t.item();
		if (s.isIntegral(/*includeBool=*/true)) {
			*i = s.toLong();
			*f = static_cast<double>(*i);
		} else {
			*f = s.toDouble();
			*i = static_cast<int64_t>(*f);
		}
	})
}

mg_error mg_to(mg_tensor t, mg_options o, int non_blocking, mg_tensor *out) {
	MG_TRY({
		auto opts = mg_tensor_options(o);
		*out = mg_wrap(t->t.to(opts.device(), opts.dtype().toScalarType(), non_blocking != 0));
	})
}

mg_error mg_copy_(mg_tensor dst, mg_tensor src, int non_blocking) {
	MG_TRY(dst->t.copy_(src->t, non_blocking != 0))
}

mg_error mg_clone(mg_tensor t, mg_tensor *out) { MG_TRY(*out = mg_wrap(t->t.clone())) }


// ---- in-place fills ----

mg_error mg_fill_(mg_tensor t, double value) { MG_TRY(t->t.fill_(scalar_for(t->t, value))) }

mg_error mg_add_scalar_(mg_tensor t, double value) { MG_TRY(t->t.add_(scalar_for(t->t, value))) }

mg_error mg_uniform_(mg_tensor t, double lo, double hi) { MG_TRY(t->t.uniform_(lo, hi)) }

mg_error mg_normal_(mg_tensor t, double mean, double std) { MG_TRY(t->t.normal_(mean, std)) }

// ---- elementwise ----

mg_error mg_unary(int op, mg_tensor a, mg_tensor *out) {
	MG_TRY({
		const auto &x = a->t;
		at::Tensor r;
		switch (op) {
		case MG_NEG: r = at::neg(x); break;
		case MG_EXP: r = at::exp(x); break;
		case MG_LOG: r = at::log(x); break;
		case MG_SQRT: r = at::sqrt(x); break;
		case MG_ABS: r = at::abs(x); break;
		case MG_RECIPROCAL: r = at::reciprocal(x); break;
		case MG_RELU: r = at::relu(x); break;
		case MG_LOGICAL_NOT: r = at::logical_not(x); break;
		case MG_ISFINITE: r = at::isfinite(x); break;
		case MG_GELU: r = at::gelu(x); break;
		default: TORCH_CHECK(false, "unknown unary op ", op);
		}
		*out = mg_wrap(r);
	})
}

mg_error mg_binary(int op, mg_tensor a, mg_tensor b, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(binary(op, a->t, b->t)))
}

mg_error mg_binary_scalar(int op, mg_tensor a, double s, mg_tensor *out) {
	MG_TRY({
		// A wrapped-number CPU tensor promotes like a Python scalar and is passed
		// to CUDA kernels by value.
		// A float32 or float64 a gets the scalar in its own dtype, as the op
		// would cast it anyway (and again in backward for the saved operand).
		// Half-precision types keep the double: their kernels compute in float
		// and would otherwise see the scalar rounded to half precision.
		auto st = a->t.scalar_type();
		auto b = st == at::kFloat || st == at::kDouble ? at::detail::scalar_tensor_static(s, st, at::kCPU)
		                                               : c10::scalar_to_tensor(scalar_for(a->t, s));
		b.unsafeGetTensorImpl()->set_wrapped_number(true);
		*out = mg_wrap(binary(op, a->t, b));
	})
}

mg_error mg_clamp(mg_tensor a, double lo, double hi, int has_lo, int has_hi, mg_tensor *out) {
	MG_TRY({
		c10::optional<at::Scalar> l, h;
		if (has_lo) l = scalar_for(a->t, lo);
		if (has_hi) h = scalar_for(a->t, hi);
		*out = mg_wrap(at::clamp(a->t, l, h));
	})
}

mg_error mg_where(mg_tensor cond, mg_tensor a, mg_tensor b, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::where(cond->t, a->t, b->t)))
}

mg_error mg_masked_fill(mg_tensor a, mg_tensor mask, double value, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(a->t.masked_fill(mask->t, scalar_for(a->t, value))))
}

// ---- reductions ----

mg_error mg_reduce(int op, mg_tensor a, const int64_t *dims, int ndims, int keepdim, mg_tensor *out) {
	MG_TRY({
		const auto &x = a->t;
		auto d = mg_dims(dims, ndims);
		bool k = keepdim != 0;
		bool all = ndims == 0;
		at::Tensor r;
		switch (op) {
		case MG_SUM: r = all ? at::sum(x) : at::sum(x, d, k); break;
		case MG_MEAN: r = all ? at::mean(x) : at::mean(x, d, k); break;
		case MG_AMAX: r = at::amax(x, d, k); break; // empty dims: every element
		case MG_AMIN: r = at::amin(x, d, k); break;
		case MG_ALL:
			TORCH_CHECK(ndims <= 1, "all reduces over one dim at a time");
			r = all ? at::all(x) : at::all(x, d[0], k);
			break;
		default: TORCH_CHECK(false, "unknown reduction ", op);
		}
		*out = mg_wrap(r);
	})
}

mg_error mg_argmax(mg_tensor a, int64_t dim, int keepdim, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::argmax(a->t, dim, keepdim != 0)))
}

mg_error mg_nonzero(mg_tensor a, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(a->t.dim() == 1, "nonzero: the tensor has ", a->t.dim(), " dimensions, not 1");
		*out = mg_wrap(at::nonzero(a->t).squeeze(1));
	})
}

mg_error mg_norm(mg_tensor a, double p, const int64_t *dims, int ndims, int keepdim, mg_tensor *out) {
	MG_TRY({
		if (ndims == 0) {
			*out = mg_wrap(at::norm(a->t, at::Scalar(p)));
		} else {
			*out = mg_wrap(at::norm(a->t, at::Scalar(p), mg_dims(dims, ndims), keepdim != 0));
		}
	})
}

mg_error mg_cumsum(mg_tensor a, int64_t dim, mg_tensor *out) { MG_TRY(*out = mg_wrap(at::cumsum(a->t, dim))) }

mg_error mg_softmax(mg_tensor a, int64_t dim, int log, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(log ? at::log_softmax(a->t, dim) : at::softmax(a->t, dim)))
}

mg_error mg_normalize(mg_tensor a, double p, int64_t dim, double eps, mg_tensor *out) {
	MG_TRY({
		// x / max(‖x‖_p, eps), as torch.nn.functional.normalize.
		auto n = at::norm(a->t, at::Scalar(p), {dim}, /*keepdim=*/true).clamp_min(eps);
		*out = mg_wrap(a->t / n);
	})
}

// ---- linear algebra ----

mg_error mg_matmul(mg_tensor a, mg_tensor b, mg_tensor *out) { MG_TRY(*out = mg_wrap(at::matmul(a->t, b->t))) }

mg_error mg_linear(mg_tensor x, mg_tensor w, mg_tensor b, mg_tensor *out) {
	MG_TRY({
		c10::optional<at::Tensor> bias;
		if (b != nullptr) bias = b->t;
		*out = mg_wrap(at::linear(x->t, w->t, bias));
	})
}

// ---- shape ----

mg_error mg_reshape(mg_tensor a, const int64_t *shape, int ndim, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(a->t.reshape(mg_dims(shape, ndim))))
}

mg_error mg_expand(mg_tensor a, const int64_t *shape, int ndim, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(a->t.expand(mg_dims(shape, ndim))))
}

mg_error mg_transpose(mg_tensor a, int64_t d0, int64_t d1, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(a->t.transpose(d0, d1)))
}

mg_error mg_unsqueeze(mg_tensor a, int64_t dim, mg_tensor *out) { MG_TRY(*out = mg_wrap(a->t.unsqueeze(dim))) }

mg_error mg_squeeze(mg_tensor a, int64_t dim, mg_tensor *out) { MG_TRY(*out = mg_wrap(a->t.squeeze(dim))) }

mg_error mg_narrow(mg_tensor a, int64_t dim, int64_t start, int64_t length, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(a->t.narrow(dim, start, length)))
}

mg_error mg_cat(const mg_tensor *ts, int n, int64_t dim, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::cat(mg_unwrap_all(ts, n), dim)))
}

mg_error mg_stack(const mg_tensor *ts, int n, int64_t dim, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::stack(mg_unwrap_all(ts, n), dim)))
}

// ---- indexing, scatter and segments ----

mg_error mg_index_select(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::index_select(a->t, dim, index->t)))
}

mg_error mg_gather(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::gather(a->t, dim, index->t)))
}

mg_error mg_index_add(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor src, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::index_add(a->t, dim, index->t, src->t)))
}

mg_error mg_segment_reduce(mg_tensor data, mg_tensor offsets, int reduce, int has_initial, double initial,
                           mg_tensor *out) {
	MG_TRY({
		const auto &x = data->t;
		if (x.numel() == 0) {
			// libtorch refuses empty data; every segment is then empty.
			auto sizes = x.sizes().vec();
			sizes[0] = offsets->t.size(0) - 1;
			double fill = reduce == MG_SUM    ? 0.0
			              : reduce == MG_AMAX ? -INFINITY
			              : reduce == MG_AMIN ? INFINITY
			                                  : NAN;
			*out = mg_wrap(at::full(sizes, fill, x.options()));
			return nullptr;
		}
		const char *name = segment_reduce_name(reduce);
		c10::optional<at::Scalar> init;
		if (has_initial) init = at::Scalar(initial);
		*out = mg_wrap(at::segment_reduce(x, name, c10::nullopt, c10::nullopt, offsets->t, 0,
		                                  /*unsafe=*/false, init));
	})
}

mg_error mg_scatter(mg_tensor a, int64_t dim, mg_tensor index, mg_tensor src, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(at::scatter(a->t, dim, index->t, src->t)))
}

mg_error mg_sort(mg_tensor a, int64_t dim, int descending, mg_tensor *values, mg_tensor *indices) {
	MG_TRY({
		auto r = at::sort(a->t, /*stable=*/true, dim, descending != 0);
		*values = mg_wrap(std::get<0>(r));
		*indices = mg_wrap(std::get<1>(r));
	})
}

mg_error mg_one_hot(mg_tensor a, int64_t classes, mg_tensor *out) { MG_TRY(*out = mg_wrap(at::one_hot(a->t, classes))) }
