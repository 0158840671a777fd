// c10d process groups (torch.distributed's engine) behind the C API: a
// TCPStore rendezvous, then Gloo (CPU tensors) or, when this libtorch has it,
// NCCL (CUDA tensors).
//
// c10d's headers compile only with the backends' own headers: Gloo's come
// with Debian's libgloo-dev and inside PyTorch wheels, NCCL's with the CUDA
// build. A backend whose headers are absent is left out and asking for it is
// an error, so the shim still builds everywhere.

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

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "compat.h"
#include "internal.h"
#include "kernels/batch_norm.h"
#include "kernels/kernels.h"
#include "kernels/sinkhorn.h"

struct mg_group_s {
	c10::intrusive_ptr<c10d::Store> store;
	c10::intrusive_ptr<mg::C10dBackend> pg;
	std::chrono::milliseconds timeout;
	int rank;
	int size;
	std::string backend, addr; // for a second group of the same processes (mg_grad_sum)
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
// kind (mg_group_profile); calls says how many collectives that time is for.
struct Timed {
	mg_group g;
	int kind;
	int64_t calls = 1;
	Clock::time_point began = Clock::now();
	Timed(mg_group g, int kind, int64_t calls = 1) : g(g), kind(kind), calls(calls) {
		TORCH_CHECK(kind >= 0 && kind < MG_GROUP_KINDS, "collective kind ", kind);
	}
	~Timed() {
		g->calls[kind] += calls;
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

// Starts an all-reduce of t on pg (the group's own, or mg_grad_sum's).
c10::intrusive_ptr<c10d::Work> start_all_reduce(mg_group g, mg::C10dBackend &pg, at::Tensor &t, int op) {
	TORCH_CHECK(t.is_contiguous(), "all-reduce needs a contiguous tensor");
	std::vector<at::Tensor> ts{t};
	c10d::AllreduceOptions o;
	o.reduceOp = reduce_op(op);
	o.timeout = g->timeout;
	return pg.allreduce(ts, o);
}

void all_reduce(mg_group g, at::Tensor &t, int op, int kind) {
	Timed timed(g, kind);
	finish(g, start_all_reduce(g, *g->pg, t, op));
}

// Every rank's x stacked in rank order (size × x's shape).
at::Tensor all_gather(mg_group g, const at::Tensor &x, int kind) {
	Timed timed(g, kind);
	auto xc = x.contiguous();
	auto sizes = xc.sizes().vec();
	sizes.insert(sizes.begin(), g->size);
	auto stacked = at::empty(sizes, xc.options());
	std::vector<std::vector<at::Tensor>> outputs(1);
	for (int r = 0; r < g->size; r++) {
		outputs[0].push_back(stacked[r]);
	}
	std::vector<at::Tensor> inputs{xc};
	c10d::AllgatherOptions o;
	o.timeout = g->timeout;
	finish(g, g->pg->allgather(outputs, inputs, o));
	return stacked;
}

// A backend of name for these processes on store.
c10::intrusive_ptr<mg::C10dBackend> make_backend(const std::string &name, const std::string &addr,
                                                 const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                                                 std::chrono::milliseconds timeout) {
	if (name == "gloo") {
#if MG_HAVE_GLOO
		auto o = c10d::ProcessGroupGloo::Options::create(timeout);
		o->devices.push_back(gloo_device(addr));
		o->threads = 2;
		return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, o);
#else
		TORCH_CHECK(false, "this shim was built without Gloo (no gloo headers; install libgloo-dev and rebuild)");
#endif
	}
	if (name == "nccl") {
#if MG_HAVE_NCCL
		auto o = c10d::ProcessGroupNCCL::Options::create();
		o->timeout = timeout;
		return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, o);
#else
		TORCH_CHECK(false, "this shim was built without NCCL (a CUDA libtorch and nccl.h are needed)");
#endif
	}
	TORCH_CHECK(false, "unknown backend \"", name, "\" (gloo or nccl)");
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
// (kernels/batch_norm.h), one collective each way. Forward, each rank takes
// the mean and the sum of squared deviations of its own rows, and one
// all-gather gives every rank every rank's (rows, means, sums of squares),
// which each combines in rank order, in double, into the global batch's
// mean and biased variance (Chan et al.'s pairwise update: the sum of
// squares about the global mean is Σ_r Q_r + n_r·(m_r − m)²), so that every
// rank normalises with the same statistics, and without the cancellation of
// a sum of squares about zero. Backward, the per-channel GW and GB are summed
// over ranks (one all-reduce of 2c values) and each rank backpropagates
// through the global statistics. The parameters' gradients stay this rank's
// (GW, GB before the sum): the job sums them with the other gradients.
struct BatchNormAcross : public torch::autograd::Function<BatchNormAcross> {
	static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w,
	                          const at::Tensor &b, at::Tensor running_mean, at::Tensor running_var, double momentum,
	                          double eps, int64_t group) {
		auto g = reinterpret_cast<mg_group>(group);
		auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
		const int64_t n = xc.size(0), c = xc.size(1);
		TORCH_CHECK(wc.numel() == c && bc.numel() == c, "batch_norm: ", c, " channels, weight ", wc.sizes());
		auto y = at::empty_like(xc), mean = at::empty({c}, xc.options()), invstd = at::empty({c}, xc.options());
		auto variance = at::empty({c}, xc.options());
		// This rank's rows, means and sums of squared deviations from them.
		const int64_t width = 2 * c + 1;
		auto local = at::empty({width}, xc.options().dtype(at::kDouble));
		double count = 0;
		AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "batch_norm_across", [&] {
			const int64_t grain = mg_batch_norm_grain(n);
			const scalar_t *X = xc.data_ptr<scalar_t>();
			auto *m = mean.data_ptr<scalar_t>(), *q = variance.data_ptr<scalar_t>(), *v = invstd.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_sums, scalar_t)(X, n, c, c0, c1, m);
			});
			for (int64_t j = 0; j < c; j++) m[j] = n > 0 ? m[j] / static_cast<scalar_t>(n) : 0;
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_squares, scalar_t)(X, m, n, c, c0, c1, q);
			});
			double *l = local.data_ptr<double>();
			l[0] = static_cast<double>(n);
			for (int64_t j = 0; j < c; j++) {
				l[1 + j] = m[j];
				l[1 + c + j] = q[j];
			}
			auto all = all_gather(g, local, MG_KIND_NORM_FORWARD);
			const double *A = all.data_ptr<double>();
			for (int r = 0; r < g->size; r++) count += A[r * width];
			TORCH_CHECK(count > 1, "batch_norm: expected more than 1 value per channel when training");
			for (int64_t j = 0; j < c; j++) {
				double mu = 0, squares = 0;
				for (int r = 0; r < g->size; r++) mu += A[r * width] * A[r * width + 1 + j];
				mu /= count;
				for (int r = 0; r < g->size; r++) {
					const double *row = A + r * width, d = row[1 + j] - mu;
					squares += row[1 + c + j] + row[0] * d * d;
				}
				m[j] = static_cast<scalar_t>(mu);
				q[j] = static_cast<scalar_t>(squares / count); // the biased variance, as the batch's
				v[j] = 1 / std::sqrt(q[j] + static_cast<scalar_t>(eps));
			}
			const scalar_t *W = wc.data_ptr<scalar_t>(), *B = bc.data_ptr<scalar_t>();
			scalar_t *Y = y.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_apply, scalar_t)(X, W, B, m, v, n, c, c0, c1, Y);
			});
		});
		{
			c10::NoGradGuard no_grad;
			running_mean.mul_(1 - momentum).add_(mean, momentum);
			running_var.mul_(1 - momentum).add_(variance * (count / (count - 1)), momentum);
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
				MG_CPU_LOOP(mg::batch_norm_backward_sums, scalar_t)(x.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(),
				                                                    mean.data_ptr<scalar_t>(), invstd.data_ptr<scalar_t>(),
				                                                    n, c, c0, c1, l, l + c);
			});
		});
		auto global = local.clone();
		all_reduce(g, global, MG_GROUP_SUM, MG_KIND_NORM_BACKWARD);
		AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_across_backward", [&] {
			auto *s = global.data_ptr<scalar_t>();
			at::parallel_for(0, c, grain, [&](int64_t c0, int64_t c1) {
				MG_CPU_LOOP(mg::batch_norm_backward_apply, scalar_t)(
				    x.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(),
				    invstd.data_ptr<scalar_t>(), s, s + c, n, c, c0, c1, static_cast<scalar_t>(count),
				    gx.data_ptr<scalar_t>());
			});
		});
		return {gx, local.narrow(0, 0, c), local.narrow(0, c, c), at::Tensor(), at::Tensor(), at::Tensor(),
		        at::Tensor(), at::Tensor()};
	}
};

} // namespace

