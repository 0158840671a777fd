// The process's memory settings for CPU tensors: a pool of large blocks that
// libtorch's CPU allocations reuse, and glibc's heap kept for the small ones.
//
// A training step allocates and frees the same few hundred tensors every
// step, the largest tens of megabytes (E×d edge tensors). glibc serves
// blocks over 32 MiB with mmap and returns them to the kernel when freed, so
// each step faulted every page of them back in, zeroed: on a virtual machine
// about 10 µs a page, a tenth of a step at the paper's sizes. The pool keeps
// freed blocks of at least kPoolMin bytes for reuse. The step's shapes vary
// with its molecules, so blocks are made in size classes (eight per power of
// two) and a request takes the smallest free block of its class or up to two
// classes above (at most about a third wasted). Nothing is returned to the system; the pool holds at most
// what the largest step held at once.
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <malloc.h>

#include <cstdlib>
#include <mutex>
#include <map>
#include <unordered_map>

#include "compat.h"
#include "internal.h"

namespace {

constexpr size_t kPoolMin = size_t(1) << 20;

// size_class rounds n ≥ kPoolMin up to 2^k·(1 + j/8), j = 0…7.
size_t size_class(size_t n) {
	size_t top = size_t(1) << (63 - __builtin_clzll(n)); // the power of two at or below n
	size_t step = top / 8;
	return (n + step - 1) / step * step;
}

class PooledCPUAllocator final : public mg::CPUAllocator {
public:
	explicit PooledCPUAllocator(c10::Allocator *small) : small_(small) {}

	c10::DataPtr allocate_bytes(size_t n) const override {
		if (n < kPoolMin) return small_->allocate(n);
		size_t cls = size_class(n);
		void *p = nullptr;
		std::unique_lock<std::mutex> lock(mu_);
		// The smallest free block that fits, if it is at most two classes up.
		auto it = free_.lower_bound(cls);
		if (it != free_.end() && it->first <= 2 * cls) {
			p = it->second;
			cls = it->first;
			free_.erase(it);
			stats_.reused++;
		} else {
			lock.unlock();
			TORCH_CHECK(posix_memalign(&p, c10::gAlignment, cls) == 0, "CPU memory pool: out of memory allocating ",
			            cls, " bytes");
			lock.lock();
			stats_.allocated++;
			stats_.pooled_bytes += cls;
		}
		size_of_[p] = cls;
		return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
	}

	c10::DeleterFnPtr raw_deleter() const override { return &release; }

	mg_pool_stats stats() const {
		std::lock_guard<std::mutex> lock(mu_);
		return stats_;
	}

	static PooledCPUAllocator *instance; // never destroyed: tensors may outlive main

private:
	static void release(void *p) {
		auto *self = instance;
		std::lock_guard<std::mutex> lock(self->mu_);
		auto it = self->size_of_.find(p);
		if (it == self->size_of_.end()) {
			// Not a pool block (cannot happen): a deleter must not throw, so
			// give it back to the system rather than abort the process.
			std::free(p);
			return;
		}
		self->free_.emplace(it->second, p);
		self->size_of_.erase(it);
	}

	c10::Allocator *small_;
	mutable std::mutex mu_;
	mutable std::multimap<size_t, void *> free_;           // by size
	mutable std::unordered_map<void *, size_t> size_of_;           // blocks in use
	mutable mg_pool_stats stats_{};
};

PooledCPUAllocator *PooledCPUAllocator::instance = nullptr;

} // namespace

int mg_tune_allocator(void) {
	static std::once_flag once;
	std::call_once(once, [] {
		PooledCPUAllocator::instance = new PooledCPUAllocator(c10::GetDefaultCPUAllocator());
		c10::SetCPUAllocator(PooledCPUAllocator::instance, /*priority=*/1);
	});
	if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
	    std::getenv("MALLOC_TOP_PAD_")) {
		return 0;
	}
	// Below the pool's blocks: keep freed memory in glibc's heap.
	mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	mallopt(M_TOP_PAD, 64 << 20);
	return 1;
}

mg_pool_stats mg_cpu_pool_stats(void) {
	if (PooledCPUAllocator::instance == nullptr) return mg_pool_stats{};
	return PooledCPUAllocator::instance->stats();
}
