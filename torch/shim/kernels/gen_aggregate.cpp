// The autograd function of the fused GENConv aggregation (maths in
// gen_aggregate.h) and its entry point; the CPU loops are in
// gen_aggregate_cpu.cpp, the CUDA ones in gen_aggregate.cu.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#ifdef MG_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "gen_aggregate.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

#ifdef MG_WITH_CUDA
cudaStream_t stream_of(const at::Tensor &x) { return c10::cuda::getCurrentCUDAStream(x.device().index()).stream(); }

void check_launch(cudaError_t err) { TORCH_CHECK(err == cudaSuccess, "CUDA kernel launch: ", cudaGetErrorString(err)); }
#endif

// Whether GENAggregate has a kernel for x: the CPU loops (AVX2 and FMA) or,
// in a shim built with CUDA, the CUDA ones.
bool aggregation_kernel(const at::Tensor &x) {
	if (x.is_cuda()) {
#ifdef MG_WITH_CUDA
		return x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
#else
		return false;
#endif
	}
	return mg_cpu_kernels(x);
}

// The aggregation as an autograd function, with h added (x = h + out):
// forward keeps each node's Z and D, and h and the table (CPU) or the
// messages (CUDA); backward sums the
// edges' gradients into their source nodes and their bonds' table rows (in
// edge order on the CPU, with index_add on CUDA), then adds x's gradient to
// h's.
struct GENAggregate : public torch::autograd::Function<GENAggregate> {
	static at::Tensor forward(AutogradContext *ctx, const at::Tensor &h, const at::Tensor &table,
	                          const at::Tensor &bond, const at::Tensor &t, const at::Tensor &src,
	                          const at::Tensor &rowptr, bool learn_t) {
		TORCH_CHECK(aggregation_kernel(h), "gen_aggregate: no fused kernel for ", h.device(), " and ",
		            h.scalar_type());
		TORCH_CHECK(h.dim() == 2 && table.dim() == 2 && h.size(1) == table.size(1), "gen_aggregate: h is ",
		            h.sizes(), " and the bond table ", table.sizes());
		TORCH_CHECK(src.size(0) == bond.size(0) && rowptr.size(0) == h.size(0) + 1, "gen_aggregate: ", src.size(0),
		            " sources, ", bond.size(0), " bonds, ", rowptr.size(0), " offsets for ", h.size(0), " nodes");
		TORCH_CHECK(t.numel() == 1, "gen_aggregate: the temperature has ", t.numel(), " elements");
		TORCH_CHECK(table.device() == h.device() && bond.device() == h.device() && t.device() == h.device() &&
		                src.device() == h.device() && rowptr.device() == h.device(),
		            "gen_aggregate: the tensors are on different devices");
		auto hc = h.contiguous(), tabc = table.to(h.scalar_type()).contiguous(),
		     tc = t.to(h.scalar_type()).contiguous();
		auto bc = bond.contiguous(), sc = src.contiguous(), rc = rowptr.contiguous();
		const int64_t n = hc.size(0), d = hc.size(1), edges = sc.size(0);
		auto out = at::empty_like(hc), zmax = at::empty_like(hc), den = at::empty_like(hc);
		at::Tensor x, messages;
		if (hc.is_cuda()) {
			// Checking the offsets and indices would read them back to the
			// host; the batches were checked when they were built.
#ifdef MG_WITH_CUDA
			const c10::cuda::CUDAGuard guard(hc.device());
			messages = at::empty({edges, d}, hc.options());
			AT_DISPATCH_FLOATING_TYPES(hc.scalar_type(), "gen_aggregate_forward_cuda", [&] {
				check_launch(mg::gen_forward_cuda(hc.data_ptr<scalar_t>(), tabc.data_ptr<scalar_t>(),
				                                  bc.data_ptr<int64_t>(), sc.data_ptr<int64_t>(),
				                                  rc.data_ptr<int64_t>(), tc.data_ptr<scalar_t>(), n, d,
				                                  messages.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
				                                  zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(), stream_of(hc)));
			});
#endif
			x = hc + out;
		} else {
			const int64_t *R = rc.data_ptr<int64_t>(), *S = sc.data_ptr<int64_t>(), *B = bc.data_ptr<int64_t>();
			TORCH_CHECK(R[0] == 0 && R[n] == edges, "gen_aggregate: offsets do not cover the edges");
			for (int64_t i = 0; i < n; i++) {
				TORCH_CHECK(R[i] <= R[i + 1], "gen_aggregate: offsets decrease at node ", i);
			}
			for (int64_t k = 0; k < edges; k++) {
				TORCH_CHECK(S[k] >= 0 && S[k] < n, "gen_aggregate: source ", S[k], " of edge ", k, " out of range");
				TORCH_CHECK(B[k] >= 0 && B[k] < tabc.size(0), "gen_aggregate: bond row ", B[k], " of edge ", k,
				            " out of range");
			}
			x = at::empty_like(hc);
			AT_DISPATCH_FLOATING_TYPES(hc.scalar_type(), "gen_aggregate_forward", [&] {
				const scalar_t tv = tc.item<scalar_t>();
				at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
					MG_CPU_LOOP(mg::gen_forward, scalar_t)(hc.data_ptr<scalar_t>(), tabc.data_ptr<scalar_t>(), B, S, R, tv, d, begin, end,
					                out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
					                x.data_ptr<scalar_t>());
				});
			});
		}
		if (hc.is_cuda()) {
			ctx->save_for_backward({tc, sc, rc, bc, out, at::Tensor(), at::Tensor()});
			ctx->saved_data["messages"] = messages;
		} else {
			ctx->save_for_backward({tc, sc, rc, bc, out, hc, tabc});
		}
		ctx->saved_data["zmax"] = zmax;
		ctx->saved_data["den"] = den;
		ctx->saved_data["table_rows"] = tabc.size(0);
		ctx->saved_data["learn_t"] = learn_t;
		return x;
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &t = saved[0], &src = saved[1], &rowptr = saved[2], &bond = saved[3], &out = saved[4];
		auto zmax = ctx->saved_data["zmax"].toTensor(), den = ctx->saved_data["den"].toTensor();
		const int64_t rows = ctx->saved_data["table_rows"].toInt();
		const bool learn_t = ctx->saved_data["learn_t"].toBool();
		auto go = grads[0].contiguous();
		const int64_t n = out.size(0), d = out.size(1);
		at::Tensor grad_h, grad_table, grad_t_parts;
		if (out.is_cuda()) {
			auto grad_pre = at::empty({src.size(0), d}, out.options());
			auto messages = ctx->saved_data["messages"].toTensor();
			if (learn_t) grad_t_parts = at::empty_like(out);
#ifdef MG_WITH_CUDA
			const c10::cuda::CUDAGuard guard(out.device());
			AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "gen_aggregate_backward_cuda", [&] {
				check_launch(mg::gen_backward_cuda(
				    messages.data_ptr<scalar_t>(), rowptr.data_ptr<int64_t>(), t.data_ptr<scalar_t>(), learn_t, n,
				    d, out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
				    go.data_ptr<scalar_t>(), grad_pre.data_ptr<scalar_t>(),
				    learn_t ? grad_t_parts.data_ptr<scalar_t>() : nullptr, stream_of(out)));
			});
