// Where the fused kernels run (mg_fused_kernels, mg_fused_aggregation) and
// the checks their entry points share.
#include "kernels.h"

#include <cstdlib>

bool mg_avx2_fma() {
	static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	return has;
}

bool mg_avx512() {
	static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
	                        std::getenv("MICROGRAPH_NO_AVX512") == nullptr;
	return has;
}

bool mg_cpu_kernels(const at::Tensor &x) {
	return mg_avx2_fma() && x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
}

void mg_check_cpu(const char *op, std::initializer_list<at::Tensor> ts) {
	for (const auto &t : ts) {
		TORCH_CHECK(!t.defined() || t.device().is_cpu(), op, ": the CPU kernel got a tensor on ", t.device());
	}
}

int mg_fused_kernels(int device_type) { return device_type == 0 && mg_avx2_fma() ? 1 : 0; }

int mg_kernel_isa(void) {
	if (!mg_avx2_fma()) return 0;
	return mg_avx512() ? 512 : 256;
}

int mg_fused_aggregation(int device_type) {
	if (device_type == 0) return mg_fused_kernels(0);
#ifdef MG_WITH_CUDA
	return device_type == 1 ? 1 : 0;
#else
	return 0;
#endif
}
