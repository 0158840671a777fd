// The differences between the libtorch versions the shim builds against
// (Debian 12's 1.13 through PyTorch 2.11), each under one name here, so that
// every other source of the shim is the same for all of them. Where a
// difference is a name that every version has (c10::NoGradGuard, which
// <ATen/ATen.h> stopped bringing in as c10::NoGradGuard), the sources use that
// name instead and nothing is needed here.
#pragma once

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>

// MG_TORCH_AT_LEAST(major, minor): the libtorch compiled against is
// major.minor or newer (3.x included).
#define MG_TORCH_AT_LEAST(major, minor)                                                                 \
	(TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace mg {

// CPUAllocator is c10::Allocator as every supported libtorch declares it: a
// subclass implements allocate_bytes (const: the allocator's state is behind
// its own lock). libtorch 2.3 made Allocator::allocate non-const and added the
// pure virtual copy_data (for Allocator::clone); plain memcpy is right for
// host memory, which is what default_copy_data does.
class CPUAllocator : public c10::Allocator {
public:
	// allocate_bytes returns n bytes, freed by the DataPtr's deleter.
	virtual c10::DataPtr allocate_bytes(std::size_t n) const = 0;

#if MG_TORCH_AT_LEAST(2, 3)
	c10::DataPtr allocate(std::size_t n) override { return allocate_bytes(n); }
	void copy_data(void *dest, const void *src, std::size_t count) const override {
		default_copy_data(dest, src, count);
	}
#else
	c10::DataPtr allocate(std::size_t n) const override { return allocate_bytes(n); }
#endif
};

} // namespace mg

// c10d's process groups: PyTorch 2 split ProcessGroup into a dispatching front
// and per-device Backends; the backends (ProcessGroupGloo, ProcessGroupNCCL)
// keep the collective methods of 1.13's ProcessGroup under the new base class.
// (Declared only: distributed.cpp includes c10d's headers.)
namespace c10d {
class Backend;
class ProcessGroup;
} // namespace c10d

namespace mg {
#if MG_TORCH_AT_LEAST(2, 0)
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

// use_classic_tcpstore sets c10d::TCPStoreOptions o to the store's classic
// backend, the only one before 2.2. Since 2.4 the options ask for the libuv
// backend by default, which a libtorch built without libuv (Debian's)
// refuses ("use_libuv was requested but PyTorch was build without libuv
// support"): distributed.cpp then asks again with this.
template <typename TCPStoreOptions>
void use_classic_tcpstore(TCPStoreOptions &o) {
#if MG_TORCH_AT_LEAST(2, 2)
	o.useLibUV = false;
#else
	(void)o;
#endif
}
} // namespace mg
