# DPC: two entry points.
#   make test   install what is missing, configure, build the compiler and the
#               CPU backend, run the CPU tests (under 15 minutes on 2 cores)
#   make demo   install, build, and run the main job (see scripts/demo.sh)
# and two more suites, which CI (.ci/run) runs after `make test`:
#   make test-cuda  build the CUDA backend and dpc-gpu-check (compiled and
#                   linked here, run on a GPU: docs/gpu-checks.md) and run the
#                   tests that link against it (ctest label cuda)
#   make test-slow  the tests that take a minute or more (ctest label slow)

BUILD ?= build
JOBS ?= $(shell nproc)
LLVM_CONFIG ?= llvm-config-22

.PHONY: test test-cuda test-slow demo deps configure build build-cpu docs format clean

test: build-cpu
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE 'cuda|slow'

test-cuda: configure
	cmake --build $(BUILD) -j $(JOBS) --target all dpc-cuda
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L cuda

test-slow: build-cpu
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow

# The demo needs only dpc and the runtime, not the tests; the CUDA runtime
# only where a GPU will run it (scripts/demo.sh picks the backend the same way).
DEMO_TOOLCHAIN = $(if $(shell nvidia-smi -L 2>/dev/null),dpc-toolchain,dpc-toolchain-cpu)
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TOOLCHAIN)
	scripts/demo.sh $(BUILD)

deps:
	@scripts/install-deps.sh
	@scripts/fetch-cudnn-frontend.sh
	@scripts/fetch-cutlass.sh

# MLIR_DIR comes from llvm-config-22: an older llvm-config may be first on PATH.
$(BUILD)/build.ninja: | deps
	cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$$($(LLVM_CONFIG) --cmakedir)/../mlir

configure: deps $(BUILD)/build.ninja

# Everything, the CUDA backend (dpc-cuda) included where nvcc is.
build: configure
	cmake --build $(BUILD) -j $(JOBS) --target all dpc-cuda

# The compiler, the CPU backend and the tests (`all`), not the CUDA backend.
build-cpu: configure
	cmake --build $(BUILD) -j $(JOBS)

# Regenerates the dialect and pass reference in docs/ from the TableGen files.
docs: build
	cmake --build $(BUILD) --target dpc-docs

# clang-format (LLVM style, .clang-format) over every tracked C++ and CUDA file.
format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
