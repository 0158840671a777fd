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

#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if MG_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if MG_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "internal.h"

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

void all_reduce(mg_group g, at::Tensor &t, int op) {
	TORCH_CHECK(t.is_contiguous(), "all-reduce needs a contiguous tensor");
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
	static at::Tensor forward(torch::autograd::AutogradContext *ctx, at::Tensor x, int64_t group) {
		ctx->saved_data["group"] = group;
		auto y = x.clone(at::MemoryFormat::Contiguous);
		all_reduce(reinterpret_cast<mg_group>(group), y, MG_GROUP_SUM);
		return y;
	}
	static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
	                                               torch::autograd::variable_list grads) {
		auto g = reinterpret_cast<mg_group>(ctx->saved_data["group"].toInt());
		auto dx = grads[0].clone(at::MemoryFormat::Contiguous);
		all_reduce(g, dx, MG_GROUP_SUM);
		return {dx, at::Tensor()};
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

mg_error mg_group_all_reduce(mg_group g, mg_tensor t, int op) { MG_TRY(all_reduce(g, t->t, op)) }

mg_error mg_group_broadcast(mg_group g, mg_tensor t, int root) {
	MG_TRY({
		TORCH_CHECK(root >= 0 && root < g->size, "root ", root, " of world size ", g->size);
		TORCH_CHECK(t->t.is_contiguous(), "broadcast needs a contiguous tensor");
		std::vector<at::Tensor> ts{t->t};
		c10d::BroadcastOptions o;
		o.rootRank = root;
		o.timeout = g->timeout;
		finish(g, g->pg->broadcast(ts, o));
	})
}

mg_error mg_group_all_gather(mg_group g, mg_tensor t, mg_tensor *out) {
	MG_TRY({
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

mg_error mg_group_barrier(mg_group g) {
	MG_TRY({
		c10d::BarrierOptions o;
		o.timeout = g->timeout;
		finish(g, g->pg->barrier(o));
	})
}

mg_error mg_group_all_reduce_sum_autograd(mg_group g, mg_tensor t, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(AllReduceSum::apply(t->t, reinterpret_cast<int64_t>(g))))
}
