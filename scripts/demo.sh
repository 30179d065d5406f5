#!/usr/bin/env bash
# The main job: parse and verify the example models.
set -euo pipefail
build=${1:-build}
for model in examples/mlp.mlir examples/tinylm.mlir examples/llama-1b.mlir; do
  echo "== $model"
  "$build/bin/dp-opt" "$model" > /dev/null
  echo "   parses and verifies"
done
