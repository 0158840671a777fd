// c10d process groups (torch.distributed's engine) behind the C API: a
// TCPStore rendezvous, then Gloo (CPU tensors) or, when this libtorch has it,
// NCCL (CUDA tensors).
//
// c10d's headers compile only with the backends' own headers: Gloo's come
// with Debian's libgloo-dev and inside PyTorch wheels, NCCL's with the CUDA
// build. A backend whose headers are absent is left out and asking for it is
// an error, so the shim still builds everywhere.
#include <torch/version.h>

#if __has_include(<gloo/algorithm.h>)
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#define MG_HAVE_GLOO 1
#else
#define MG_HAVE_GLOO 0
#endif

#if defined(MG_WITH_CUDA) && __has_include(<nccl.h>) && \
	__has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#define MG_HAVE_NCCL 1
#else
#define MG_HAVE_NCCL 0
#endif

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if MG_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if MG_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "internal.h"
#include "kernels/batch_norm.h"
#include "kernels/kernels.h"

// PyTorch 2 split ProcessGroup into a dispatching front and per-device
// Backends; the backends (ProcessGroupGloo, ProcessGroupNCCL) keep the
// collective methods of 1.13's ProcessGroup under the new base class.
#if TORCH_VERSION_MAJOR >= 2
using mg_backend_base = c10d::Backend;
#else
using mg_backend_base = c10d::ProcessGroup;
#endif

struct mg_group_s {
	c10::intrusive_ptr<c10d::Store> store;
	c10::intrusive_ptr<mg_backend_base> pg;
	std::chrono::milliseconds timeout;
	int rank;
	int size;
	// The profile (mg_group_profile), per mg_group_kind.
	std::array<std::atomic<int64_t>, MG_GROUP_KINDS> calls{}, nanoseconds{};
};

int mg_group_backends(void) { return (MG_HAVE_GLOO ? 1 : 0) | (MG_HAVE_NCCL ? 2 : 0); }

namespace {

bool is_loopback(const std::string &addr) {
	return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

#if MG_HAVE_GLOO
// The interface Gloo listens on: GLOO_SOCKET_IFNAME as torch.distributed
// reads it, else loopback for a loopback master (one machine), else the
// address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string &master) {
	if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != 0) {
		return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
	}
	if (is_loopback(master)) {
		return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
	}
	return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

// c10d logs every retry of a rendezvous (a master name that does not
// resolve, a port in use, a peer not there yet) as glog warnings on stderr,
// and then throws what they said. Its log threshold is raised to FATAL while
// a group is made, so that the exception, which reaches Go, says it once.
struct QuietRendezvous {
	int saved = FLAGS_caffe2_log_level;
	QuietRendezvous() { FLAGS_caffe2_log_level = 3; }
	~QuietRendezvous() { FLAGS_caffe2_log_level = saved; }
	QuietRendezvous(const QuietRendezvous &) = delete;
	QuietRendezvous &operator=(const QuietRendezvous &) = delete;
};

using Clock = std::chrono::steady_clock;

// Counts the time from its making to its end as spent in a collective of
// kind (mg_group_profile).
struct Timed {
	mg_group g;
	int kind;
	Clock::time_point began = Clock::now();
	Timed(mg_group g, int kind) : g(g), kind(kind) {
		TORCH_CHECK(kind >= 0 && kind < MG_GROUP_KINDS, "collective kind ", kind);
	}
	~Timed() {
		g->calls[kind]++;
		g->nanoseconds[kind] += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - began).count();
	}
	Timed(const Timed &) = delete;
	Timed &operator=(const Timed &) = delete;
};

// Waits for a collective; its failure (a peer gone, the timeout) is thrown.
void finish(mg_group g, const c10::intrusive_ptr<c10d::Work> &work) { work->wait(g->timeout); }

