#!/usr/bin/env bash
# Puts the cuDNN frontend's headers (NVIDIA's header-only C++ API over cuDNN's
# graph backend, from the PyPI wheel nvidia-cudnn-frontend, pinned) in
# .deps/cudnn-frontend/include, where runtime/cuda/CMakeLists.txt looks for
# them (the CUDA backend's cuDNN attention path). Idempotent; when PyPI
# cannot be reached the CUDA backend builds without the cuDNN path. See
# fetch-wheel-headers.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The headers are the same in every platform's wheel; this one is fetched
# (and its sha256 pinned) whatever the host.
exec "$root/scripts/fetch-wheel-headers.sh" nvidia-cudnn-frontend 1.32.0 \
  c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0 \
  include/ "$root/.deps/cudnn-frontend" cudnn_frontend.h \
  "the CUDA backend builds without the cuDNN attention path" \
  --platform manylinux_2_28_x86_64 --python-version 3.11 \
  --implementation cp --abi cp311
