#!/usr/bin/env bash
# Puts CUTLASS's headers (cute/ and cutlass/, from the PyPI wheel
# nvidia-cutlass, pinned) in .deps/cutlass/include, where
# runtime/cuda/CMakeLists.txt looks for them: the sm_90a products whose
# epilogues sum the per-sample norms (runtime/cuda/NormGemms.h). Idempotent;
# when PyPI cannot be reached the CUDA backend builds without them (the
# norms are then a second pass over a product, as on sm_80). See
# fetch-wheel-headers.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$root/scripts/fetch-wheel-headers.sh" nvidia-cutlass 4.2.0.0 \
  f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6 \
  cutlass_library/source/include/ "$root/.deps/cutlass" cutlass/cutlass.h \
  "the CUDA backend builds without the fused per-sample gradient product"