// mg_grad_sum: see shim.h. The hooks run on the thread that runs the backward
// pass (the caller's, on the CPU), between begin and end.
struct mg_grad_sum_s {
	struct Bucket {
		std::vector<int> members; // indices into params
		at::Tensor flat;          // the members' gradients, one after the other
		int pending = 0;          // members whose gradient has not arrived this step
		c10::intrusive_ptr<c10d::Work> work;
	};

	mg_group g;
	c10::intrusive_ptr<mg::C10dBackend> pg; // a second group of the same processes
	std::vector<at::Tensor> params;
	std::vector<unsigned> hooks;
	std::vector<Bucket> buckets;
	std::vector<int> bucket_of;     // per parameter
	std::vector<int64_t> offset_of; // per parameter, in its bucket's flat tensor
	std::vector<char> arrived;      // per parameter, this step
	size_t next = 0;                // the first bucket not started this step
	bool armed = false;
	c10::intrusive_ptr<c10d::Work> values_work;

	// Buckets of the parameters in their order, each up to bucket_bytes (or
	// one parameter) of one dtype and device: the same every step, so that
	// every sum adds the same values in the same order whatever the run's
	// history (a resumed run's steps are the uninterrupted one's).
	void build(int64_t bucket_bytes) {
		int64_t bytes = 0;
		for (size_t i = 0; i < params.size(); i++) {
			const auto &p = params[i];
			const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
			bool fresh = buckets.empty();
			if (!fresh) {
				const auto &first = params[buckets.back().members[0]];
				fresh = bytes + size > bucket_bytes || first.scalar_type() != p.scalar_type() ||
				        first.device() != p.device();
			}
			if (fresh) {
				buckets.emplace_back();
				bytes = 0;
			}
			buckets.back().members.push_back(static_cast<int>(i));
			bytes += size;
		}
		for (size_t b = 0; b < buckets.size(); b++) {
			int64_t total = 0;
			for (int i : buckets[b].members) {
				bucket_of[i] = static_cast<int>(b);
				offset_of[i] = total;
				total += params[i].numel();
			}
			const auto &first = params[buckets[b].members[0]];
			buckets[b].flat = at::empty({total}, at::TensorOptions().dtype(first.scalar_type()).device(first.device()));
		}
	}

