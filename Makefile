# DPC: two entry points.
#   make test   install what is missing, configure, build, run every CPU test
#   make demo   install, build, and run the main job (see scripts/demo.sh)

BUILD ?= build
JOBS ?= $(shell nproc)
LLVM_CONFIG ?= llvm-config-22

.PHONY: test demo deps configure build docs format clean

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The demo needs only dpc and the runtime, not the tests.
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target dpc-toolchain
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

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Regenerates the dialect and pass reference in docs/ from the TableGen files.
docs: build
	cmake --build $(BUILD) --target dpc-docs

# clang-format (LLVM style, .clang-format) over every tracked C++ and CUDA file.
format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
