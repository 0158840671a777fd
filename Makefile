# micrograph: `make run` and `make test` do everything on a fresh Debian 12 machine.
#
#   make            build the shims and bin/micrograph
#   make shim       build only the libtorch shim, and its test-only reader library
#                   (g++ and libtorch; no Go needed)
#   make chem       build only the RDKit shim (g++ and RDKit)
#   make deps       install what is missing (Debian packages)
#   make test       deps, build, then every test
#   make run        deps, build, then the main job on the embedded dataset
#   make torch2-check compile (not link, not run) every shim source against a
#                   libtorch 2.x (Debian 13's 2.6 headers, fetched, not installed;
#                   third_party/libtorch2.sh); make test runs it
#   make cuda-check compile (not link, not run) the CUDA build's sources without
#                   a GPU; installs Debian's CUDA toolkit first (third_party/cuda-toolkit.sh)
#   make gpu-check  prepare .gpu/, what scripts/gpu-check.sh needs on a GPU machine
#                   without Go or RDKit (scripts/gpu-prepare.sh; docs/testing.md)
#   make debian13-test  make test in a Debian 13 root (debootstrap), against its
#                   libtorch 2.6 and python3-torch 2.6 (scripts/debian13-test.sh)
#   make image-test build the Docker image on a Debian base with buildah and run
#                   the program in it (DEBIAN=12 or 13; scripts/image-test.sh)
#
# libtorch is found by third_party/libtorch.sh: LIBTORCH=DIR, else the torch
# package of $(PYTHON), else Debian's libtorch-dev (installed by `make deps`).

SHELL := /bin/bash
PYTHON ?= python3
GO ?= go
CXX ?= g++
BUILD := build
LIB := $(BUILD)/lib

# libtorch.sh runs once per make, when a recipe first asks (so that `make deps`
# can install libtorch first, and PyTorch is imported once, not per variable).
torch_env = $(eval torch_env := $$(shell LIBTORCH='$(LIBTORCH)' PYTHON='$(PYTHON)' sh third_party/libtorch.sh | tr '\n' ';'))$(torch_env)
torch_var = $(shell printf '%s' '$(torch_env)' | tr ';' '\n' | sed -n 's/^$(1)=//p')