	at::Tensor slot(int i) {
		return buckets[bucket_of[i]].flat.narrow(0, offset_of[i], params[i].numel()).view(params[i].sizes());
	}

	void start(Bucket &b) {
		Timed timed(g, MG_KIND_GRADIENTS);
		b.work = start_all_reduce(g, *pg, b.flat, MG_GROUP_SUM);
	}

	// Starts the buckets that are whole, in order: every rank starts the
	// same all-reduces in the same order, whatever order its gradients
	// arrive in.
	void start_whole() {
		while (next < buckets.size() && buckets[next].pending == 0) start(buckets[next++]);
	}

	void arrive(int i, const at::Tensor &grad) {
		if (!armed) return;
		TORCH_CHECK(!arrived[i], "gradient sum: parameter ", i, " received two gradients in one step");
		TORCH_CHECK(grad.layout() == at::kStrided, "gradient sum: parameter ", i, " has a sparse gradient");
		{
			c10::NoGradGuard no_grad;
			slot(i).copy_(grad);
		}
		arrived[i] = 1;
		buckets[bucket_of[i]].pending--;
		start_whole();
	}

	void begin(at::Tensor values) {
		TORCH_CHECK(!armed, "gradient sum: begin twice without end");
		for (size_t i = 0; i < params.size(); i++) {
			TORCH_CHECK(!params[i].grad().defined(), "gradient sum: parameter ", i,
			            " already has a gradient: set the gradients to none before the backward pass");
		}
		for (auto &b : buckets) {
			b.pending = static_cast<int>(b.members.size());
			b.work.reset();
		}
		std::fill(arrived.begin(), arrived.end(), 0);
		next = 0;
		values_work.reset();
		if (values.defined()) {
			Timed timed(g, MG_KIND_LOSSES);
			values_work = start_all_reduce(g, *pg, values, MG_GROUP_SUM);
		}
		armed = true;
	}