c10d::ReduceOp reduce_op(int op) {
	switch (op) {
	case MG_GROUP_SUM:
		return c10d::ReduceOp::SUM;
	case MG_GROUP_MAX:
		return c10d::ReduceOp::MAX;
	case MG_GROUP_MIN:
		return c10d::ReduceOp::MIN;
	}
	TORCH_CHECK(false, "unknown reduce op ", op);
}

void all_reduce(mg_group g, at::Tensor &t, int op, int kind) {
	TORCH_CHECK(t.is_contiguous(), "all-reduce needs a contiguous tensor");
	Timed timed(g, kind);
	std::vector<at::Tensor> ts{t};
	c10d::AllreduceOptions o;
	o.reduceOp = reduce_op(op);
	o.timeout = g->timeout;
	finish(g, g->pg->allreduce(ts, o));
}

// The sum over ranks as an autograd function: the gradient of every rank's
// input is the sum over ranks of the gradients of the output, which is what
// the sum of the ranks' losses asks for (synchronised batch norm).
struct AllReduceSum : public torch::autograd::Function<AllReduceSum> {
	static at::Tensor forward(torch::autograd::AutogradContext *ctx, at::Tensor x, int64_t group, int64_t kind,
	                          int64_t backward_kind) {
		ctx->saved_data["group"] = group;
		ctx->saved_data["backward_kind"] = backward_kind;
		auto y = x.clone(at::MemoryFormat::Contiguous);
		all_reduce(reinterpret_cast<mg_group>(group), y, MG_GROUP_SUM, static_cast<int>(kind));
		return y;
	}
	static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
	                                               torch::autograd::variable_list grads) {
		auto g = reinterpret_cast<mg_group>(ctx->saved_data["group"].toInt());
		auto dx = grads[0].clone(at::MemoryFormat::Contiguous);
		all_reduce(g, dx, MG_GROUP_SUM, static_cast<int>(ctx->saved_data["backward_kind"].toInt()));
		return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

// Synchronised training-mode batch norm in the fused kernel's phases
// (kernels/batch_norm.h): the per-channel sums, the count of rows and the
// sums of squares are summed over ranks in the forward pass, and the
// backward pass's GW and GB in the backward pass, so that every rank
// normalises with the global batch's statistics and backpropagates through
// them. The parameters' gradients stay this rank's (GW, GB before the sum):
// the job sums them with the other gradients. Three all-reduces of c or 2c
// values per call, instead of the composed version's four and its dozen
// tensor ops.
struct BatchNormAcross : public torch::autograd::Function<BatchNormAcross> {
	static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w,
	                          const at::Tensor &b, at::Tensor running_mean, at::Tensor running_var, double momentum,
	                          double eps, int64_t group) {
		auto g = reinterpret_cast<mg_group>(group);
		auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
		const int64_t n = xc.size(0), c = xc.size(1);
		TORCH_CHECK(wc.numel() == c && bc.numel() == c, "batch_norm: ", c, " channels, weight ", wc.sizes());
		auto sums = at::empty({c + 1}, xc.options()), squares = at::empty({c}, xc.options());
		auto y = at::empty_like(xc), mean = at::empty({c}, xc.options()), invstd = at::empty({c}, xc.options());
		double count = 0;
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm_across", [&] {
			const int64_t grain = mg_batch_norm_grain(n);
			const scalar_t *X = xc.data_ptr<scalar_t>();
			auto *s = sums.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) { mg::batch_norm_sums(X, n, c, c0, c1, s); });
			s[c] = static_cast<scalar_t>(n);
			all_reduce(g, sums, MG_GROUP_SUM, MG_KIND_NORM_FORWARD);
			const scalar_t rows = s[c];
			count = static_cast<double>(rows);
			TORCH_CHECK(count > 1, "batch_norm: expected more than 1 value per channel when training");
			auto *m = mean.data_ptr<scalar_t>();
			for (int64_t j = 0; j < c; j++) m[j] = s[j] / rows;
			auto *q = squares.data_ptr<scalar_t>(), *v = invstd.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) { mg::batch_norm_squares(X, m, n, c, c0, c1, q); });
			all_reduce(g, squares, MG_GROUP_SUM, MG_KIND_NORM_FORWARD);
			for (int64_t j = 0; j < c; j++) {
				q[j] /= rows; // the biased variance, as the batch's
				v[j] = 1 / std::sqrt(q[j] + static_cast<scalar_t>(eps));
			}
			const scalar_t *W = wc.data_ptr<scalar_t>(), *B = bc.data_ptr<scalar_t>();
			scalar_t *Y = y.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				mg::batch_norm_apply(X, W, B, m, v, n, c, c0, c1, Y);
			});
		});
		{
			at::NoGradGuard no_grad;
			running_mean.mul_(1 - momentum).add_(mean, momentum);
			running_var.mul_(1 - momentum).add_(squares * (count / (count - 1)), momentum);
		}
		ctx->save_for_backward({xc, wc});
		ctx->saved_data["mean"] = mean;
		ctx->saved_data["invstd"] = invstd;
		ctx->saved_data["count"] = count;
		ctx->saved_data["group"] = group;
		return y;
	}

	static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
	                                               torch::autograd::variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &x = saved[0], &w = saved[1];
		auto mean = ctx->saved_data["mean"].toTensor(), invstd = ctx->saved_data["invstd"].toTensor();
		const double count = ctx->saved_data["count"].toDouble();
		auto g = reinterpret_cast<mg_group>(ctx->saved_data["group"].toInt());
		auto gy = grads[0].contiguous();
		const int64_t n = x.size(0), c = x.size(1);
		auto local = at::empty({2 * c}, x.options()), gx = at::empty_like(x);
		const int64_t grain = mg_batch_norm_grain(n);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_across_backward", [&] {
			auto *l = local.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				mg::batch_norm_backward_sums(x.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(),
				                             invstd.data_ptr<scalar_t>(), n, c, c0, c1, l, l + c);
			});
		});
		auto global = local.clone();
		all_reduce(g, global, MG_GROUP_SUM, MG_KIND_NORM_BACKWARD);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_across_backward", [&] {
			auto *s = global.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				mg::batch_norm_backward_apply(x.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
				                              mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(), s, s + c, n, c,
				                              c0, c1, static_cast<scalar_t>(count), gx.data_ptr<scalar_t>());
			});
		});
		return {gx, local.narrow(0, 0, c), local.narrow(0, c, c), at::Tensor(), at::Tensor(), at::Tensor(),
		        at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_group_new(const char *backend, const char *master_addr, int master_port, int rank, int size,
                      int64_t timeout_ms, mg_group *out) {
	MG_TRY({
		TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
		TORCH_CHECK(master_port > 0 && master_port < 65536, "master port ", master_port);
		TORCH_CHECK(timeout_ms > 0, "timeout ", timeout_ms, " ms");
		std::string name(backend), addr(master_addr);
		QuietRendezvous quiet;
		auto g = std::make_unique<mg_group_s>();
		g->timeout = std::chrono::milliseconds(timeout_ms);
		g->rank = rank;
		g->size = size;
		c10d::TCPStoreOptions so;
		so.port = static_cast<std::uint16_t>(master_port);
		so.isServer = rank == 0;
		so.numWorkers = static_cast<std::size_t>(size);
		so.waitWorkers = true;
		so.timeout = g->timeout;
		auto tcp = c10::make_intrusive<c10d::TCPStore>(addr, so);
		// One prefix per group, as torch.distributed names its default group.
		g->store = c10::make_intrusive<c10d::PrefixStore>("default_pg", tcp);
		if (name == "gloo") {
#if MG_HAVE_GLOO
			auto o = c10d::ProcessGroupGloo::Options::create(g->timeout);
			o->devices.push_back(gloo_device(addr));
			o->threads = 2;
			g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(g->store, rank, size, o);
#else
			TORCH_CHECK(false, "this shim was built without Gloo (no gloo headers; install libgloo-dev and rebuild)");
#endif
		} else if (name == "nccl") {
#if MG_HAVE_NCCL
			auto o = c10d::ProcessGroupNCCL::Options::create();
			o->timeout = g->timeout;
			g->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(g->store, rank, size, o);
#else
			TORCH_CHECK(false, "this shim was built without NCCL (a CUDA libtorch and nccl.h are needed)");
#endif
		} else {
			TORCH_CHECK(false, "unknown backend \"", name, "\" (gloo or nccl)");
		}
		*out = g.release();
	})
}

void mg_group_free(mg_group g) { delete g; }

mg_error mg_group_all_reduce(mg_group g, mg_tensor t, int op, int kind) { MG_TRY(all_reduce(g, t->t, op, kind)) }

mg_error mg_group_broadcast(mg_group g, mg_tensor t, int root, int kind) {
	MG_TRY({
		TORCH_CHECK(root >= 0 && root < g->size, "root ", root, " of world size ", g->size);
		TORCH_CHECK(t->t.is_contiguous(), "broadcast needs a contiguous tensor");
		Timed timed(g, kind);
		std::vector<at::Tensor> ts{t->t};
		c10d::BroadcastOptions o;
		o.rootRank = root;
		o.timeout = g->timeout;
		finish(g, g->pg->broadcast(ts, o));
	})
}

mg_error mg_group_all_gather(mg_group g, mg_tensor t, int kind, mg_tensor *out) {
	MG_TRY({
		Timed timed(g, kind);
		auto x = t->t.contiguous();
		auto sizes = x.sizes().vec();
		sizes.insert(sizes.begin(), g->size);
		auto stacked = at::empty(sizes, x.options());
		std::vector<std::vector<at::Tensor>> outputs(1);
		for (int r = 0; r < g->size; r++) {
			outputs[0].push_back(stacked[r]);
		}
		std::vector<at::Tensor> inputs{x};
		c10d::AllgatherOptions o;
		o.timeout = g->timeout;
		finish(g, g->pg->allgather(outputs, inputs, o));
		*out = mg_wrap(stacked);
	})
}

mg_error mg_group_barrier(mg_group g, int kind) {
	MG_TRY({
		Timed timed(g, kind);
		c10d::BarrierOptions o;
		o.timeout = g->timeout;
		finish(g, g->pg->barrier(o));
	})
}

mg_error mg_group_all_reduce_sum_autograd(mg_group g, mg_tensor t, int kind, int backward_kind, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(backward_kind >= 0 && backward_kind < MG_GROUP_KINDS, "collective kind ", backward_kind);
		*out = mg_wrap(AllReduceSum::apply(t->t, reinterpret_cast<int64_t>(g), kind, backward_kind));
	})
}

mg_error mg_group_batch_norm(mg_group g, mg_tensor x, mg_tensor weight, mg_tensor bias, mg_tensor running_mean,
                             mg_tensor running_var, double momentum, double eps, mg_tensor *out) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(x->t), "batch_norm: the kernel takes float32 or float64 on CPUs with AVX2 and FMA");
		TORCH_CHECK(x->t.dim() == 2, "batch_norm: the kernel takes 2-d input, not ", x->t.sizes());
		mg_check_cpu("batch_norm", {weight->t, bias->t, running_mean->t, running_var->t});
		*out = mg_wrap(BatchNormAcross::apply(x->t, weight->t, bias->t, running_mean->t, running_var->t, momentum, eps,
		                                      reinterpret_cast<int64_t>(g)));
	})
}

void mg_group_profile(mg_group g, int64_t *calls, int64_t *nanoseconds) {
	for (int k = 0; k < MG_GROUP_KINDS; k++) {
		calls[k] = g->calls[k];
		nanoseconds[k] = g->nanoseconds[k];
	}
}