CXXFLAGS := -std=c++17 -O2 -fPIC -Wall -Wextra -Wno-unused-parameter
SHIM_SRC := $(wildcard torch/shim/*.cpp torch/shim/kernels/*.cpp)
SHIM_HDR := $(wildcard torch/shim/*.h torch/shim/kernels/*.h)
CUDA_SRC := $(wildcard torch/shim/kernels/*.cu)
SHIM := $(LIB)/libmgtorch.so
SHIM_TESTING := $(LIB)/libmgtorch_testing.so
# The shims' translation units compile side by side, one per core: `make`,
# `make test` and `make run` pass -j$(JOBS) to the make that builds them.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)

.PHONY: all build shim chem deps test run clean cuda-check cuda-check-objects torch2-check torch2-check-objects \
	debian13-test image-test gpu-check gpu-check-dry-run

all: build

shim: $(SHIM) $(SHIM_TESTING)

# The object files are compiled one per TU so that `make -j` and small edits stay cheap.
# Against a CUDA libtorch they are built with MG_WITH_CUDA and the toolkit's
# headers (not named when they are /usr/include: -isystem would break #include_next).
define compile_against_torch
	@mkdir -p $(@D)
	@mode='$(call torch_var,TORCH_MODE)'; if [ "$$mode" = none ]; then \
		echo "libtorch not found: run 'make deps', or set LIBTORCH=DIR or PYTHON=python-with-torch" >&2; exit 1; fi
	cuda=""; if [ '$(call torch_var,TORCH_CUDA)' = 1 ]; then cuda=-DMG_WITH_CUDA; home='$(call torch_var,CUDA_HOME)'; \
		[ "$$home" = /usr ] || cuda="$$cuda -isystem $$home/include"; fi; \
	$(CXX) $(CXXFLAGS) $(call omp_flag) -D_GLIBCXX_USE_CXX11_ABI=$(call torch_var,TORCH_ABI) $(call torch_var,TORCH_INCLUDES) $$cuda \
		-c $< -o $@
endef
$(BUILD)/shim/%.o: torch/shim/%.cpp $(SHIM_HDR) third_party/libtorch.sh Makefile
	$(compile_against_torch)

# at::parallel_for, which the fused kernels' entry points split their loops
# with (aggregation, dropout, embedding-bag sums), is an inline template that
# runs its loop on one thread unless the code that calls it is compiled with
# OpenMP. Debian's libtorch runs its own ops on GCC's OpenMP (libgomp), so
# against it the shim is compiled and linked with -fopenmp: one runtime, one
# pool of threads, bounded by --threads. A PyTorch wheel brings its own copy
# of the runtime, a second one in the process: there the kernels stay on one
# thread. The CPU loops (*_cpu.cpp) hold no parallel regions and are compiled
# as before.
omp_flag = $(if $(filter debian,$(call torch_var,TORCH_MODE)),-fopenmp)

# The fused kernels' CPU loops (torch/shim/kernels/*_cpu.cpp) vectorise for
# AVX2+FMA (floating-point selects need -fno-trapping-math, square roots
# -fno-math-errno: the loops never read errno; reductions say where they may
# be reordered, with `omp simd` pragmas); the shim offers them only on CPUs
# that have both (mg_fused_kernels).
KERNEL_FLAGS := -O3 -mavx2 -mfma -fno-trapping-math -fno-math-errno -fopenmp-simd
$(BUILD)/shim/kernels/%_cpu.o: CXXFLAGS += $(KERNEL_FLAGS)
$(BUILD)/shim/kernels/%_cpu.o: omp_flag =

# The lane-wise loops (kernels/isa.h) are compiled a second time for AVX-512,
# which the shim runs where the CPU has it (mg_avx512): the same bits, loops
# twice as wide. Each such object may define only the AVX-512 instantiations
# of its loops (checked when the shim links): a function compiled for AVX-512
# that the AVX2 build could also call would stop an AVX2-only CPU.
AVX512_KERNELS := adam batch_norm dropout embedding_bag_sum gen_aggregate group_mean linear_residual
AVX512_FLAGS := $(KERNEL_FLAGS) -mavx512f -mavx512vl -mavx512bw -mavx512dq -mprefer-vector-width=512 \
	-DMG_ISA=mg::Isa::avx512
AVX512_OBJ := $(patsubst %,$(BUILD)/shim/kernels/%_cpu_avx512.o,$(AVX512_KERNELS))
$(BUILD)/shim/kernels/%_cpu_avx512.o: CXXFLAGS += $(AVX512_FLAGS)
$(BUILD)/shim/kernels/%_cpu_avx512.o: omp_flag =
$(BUILD)/shim/kernels/%_cpu_avx512.o: torch/shim/kernels/%_cpu.cpp $(SHIM_HDR) third_party/libtorch.sh Makefile
	$(compile_against_torch)
# Every global symbol of the AVX-512 objects: an instantiation with (mg::Isa)1.
check_avx512_symbols = leaked=$$(nm -C --defined-only -g $(AVX512_OBJ) | grep -E '^[0-9a-f]+ [A-Z] ' | grep -v '(mg::Isa)1>' || true); \
	if [ -n "$$leaked" ]; then echo "AVX-512 objects define functions the AVX2 build could call:" >&2; echo "$$leaked" >&2; exit 1; fi

# The CUDA kernels, for A100 (sm_80) and H100/H200 (sm_90), plus PTX that newer
# GPUs compile at load time. Only built against a CUDA libtorch.
CUDA_ARCH_FLAGS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
CUDA_OBJ := $(patsubst torch/shim/%.cu,$(BUILD)/shim/%.cu.o,$(CUDA_SRC))
$(BUILD)/shim/%.cu.o: torch/shim/%.cu $(SHIM_HDR)
	@mkdir -p $(@D)
	@home='$(call torch_var,CUDA_HOME)'; if [ ! -x "$$home/bin/nvcc" ]; then \
		echo "libtorch has CUDA but no CUDA toolkit was found (nvcc): set CUDA_HOME=DIR" >&2; exit 1; fi
	'$(call torch_var,CUDA_HOME)/bin/nvcc' -std=c++17 -O3 -Xcompiler -fPIC $(CUDA_ARCH_FLAGS) -c $< -o $@

# --no-as-needed keeps libtorch_cuda linked although no symbol of it is named;
# without it CUDA reports itself unavailable. The CUDA kernels join only a
# CUDA build, so CPU machines need no toolkit.
$(SHIM): $(patsubst torch/shim/%.cpp,$(BUILD)/shim/%.o,$(SHIM_SRC)) $(AVX512_OBJ) $(CUDA_SRC)
	@mkdir -p $(@D)
	@$(check_avx512_symbols)
	libdir='$(call torch_var,TORCH_LIBDIR)'; cuda='$(call torch_var,TORCH_CUDA)'; cu=""; \
	if [ "$$cuda" = 1 ]; then \
		$(MAKE) --no-print-directory $(CUDA_OBJ) || exit 1; \
		home='$(call torch_var,CUDA_HOME)'; cu="$(CUDA_OBJ) -L$$home/lib64 -Wl,-rpath,$$home/lib64 -lcudart"; \
	fi; \
	$(CXX) -shared $(call omp_flag) -o $@ $(filter %.o,$^) $$cu -L$$libdir -Wl,-rpath,$$libdir \
		-Wl,--no-as-needed -ltorch $$([ "$$cuda" = 1 ] && echo -ltorch_cuda -lc10_cuda) -ltorch_cpu -lc10 -Wl,--as-needed

# libmgtorch_testing.so: libtorch's own code for the binding's tests
# (torch/internal/libtorchtest): its reader of torch.save files, with which
# the tests of package torch check Save's files, and its oneDNN switch. The
# program never links it.
TESTING_DIR := torch/internal/libtorchtest/shim
$(BUILD)/testing/%.o: $(TESTING_DIR)/%.cpp $(TESTING_DIR)/testing.h third_party/libtorch.sh
	$(compile_against_torch)

$(SHIM_TESTING): $(patsubst $(TESTING_DIR)/%.cpp,$(BUILD)/testing/%.o,$(wildcard $(TESTING_DIR)/*.cpp))
	@mkdir -p $(@D)
	libdir='$(call torch_var,TORCH_LIBDIR)'; \
	$(CXX) -shared -o $@ $^ -L$$libdir -Wl,-rpath,$$libdir -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed

# ---- RDKit shim (data/rdkit) ----
# libmgchem.so: featurisation, scaffolds and depictions through RDKit's C++
# library. The Go package data/rdkit dlopens it at first use, so the binary
# still starts on machines without RDKit. RDKit is found by third_party/rdkit.sh:
# RDKIT=PREFIX, else Debian's librdkit-dev (installed by `make deps`).
rdkit_var = $(shell RDKIT='$(RDKIT)' sh third_party/rdkit.sh | sed -n 's/^$(1)=//p')

CHEM_SRC := $(wildcard data/rdkit/shim/*.cpp)
CHEM_HDR := $(wildcard data/rdkit/shim/*.h)
CHEM := $(LIB)/libmgchem.so

chem: $(CHEM)

$(BUILD)/chem/%.o: data/rdkit/shim/%.cpp $(CHEM_HDR) third_party/rdkit.sh
	@mkdir -p $(@D)
	@mode='$(call rdkit_var,RDKIT_MODE)'; if [ "$$mode" = none ]; then \
		echo "RDKit not found: run 'make deps', or set RDKIT=PREFIX" >&2; exit 1; fi
	$(CXX) $(CXXFLAGS) $(call rdkit_var,RDKIT_INCLUDES) -c $< -o $@

$(CHEM): $(patsubst data/rdkit/shim/%.cpp,$(BUILD)/chem/%.o,$(CHEM_SRC))
	@mkdir -p $(@D)
	libdir='$(call rdkit_var,RDKIT_LIBDIR)'; \
	$(CXX) -shared -o $@ $^ -L$$libdir -Wl,-rpath,$$libdir $(call rdkit_var,RDKIT_LIBS)
# ---- end of RDKit shim ----

# ---- make cuda-check: the CUDA build's sources, compiled without a GPU ----
# A CPU machine never compiles what only a CUDA build compiles (the .cu files,
# the MG_WITH_CUDA branches of the shim), so this does, as a check: every CUDA
# source with nvcc, and every shim C++ file with MG_WITH_CUDA, against the
# libtorch libtorch.sh finds (Debian's CPU libtorch-dev ships ATen/cuda and
# c10/cuda headers). Object files only, into build/cuda-check: nothing is
# linked or run. Warnings are errors in our code; system headers' are not shown.
# NCCL's branch (distributed.cpp) is compiled only where nccl.h exists, which
# Debian 12 does not package.
CUDA_CHECK := $(BUILD)/cuda-check
NVCC ?= nvcc
# nvcc 11.8 (Debian 12's) accepts g++ up to 11; Debian 12's g++ is 12.
NVCC_CCBIN ?= g++-11
CUDA_CHECK_OBJ := $(patsubst torch/shim/%.cu,$(CUDA_CHECK)/%.cu.o,$(CUDA_SRC)) \
	$(patsubst torch/shim/%.cpp,$(CUDA_CHECK)/%.o,$(SHIM_SRC)) \
	$(patsubst %,$(CUDA_CHECK)/kernels/%_cpu_avx512.o,$(AVX512_KERNELS))
# The same C++ sources with MG_WITH_CUDA against libtorch 2.x's CUDA headers
# (third_party/libtorch2.sh; the .cu files include no libtorch header).
CUDA_CHECK_TORCH2_OBJ := $(patsubst torch/shim/%.cpp,$(CUDA_CHECK)/torch2/%.o,$(SHIM_SRC))
# The one generated header of c10/cuda that a CPU libtorch lacks (CMake writes
# it from cuda_cmake_macros.h.in when it builds c10_cuda as a shared library).
CUDA_CHECK_MACROS := $(CUDA_CHECK)/include/c10/cuda/impl/cuda_cmake_macros.h

# Short of linking (no CUDA libtorch here), the objects are checked to define
# every function of ours (mg::, mg_) that one of them calls: a CUDA function
# declared and called but never instantiated for a type shows here. (A
# template's demangled name starts with its return type, hence the pattern.)
cuda-check: deps
	sh third_party/cuda-toolkit.sh
	@$(MAKE) --no-print-directory -j$(JOBS) cuda-check-objects
	@missing=$$(comm -23 <(nm -C $(CUDA_CHECK_OBJ) | sed -n 's/^ *U //p' | grep -E '(^| )mg(::|_)' | sort -u) \
		<(nm -C $(CUDA_CHECK_OBJ) | sed -n 's/^[0-9a-f]* [TWVRDB] //p' | sort -u)); \
	if [ -n "$$missing" ]; then echo "cuda-check: called but defined by no object:" >&2; echo "$$missing" >&2; exit 1; fi
	@echo "cuda-check: compiled $(words $(CUDA_CHECK_OBJ)) files into $(CUDA_CHECK), and $(words $(CUDA_CHECK_TORCH2_OBJ)) against libtorch $(call torch2_var,TORCH2_VERSION)'s CUDA headers into $(CUDA_CHECK)/torch2 (nothing linked or run)"

cuda-check-objects: $(CUDA_CHECK_OBJ) $(CUDA_CHECK_TORCH2_OBJ)

$(CUDA_CHECK_MACROS):
	@mkdir -p $(@D)
	printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' >$@

$(CUDA_CHECK)/%.cu.o: torch/shim/%.cu $(SHIM_HDR)
	@mkdir -p $(@D)
	$(NVCC) -ccbin $(NVCC_CCBIN) -std=c++17 -O3 $(CUDA_ARCH_FLAGS) -Werror all-warnings \
		-Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter,-Werror -c $< -o $@

# The same flags as `make shim`, plus MG_WITH_CUDA, -Werror and the folder of
# the generated header (searched after libtorch's own, which may have it).
$(CUDA_CHECK)/kernels/%_cpu.o: CXXFLAGS += $(KERNEL_FLAGS)
$(CUDA_CHECK)/%.o: torch/shim/%.cpp $(SHIM_HDR) third_party/libtorch.sh | $(CUDA_CHECK_MACROS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -Werror -DMG_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=$(call torch_var,TORCH_ABI) \
		$(call torch_var,TORCH_INCLUDES) -isystem $(CUDA_CHECK)/include -c $< -o $@
$(CUDA_CHECK)/torch2/kernels/%_cpu.o: CXXFLAGS += $(KERNEL_FLAGS)
$(CUDA_CHECK)/torch2/%.o: torch/shim/%.cpp $(SHIM_HDR) third_party/libtorch2.sh
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -Werror -DMG_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=1 \
		$(call torch2_includes,$(call torch2_var,TORCH2_CUDA)) -c $< -o $@
$(CUDA_CHECK)/kernels/%_cpu_avx512.o: CXXFLAGS += $(AVX512_FLAGS)
$(CUDA_CHECK)/kernels/%_cpu_avx512.o: torch/shim/kernels/%_cpu.cpp $(SHIM_HDR) third_party/libtorch.sh | $(CUDA_CHECK_MACROS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -Werror -DMG_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=$(call torch_var,TORCH_ABI) \
		$(call torch_var,TORCH_INCLUDES) -isystem $(CUDA_CHECK)/include -c $< -o $@
# ---- end of cuda-check ----

# ---- make torch2-check: the shim against a libtorch 2.x, on any machine ----
# Every machine this is developed on has Debian 12's libtorch 1.13, while GPU
# machines and the CUDA image have PyTorch 2.x, whose C++ API differs in
# places (torch/shim/compat.h). So `make test` also compiles every C++ source
# of the shim, its kernels (both vector widths) and the test-only reader
# library against Debian 13's libtorch 2.6 headers, which
# third_party/libtorch2.sh fetches (installing nothing): objects into
# build/torch2-check with the flags `make shim` uses and -Werror, nothing
# linked or run. `make cuda-check` compiles the CUDA build's sources against
# the same version's CUDA headers.
torch2_env = $(eval torch2_env := $$(shell sh third_party/libtorch2.sh | tr '\n' ';'))$(torch2_env)
torch2_var = $(shell printf '%s' '$(torch2_env)' | tr ';' '\n' | sed -n 's/^$(1)=//p')
torch2_includes = -isystem $(1)/torch/csrc/api/include -isystem $(1)
TORCH2_CHECK := $(BUILD)/torch2-check
TORCH2_CHECK_OBJ := $(patsubst torch/shim/%.cpp,$(TORCH2_CHECK)/%.o,$(SHIM_SRC)) \
	$(patsubst %,$(TORCH2_CHECK)/kernels/%_cpu_avx512.o,$(AVX512_KERNELS)) \
	$(patsubst $(TESTING_DIR)/%.cpp,$(TORCH2_CHECK)/testing/%.o,$(wildcard $(TESTING_DIR)/*.cpp))

# Where the build's own libtorch is 2.x already, the build was that check.
torch2-check:
	@v='$(call torch_var,TORCH_VERSION)'; if [ "$${v%%.*}" -ge 2 ] 2>/dev/null; then \
		echo "torch2-check: the build's own libtorch is $$v: nothing more to compile"; else \
		$(MAKE) --no-print-directory -j$(JOBS) torch2-check-objects; fi

torch2-check-objects: $(TORCH2_CHECK_OBJ)
	@echo "torch2-check: compiled $(words $(TORCH2_CHECK_OBJ)) files against libtorch $(call torch2_var,TORCH2_VERSION) into $(TORCH2_CHECK) (nothing linked or run)"

# The flags of `make shim` against Debian's libtorch (OpenMP but in the CPU
# loops), plus -Werror.
torch2_omp = -fopenmp
define compile_against_torch2
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -Werror $(torch2_omp) -D_GLIBCXX_USE_CXX11_ABI=1 \
		$(call torch2_includes,$(call torch2_var,TORCH2_CPU)) -c $< -o $@
endef
$(TORCH2_CHECK)/kernels/%_cpu.o: CXXFLAGS += $(KERNEL_FLAGS)
$(TORCH2_CHECK)/kernels/%_cpu.o: torch2_omp =
$(TORCH2_CHECK)/kernels/%_cpu_avx512.o: CXXFLAGS += $(AVX512_FLAGS)
$(TORCH2_CHECK)/kernels/%_cpu_avx512.o: torch2_omp =
$(TORCH2_CHECK)/kernels/%_cpu_avx512.o: torch/shim/kernels/%_cpu.cpp $(SHIM_HDR) third_party/libtorch2.sh
	$(compile_against_torch2)
$(TORCH2_CHECK)/testing/%.o: $(TESTING_DIR)/%.cpp $(TESTING_DIR)/testing.h third_party/libtorch2.sh
	$(compile_against_torch2)
$(TORCH2_CHECK)/%.o: torch/shim/%.cpp $(SHIM_HDR) third_party/libtorch2.sh
	$(compile_against_torch2)
# ---- end of torch2-check ----

# ---- The GPU check (docs/testing.md) ----
# gpu-check prepares .gpu/ here, where Go and RDKit are: the binaries, the
# test binaries, the data and an RDKit recording; scripts/gpu-check.sh runs
# the check there, in one call. gpu-check-dry-run runs both on the CPU at
# small sizes (make test does).
gpu-check:
	@$(MAKE) --no-print-directory -j$(JOBS) shim chem
	bash scripts/gpu-prepare.sh
	@echo "then, on the GPU machine, from this checkout with .gpu carried: bash scripts/gpu-check.sh --out \$$OUT"

gpu-check-dry-run:
	@$(MAKE) --no-print-directory -j$(JOBS) shim chem
	bash scripts/gpu-check-dry-run.sh
# ---- end of the GPU check ----

# The whole of `make test` in a Debian 13 root (debootstrap, chroot), against
# Debian 13's libtorch 2.6 and with its python3-torch 2.6
# (scripts/debian13-test.sh; docs/install.md#libtorch-versions).
debian13-test:
	bash scripts/debian13-test.sh

# Builds the image from ./Dockerfile on a Debian base (DEBIAN=12, the
# default, or 13: Debian's CPU libtorch 1.13 or 2.6) with buildah and runs
# micrograph in it: version, pretrain, a kill and --resume, export, and
# PyTorch reading the export.
DEBIAN ?= 12
image-test:
	bash scripts/image-test.sh --debian $(DEBIAN)

build:
	@$(MAKE) --no-print-directory -j$(JOBS) shim chem
	$(GO) build -o bin/micrograph ./cmd/micrograph

deps:
	@sh third_party/deps.sh

test: deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory torch2-check
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 45m ./...
	bash scripts/gpu-check-dry-run.sh
	bash scripts/scaling.sh --smoke --out out/scaling-smoke >/dev/null

# The main job: synthetic data, a few minutes of pre-training, motif recovery
# and linear evaluation with few and all labels, with and without it; the
# tables and the paths (scripts/demo.sh).
run: deps
	@$(MAKE) --no-print-directory build
	MICROGRAPH=bin/micrograph bash scripts/demo.sh

clean:
	rm -rf $(BUILD) bin out .gpu
