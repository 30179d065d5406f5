#!/usr/bin/env bash
# Runs dpc-gpu-check on the GPU machine. It builds nothing: the binary is
# built where the sources are (`make build`, with CUDA and the CPU backend)
# and carried over. NCCL and cuBLASLt come from the nvidia-* pip wheels that
# PyTorch installed there; this finds libnccl.so.2 and libcublasLt.so.13
# under python3's site-packages and puts their folders on LD_LIBRARY_PATH.
#
#   scripts/gpu-check.sh [ARGS...]           one GPU: kernels, capture, timings
#   scripts/gpu-check.sh --nccl [ARGS...]    2 GPUs, one process, 2 threads
#   scripts/gpu-check.sh --launch N [ARGS...]
#       N processes (RANK/WORLD_SIZE/LOCAL_RANK, NCCL_COMM_ID on localhost)
#       each running `dpc-gpu-check --nccl-env`, as torchrun would start them
#
# DPC_GPU_CHECK overrides the binary (default build/bin/dpc-gpu-check);
# PYTHON the interpreter whose site-packages hold the wheels.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${DPC_GPU_CHECK:-$root/build/bin/dpc-gpu-check}
if [[ ! -x $bin ]]; then
  echo "gpu-check.sh: no binary at $bin" \
    "(build it with 'make build' where nvcc is)" >&2
  exit 2
fi

# LD_LIBRARY_PATH for NCCL and cuBLASLt from the pip wheels.
source "$root/scripts/gpu-env.sh"

if [[ ${1:-} != --launch ]]; then
  exec "$bin" "$@"
fi

n=${2:?--launch needs a process count}
shift 2
port=$((29500 + RANDOM % 1000))
logs=${OUT:-$(mktemp -d)}
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r NCCL_COMM_ID=127.0.0.1:$port \
    "$bin" --nccl-env "$@" >"$logs/gpu-check-rank$r.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
# The ends of the logs (the summaries); the whole logs stay in $logs.
for ((r = 0; r < n; r++)); do
  echo "=== rank $r (last lines of $logs/gpu-check-rank$r.log) ==="
  tail -n 40 "$logs/gpu-check-rank$r.log"
done
exit $status
