// libtorch's reader of torch.save files (testing.h), for the tests of package
// torch: the files Save writes must load with torch::pickle_load too.
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "testing.h"

namespace {

char *copy_string(const char *s) {
	auto *out = static_cast<char *>(std::malloc(std::strlen(s) + 1));
	std::strcpy(out, s);
	return out;
}

} // namespace

char *mgt_pickle_load(const void *bytes, size_t size, mgt_entry **entries, int *count) {
	try {
		const char *b = static_cast<const char *>(bytes);
		auto value = torch::jit::pickle_load(std::vector<char>(b, b + size));
		TORCH_CHECK(value.isGenericDict(), "top object is ", value.tagKind(), ", not a dict");
		std::vector<std::string> names;
		std::vector<at::Tensor> tensors;
		for (const auto &kv : value.toGenericDict()) {
			TORCH_CHECK(kv.key().isString() && kv.value().isTensor(), "entry ", names.size(), " is not str -> tensor");
			names.push_back(kv.key().toStringRef());
			tensors.push_back(kv.value().toTensor().contiguous());
		}
		// Nothing below throws: allocate the C arrays only now.
		const size_t n = names.size();
		auto *out = static_cast<mgt_entry *>(std::calloc(n + 1, sizeof(mgt_entry)));
		for (size_t i = 0; i < n; i++) {
			const auto &t = tensors[i];
			mgt_entry &e = out[i];
			e.name = copy_string(names[i].c_str());
			e.scalar_type = static_cast<int>(t.scalar_type());
			e.ndim = static_cast<int>(t.dim());
			e.shape = static_cast<int64_t *>(std::calloc(t.dim() + 1, sizeof(int64_t)));
			for (int64_t d = 0; d < t.dim(); d++) e.shape[d] = t.size(d);
			e.nbytes = static_cast<int64_t>(t.numel() * t.element_size());
			e.data = std::malloc(e.nbytes + 1);
			if (e.nbytes > 0) std::memcpy(e.data, t.data_ptr(), e.nbytes);
		}
		*entries = out;
		*count = static_cast<int>(n);
		return nullptr;
	} catch (const c10::Error &e) {
		return copy_string(e.what_without_backtrace());
	} catch (const std::exception &e) {
		return copy_string(e.what());
	}
}

void mgt_free_entries(mgt_entry *entries, int count) {
	for (int i = 0; i < count; i++) {
		std::free(entries[i].name);
		std::free(entries[i].shape);
		std::free(entries[i].data);
	}
	std::free(entries);
}