	void end() {
		TORCH_CHECK(armed, "gradient sum: end without begin");
		armed = false;
		for (; next < buckets.size(); next++) {
			for (int i : buckets[next].members) {
				if (!arrived[i]) slot(i).zero_();
			}
			start(buckets[next]);
		}
		if (values_work) {
			Timed timed(g, MG_KIND_LOSSES, 0);
			finish(g, values_work);
		}
		for (auto &b : buckets) {
			Timed timed(g, MG_KIND_GRADIENTS, 0);
			finish(g, b.work);
		}
		c10::NoGradGuard no_grad;
		for (size_t i = 0; i < params.size(); i++) {
			if (arrived[i]) params[i].grad().copy_(slot(static_cast<int>(i)));
		}
	}
};

mg_error mg_group_new(const char *backend, const char *master_addr, int master_port, int rank, int size,
                      int64_t timeout_ms, mg_group *out) {
	MG_TRY({
		TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
		TORCH_CHECK(master_port > 0 && master_port < 65536, "master port ", master_port);
		TORCH_CHECK(timeout_ms > 0, "timeout ", timeout_ms, " ms");
		QuietRendezvous quiet;
		auto g = std::make_unique<mg_group_s>();
		g->backend = backend;
		g->addr = master_addr;
		g->timeout = std::chrono::milliseconds(timeout_ms);
		g->rank = rank;
		g->size = size;
		c10d::TCPStoreOptions so;
		so.port = static_cast<std::uint16_t>(master_port);
		so.isServer = rank == 0;
		so.numWorkers = static_cast<std::size_t>(size);
		so.waitWorkers = true;
		so.timeout = g->timeout;
		c10::intrusive_ptr<c10d::TCPStore> tcp;
		try {
			tcp = c10::make_intrusive<c10d::TCPStore>(g->addr, so);
		} catch (const c10::Error &e) {
			// A libtorch without libuv refuses its own default backend.
			if (std::string(e.what()).find("libuv") == std::string::npos) throw;
			mg::use_classic_tcpstore(so);
			tcp = c10::make_intrusive<c10d::TCPStore>(g->addr, so);
		}
		// One prefix per group, as torch.distributed names its default group.
		g->store = c10::make_intrusive<c10d::PrefixStore>("default_pg", tcp);
		g->pg = make_backend(g->backend, g->addr, g->store, rank, size, g->timeout);
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
	MG_TRY(*out = mg_wrap(all_gather(g, t->t, kind)))
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

mg_error mg_group_sinkhorn(mg_group g, mg_tensor q, double lambda, int iters, mg_tensor *motif, mg_tensor *balanced) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(q->t) && q->t.dim() == 2, "sinkhorn: the kernel takes a 2-d CPU tensor (AVX2 and FMA)");
		TORCH_CHECK(iters >= 0, "sinkhorn: ", iters, " rounds");
		auto qf = q->t.detach().to(at::kFloat).contiguous();
		const int64_t n = qf.size(0), k = qf.size(1);
		auto a = at::empty({k, n}, qf.options());
		auto m = at::empty({n}, qf.options().dtype(at::kLong));
		float *A = a.data_ptr<float>();
		std::vector<float> rows(k), col(n);
		mg::sinkhorn_exp(qf.data_ptr<float>(), n, k, static_cast<float>(lambda), A, rows.data());
		// The row sums, summed over ranks in double; the first all-reduce
		// also counts the global batch's rows (N).
		auto sums = at::empty({k + 1}, at::TensorOptions().dtype(at::kDouble));
		double *S = sums.data_ptr<double>();
		for (int64_t j = 0; j < k; j++) S[j] = rows[j];
		S[k] = static_cast<double>(n);
		all_reduce(g, sums, MG_GROUP_SUM, MG_KIND_SINKHORN);
		const int64_t total = static_cast<int64_t>(S[k]);
		if (iters == 0) {
			double sum = 0;
			for (int64_t j = 0; j < k; j++) sum += S[j];
			const float inv = static_cast<float>(1 / sum);
			for (int64_t i = 0; i < k * n; i++) A[i] *= inv;
		}
		auto round = sums.narrow(0, 0, k);
		for (int it = 0; it < iters; it++) {
			if (it > 0) {
				mg::sinkhorn_row_sums(A, n, k, rows.data());
				for (int64_t j = 0; j < k; j++) S[j] = rows[j];
				all_reduce(g, round, MG_GROUP_SUM, MG_KIND_SINKHORN);
			}
			for (int64_t j = 0; j < k; j++) rows[j] = static_cast<float>(S[j]);
			mg::sinkhorn_scale_rows(A, n, k, rows.data());
			mg::sinkhorn_scale_columns(A, n, k, total, col.data());
		}
		mg::sinkhorn_argmax(A, n, k, m.data_ptr<int64_t>());
		*motif = mg_wrap(m);
		*balanced = mg_wrap(a);
	})
}

