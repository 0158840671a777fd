#!/bin/sh
# Finds libtorch and prints make variable assignments, one per line:
#   TORCH_MODE      libtorch | pip | debian | none
#   TORCH_VERSION   its version, from torch/version.h (e.g. 1.13.0, 2.6.0)
#   TORCH_INCLUDES  -I flags for the C++ shim (with NCCL's nccl.h, when a CUDA wheel has it)
#   TORCH_LIBDIR    directory holding libtorch*.so and libc10*.so
#   TORCH_ABI       value of _GLIBCXX_USE_CXX11_ABI the library was built with
#   TORCH_CUDA      1 when libtorch_cuda.so is present
#   CUDA_HOME       with TORCH_CUDA=1: the CUDA toolkit (include/, lib64/, bin/nvcc)
#                   the shim's CUDA parts are built with; empty when none is found
# Order: $LIBTORCH (a libtorch distribution), then the torch package of $PYTHON
# (pip wheels carry headers and libraries inside the package), then Debian's
# libtorch-dev. Pinned versions: Debian 12 libtorch-dev 1.13.1; PyTorch >= 2.0.
# Python runs isolated (-I) from /, so that no folder named torch (such as this
# repository's) can pass for PyTorch; see third_party/pymodules.py.
set -eu

# python CODE: runs CODE in $PYTHON (default python3) as described above.
python() {
	py=$(command -v "${PYTHON:-python3}") || return 1
	case "$py" in /*) ;; *) py="$PWD/$py" ;; esac
	(cd / && "$py" -I -c "$1")
}

emit() {
	# /usr/include is already searched; naming it again with -isystem breaks #include_next.
	if [ "$2" = /usr/include ]; then inc=""; else inc="-isystem $2 "; fi
	echo "TORCH_MODE=$1"
	echo "TORCH_VERSION=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
		"$2/torch/csrc/api/include/torch/version.h" 2>/dev/null | paste -sd.)"
	echo "TORCH_INCLUDES=$inc-isystem $2/torch/csrc/api/include${extra_includes:-}"
	echo "TORCH_LIBDIR=$3"
	echo "TORCH_ABI=$4"
	if [ -e "$3/libtorch_cuda.so" ]; then
		echo "TORCH_CUDA=1"
		echo "CUDA_HOME=$(cuda_home "$1")"
	else
		echo "TORCH_CUDA=0"
	fi
	exit 0
}

# The CUDA toolkit: $CUDA_HOME, else the one PyTorch's extension builder would
# use (pip mode), else the one whose nvcc is on PATH, else /usr/local/cuda.
cuda_home() {
	if [ -n "${CUDA_HOME:-}" ]; then echo "$CUDA_HOME"; return; fi
	if [ "$1" = pip ]; then
		h=$(python 'from torch.utils.cpp_extension import CUDA_HOME; print(CUDA_HOME or "")' 2>/dev/null || true)
		if [ -n "$h" ]; then echo "$h"; return; fi
	fi
	if nvcc=$(command -v nvcc); then dirname "$(dirname "$nvcc")"; return; fi
	if [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda; fi
}

# A distribution's ABI shows in its symbols: the C++11 ABI mangles std::string as __cxx11.
abi_of() {
	if nm -DC "$1/libc10.so" 2>/dev/null | grep -q '__cxx11'; then echo 1; else echo 0; fi
}

if [ -n "${LIBTORCH:-}" ]; then
	[ -d "$LIBTORCH/include/torch" ] || { echo "LIBTORCH=$LIBTORCH has no include/torch" >&2; exit 1; }
	emit libtorch "$LIBTORCH/include" "$LIBTORCH/lib" "$(abi_of "$LIBTORCH/lib")"
fi

pip=$(python 'import os, torch
d = os.path.dirname(torch.__file__ or "")
if os.path.isdir(os.path.join(d, "include", "torch")):
    print(d, int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || true)
# Debian's python3-torch (Debian 13's has include/ and lib/) is Debian's
# libtorch-dev under the package's folder: its libraries are links into
# /usr/lib/<multiarch>. Built against as Debian's, below (OpenMP and all).
if [ -n "$pip" ]; then
	set -- $pip
	case $(readlink -f "$1/lib/libtorch.so" 2>/dev/null) in /usr/lib/*-linux-gnu/*) pip="" ;; esac
fi
if [ -n "$pip" ]; then
	# CUDA wheels take NCCL from the nvidia-nccl package; its nccl.h lets the
	# shim build c10d's NCCL process group (torch/shim/distributed.cpp).
	nccl=$(python 'import os, nvidia.nccl
print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null || true)
	if [ -n "$nccl" ] && [ -e "$nccl/nccl.h" ]; then extra_includes=" -isystem $nccl"; fi
	emit pip "$1/include" "$1/lib" "$2"
fi

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
if [ -d /usr/include/torch/csrc/api/include ] && [ -e "/usr/lib/$multiarch/libtorch.so" ]; then
	emit debian /usr/include "/usr/lib/$multiarch" 1
fi

echo "TORCH_MODE=none"
