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

# Site-packages folders of the interpreter (and of sys.path).
python=${PYTHON:-python3}
mapfile -t roots < <("$python" - <<'EOF' 2>/dev/null || true
import os, site, sys
roots = list(site.getsitepackages())
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
seen = set()
for r in roots:
    if os.path.isdir(r) and r not in seen:
        seen.add(r)
        print(r)
EOF
)

# The folder holding `lib`, searched under <root>/nvidia first (nvidia/nccl/lib,
# nvidia/cu13/lib, ...), then anywhere under the roots.
find_lib() {
  local lib=$1 root hit
  for root in "${roots[@]}"; do
    if [[ -d $root/nvidia ]]; then
      hit=$(find "$root/nvidia" -name "$lib" -print -quit 2>/dev/null || true)
      [[ -n $hit ]] && { dirname "$hit"; return; }
    fi
  done
  for root in "${roots[@]}"; do
    hit=$(find "$root" -name "$lib" -print -quit 2>/dev/null || true)
    [[ -n $hit ]] && { dirname "$hit"; return; }
  done
  return 0
}

libpath=
for lib in libnccl.so.2 libcublasLt.so.13; do
  dir=$(find_lib "$lib")
  if [[ -z $dir ]]; then
    if ldconfig -p 2>/dev/null | grep -q "$lib"; then
      continue
    fi
    echo "gpu-check.sh: $lib not found under ${roots[*]:-no site-packages}" >&2
    exit 2
  fi
  echo "gpu-check.sh: $lib from $dir"
  case ":$libpath:" in
  *":$dir:"*) ;;
  *) libpath=${libpath:+$libpath:}$dir ;;
  esac
done
export LD_LIBRARY_PATH=${libpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVLink multicast stays off on these machines.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

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