void mg_group_profile(mg_group g, int64_t *calls, int64_t *nanoseconds) {
	for (int k = 0; k < MG_GROUP_KINDS; k++) {
		calls[k] = g->calls[k];
		nanoseconds[k] = g->nanoseconds[k];
	}
}

mg_error mg_grad_sum_new(mg_group g, const mg_tensor *params, int n, int64_t bucket_bytes, mg_grad_sum *out) {
	MG_TRY({
		TORCH_CHECK(n > 0, "gradient sum: no parameters");
		TORCH_CHECK(bucket_bytes > 0, "gradient sum: buckets of ", bucket_bytes, " bytes");
		auto s = std::make_unique<mg_grad_sum_s>();
		s->g = g;
		s->params = mg_unwrap_all(params, n);
		s->bucket_of.assign(n, 0);
		s->offset_of.assign(n, 0);
		s->arrived.assign(n, 0);
		s->build(bucket_bytes);
		{
			QuietRendezvous quiet;
			s->pg = make_backend(g->backend, g->addr, c10::make_intrusive<c10d::PrefixStore>("gradients", g->store),
			                     g->rank, g->size, g->timeout);
		}
		mg_grad_sum_s *raw = s.get();
		for (int i = 0; i < n; i++) {
			TORCH_CHECK(s->params[i].requires_grad(), "gradient sum: parameter ", i, " does not require a gradient");
			s->hooks.push_back(s->params[i].register_hook([raw, i](const at::Tensor &grad) { raw->arrive(i, grad); }));
		}
		*out = s.release();
	})
}

mg_error mg_grad_sum_begin(mg_grad_sum s, mg_tensor values) {
	MG_TRY(s->begin(values != nullptr ? values->t : at::Tensor()))
}

mg_error mg_grad_sum_end(mg_grad_sum s) { MG_TRY(s->end()) }

void mg_grad_sum_free(mg_grad_sum s) {
	for (size_t i = 0; i < s->hooks.size(); i++) s->params[i].remove_hook(s->hooks[i]);
	delete s;
}
