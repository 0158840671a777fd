// libtorch's own reader of torch.save files, used to check that the files the
// Go package writes are what libtorch expects.
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "internal.h"

mg_error mg_pickle_load(const void *bytes, size_t size, char ***names, mg_tensor **tensors, int *count) {
	MG_TRY({
		const char *b = static_cast<const char *>(bytes);
		auto value = torch::jit::pickle_load(std::vector<char>(b, b + size));
		TORCH_CHECK(value.isGenericDict(), "top object is ", value.tagKind(), ", not a dict");
		auto dict = value.toGenericDict();
		std::vector<std::string> keys;
		std::vector<at::Tensor> values;
		for (const auto &kv : dict) {
			TORCH_CHECK(kv.key().isString() && kv.value().isTensor(), "entry ", keys.size(),
			            " is not str -> tensor");
			keys.push_back(kv.key().toStringRef());
			values.push_back(kv.value().toTensor());
		}
		// Nothing below throws: allocate the C arrays only now.
		size_t n = keys.size();
		auto **ns = static_cast<char **>(std::calloc(n + 1, sizeof(char *)));
		auto *ts = static_cast<mg_tensor *>(std::calloc(n + 1, sizeof(mg_tensor)));
		for (size_t i = 0; i < n; i++) {
			ns[i] = mg_error_from(keys[i].c_str());
			ts[i] = mg_wrap(values[i]);
		}
		*count = static_cast<int>(n);
		*names = ns;
		*tensors = ts;
	})
}