#endif
			// Into the source nodes and the table rows: index_add,
			// deterministic (sorted) when deterministic algorithms are on.
			grad_h = at::zeros_like(out).index_add_(0, src, grad_pre);
			grad_table = at::zeros({rows, d}, out.options()).index_add_(0, bond, grad_pre);
			grad_h.add_(go); // x = h + out
		} else {
			const auto &h = saved[5], &table = saved[6];
			grad_h = at::empty_like(out);
			grad_table = at::zeros({rows, d}, out.options());
			at::Tensor parts = learn_t ? at::empty_like(out) : at::Tensor();
			AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "gen_aggregate_backward", [&] {
				const scalar_t tv = t.item<scalar_t>();
				scalar_t *GTC = learn_t ? parts.data_ptr<scalar_t>() : nullptr;
				at::parallel_for(0, d, 32, [&](int64_t c0, int64_t c1) {
					std::vector<uint8_t> touched(n); // zeros
					MG_CPU_LOOP(mg::gen_backward, scalar_t)(
					    h.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), bond.data_ptr<int64_t>(),
					    src.data_ptr<int64_t>(), rowptr.data_ptr<int64_t>(), tv, learn_t, n, d, c0, c1,
					    out.data_ptr<scalar_t>(), zmax.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
					    go.data_ptr<scalar_t>(), grad_h.data_ptr<scalar_t>(), grad_table.data_ptr<scalar_t>(), GTC,
					    touched.data());
				});
				if (learn_t) {
					grad_t_parts = at::empty({n}, out.options());
					at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
						mg::gen_temperature_parts<scalar_t, mg::Isa::avx2>(GTC, d, begin, end,
						                                                  grad_t_parts.data_ptr<scalar_t>());
					});
				}
			});
		}
		at::Tensor grad_t;
		if (learn_t) grad_t = grad_t_parts.sum().reshape(t.sizes());
		return {grad_h, grad_table, at::Tensor(), grad_t, at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_fused_gen_aggregate(mg_tensor h, mg_tensor table, mg_tensor bond, mg_tensor t, mg_tensor src,
                                mg_tensor rowptr, int learn_t, mg_tensor *out) {
	MG_TRY(*out = mg_wrap(GENAggregate::apply(h->t, table->t, bond->t, t->t, src->t, rowptr->t, learn_t != 0)))
}
