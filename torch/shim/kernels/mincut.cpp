// The autograd function of the fused MinCut regulariser (maths in mincut.h)
// and its entry point; the CPU loops are in mincut_cpu.cpp.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "mincut.h"
#include "kernels.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The regulariser as an autograd function of q, with two outputs.
struct MinCut : public torch::autograd::Function<MinCut> {
	static variable_list forward(AutogradContext *ctx, const at::Tensor &q, const at::Tensor &rowptr,
	                             const at::Tensor &src, const at::Tensor &graphptr, const at::Tensor &selected) {
		auto qc = q.contiguous(), rc = rowptr.contiguous(), sc = src.contiguous(), gc = graphptr.contiguous();
		const int64_t b = gc.size(0) - 1, k = qc.size(1), n = qc.size(0);
		TORCH_CHECK(rc.size(0) == n + 1 && gc[0].item<int64_t>() == 0 && gc[b].item<int64_t>() == n,
		            "mincut: offsets do not match ", n, " nodes");
		auto sel = selected.numel() > 0 ? selected.to(qc.scalar_type()).contiguous() : selected;
		TORCH_CHECK(sel.numel() == 0 || sel.numel() == b * k, "mincut: selected must be ", b, "×", k);
		auto opts = qc.options();
		auto cut = at::empty({b}, opts), ortho = at::empty({b}, opts), num = at::empty({b}, opts);
		auto den = at::empty({b}, opts), gram = at::empty({b, k, k}, opts), fro = at::empty({b}, opts);
		AT_DISPATCH_FLOATING_TYPES(qc.scalar_type(), "mincut", [&] {
			const scalar_t *S = sel.numel() > 0 ? sel.data_ptr<scalar_t>() : nullptr;
			at::parallel_for(0, b, 16, [&](int64_t begin, int64_t end) {
				mg::mincut_forward(qc.data_ptr<scalar_t>(), rc.data_ptr<int64_t>(), sc.data_ptr<int64_t>(),
				                   gc.data_ptr<int64_t>(), S, k, begin, end, cut.data_ptr<scalar_t>(),
				                   ortho.data_ptr<scalar_t>(), num.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(),
				                   gram.data_ptr<scalar_t>(), fro.data_ptr<scalar_t>());
			});
		});
		ctx->save_for_backward({qc, rc, sc, gc, sel});
		// ortho is also an output: kept here as an alias without autograd
		// history, since holding the output itself would form a cycle
		// (output → its grad_fn → this context → output) and leak the graph.
		ctx->saved_data["ortho"] = ortho.detach();
		ctx->saved_data["num"] = num;
		ctx->saved_data["den"] = den;
		ctx->saved_data["gram"] = gram;
		ctx->saved_data["fro"] = fro;
		return {cut, ortho};
	}

	static variable_list backward(AutogradContext *ctx, variable_list grads) {
		auto saved = ctx->get_saved_variables();
		const auto &q = saved[0], &rowptr = saved[1], &src = saved[2], &graphptr = saved[3], &sel = saved[4];
		const int64_t b = graphptr.size(0) - 1, k = q.size(1);
		auto gc = grads[0].defined() ? grads[0].contiguous() : at::zeros({b}, q.options());
		auto go = grads[1].defined() ? grads[1].contiguous() : at::zeros({b}, q.options());
		auto gq = at::zeros_like(q);
		auto ortho = ctx->saved_data["ortho"].toTensor(), num = ctx->saved_data["num"].toTensor();
		auto den = ctx->saved_data["den"].toTensor(), gram = ctx->saved_data["gram"].toTensor();
		auto fro = ctx->saved_data["fro"].toTensor();
		AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "mincut_backward", [&] {
			const scalar_t *S = sel.numel() > 0 ? sel.data_ptr<scalar_t>() : nullptr;
			at::parallel_for(0, b, 16, [&](int64_t begin, int64_t end) {
				std::vector<scalar_t> scratch(k * k);
				mg::mincut_backward(q.data_ptr<scalar_t>(), rowptr.data_ptr<int64_t>(), src.data_ptr<int64_t>(),
				                    graphptr.data_ptr<int64_t>(), S, k, begin, end, ortho.data_ptr<scalar_t>(),
				                    num.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(), gram.data_ptr<scalar_t>(),
				                    fro.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(), go.data_ptr<scalar_t>(),
				                    gq.data_ptr<scalar_t>(), scratch.data());
			});
		});
		return {gq, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
	}
};

} // namespace

mg_error mg_fused_mincut(mg_tensor q, mg_tensor rowptr, mg_tensor src, mg_tensor graphptr, mg_tensor selected,
                         mg_tensor *cut, mg_tensor *ortho) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(q->t), "mincut: the kernel runs on CPUs with AVX2 and FMA");
		mg_check_cpu("mincut", {rowptr->t, src->t, graphptr->t, selected != nullptr ? selected->t : at::Tensor()});
		auto sel = selected != nullptr ? selected->t : at::empty({0}, q->t.options());
		auto out = MinCut::apply(q->t, rowptr->t, src->t, graphptr->t, sel);
		*cut = mg_wrap(out[0]);
		*ortho = mg_wrap(out[1]);
	})
}
