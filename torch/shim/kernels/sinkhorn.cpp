// The fused Sinkhorn-Knopp assignment's entry point (maths in sinkhorn.h); the
// CPU loops are in sinkhorn_cpu.cpp. No autograd: the assignment is a target.
#include "sinkhorn.h"
#include "kernels.h"

mg_error mg_fused_sinkhorn(mg_tensor q, double lambda, int iters, mg_tensor *motif, mg_tensor *balanced) {
	MG_TRY({
		TORCH_CHECK(mg_cpu_kernels(q->t) && q->t.dim() == 2, "sinkhorn: the kernel takes a 2-d CPU tensor (AVX2 and FMA)");
		auto qf = q->t.detach().to(at::kFloat).contiguous();
		const int64_t n = qf.size(0), k = qf.size(1);
		auto a = at::empty({k, n}, qf.options());
		auto m = at::empty({n}, qf.options().dtype(at::kLong));
		mg::sinkhorn(qf.data_ptr<float>(), n, k, static_cast<float>(lambda), iters, a.data_ptr<float>(),
		             m.data_ptr<int64_t>());
		*motif = mg_wrap(m);
		*balanced = mg_wrap(a);
	})
}
