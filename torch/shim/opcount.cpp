// Counting the operators libtorch dispatches: a RecordFunction callback on
// the counting thread, registered only while counting, so that it costs
// nothing otherwise.
#include <ATen/record_function.h>

#include <atomic>

#include "internal.h"

namespace {

// One count per process: the callback is a plain function pointer and cannot
// carry its own counter, so only one thread counts at a time.
std::atomic<int64_t> dispatched{0};
std::atomic<bool> counting{false};
thread_local at::CallbackHandle handle = 0;

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction &f) {
	// Only the dispatcher names an operator: the autograd engine's and
	// hand-written ranges of the same scope ("autograd::engine::
	// evaluate_function: …", "detach") wrap operators and do not count.
	if (f.operator_name().has_value()) dispatched.fetch_add(1, std::memory_order_relaxed);
	return nullptr;
}

} // namespace

mg_error mg_op_count_begin(void) {
	MG_TRY({
		bool idle = false;
		TORCH_CHECK(counting.compare_exchange_strong(idle, true), "operators are already being counted");
		dispatched.store(0, std::memory_order_relaxed);
		// Thread-local: operators other threads dispatch (data loaders) do not
		// count. Autograd carries this thread's callbacks into the threads it
		// runs backward on, so a backward pass counts wherever it runs.
		try {
			handle = at::addThreadLocalCallback(at::RecordFunctionCallback(count_op)
			                                        .needsInputs(false)
			                                        .scopes({at::RecordScope::FUNCTION}));
		} catch (...) {
			counting.store(false);
			throw;
		}
	})
}

mg_error mg_op_count_end(int64_t *ops) {
	MG_TRY({
		TORCH_CHECK(handle != 0, "this thread is not counting operators");
		at::removeCallback(handle);
		handle = 0;
		*ops = dispatched.load(std::memory_order_relaxed);
		counting.store(false);
	})
}
