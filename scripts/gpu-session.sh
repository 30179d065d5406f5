#!/usr/bin/env bash
# One call on a GPU machine: checks and measurements that belong together.
# The programs are built where the sources are (dpc --backend cuda, `make
# build` for dpc-gpu-check) and carried in gpu-run/ with the corpus
# (scripts/fortunes-corpus.py) and blobs.csv (scripts/blobs-csv.py):
#
#   gpu-run/dpc-gpu-check  gpu-run/{mlp,tinylm,llama-1b}  (1 rank)
#   gpu-run/{tinylm,llama-1b}-r2                          (2 ranks)
#   gpu-run/{tinylm,llama-1b}-r4                          (4 ranks)
#   gpu-run/corpus.txt  gpu-run/blobs.csv
#
#   scripts/gpu-session.sh one   one GPU: kernels against the CPU backend and
#                                their timings, one step of the MLP and the
#                                tiny LM to compare with the CPU backend, short
#                                training runs, the 1.1B model
#   scripts/gpu-session.sh two   two GPUs: NCCL checks, the tiny LM on 2 ranks
#                                against 1 rank, the 1.1B model on 2 GPUs
#   scripts/gpu-session.sh attention
#                                two GPUs: attention checks and timings, every
#                                kernel, the 1.1B model on 1 and on 2 GPUs
#   scripts/gpu-session.sh four  four GPUs: NCCL checks on 4, the tiny LM on 4
#                                ranks against 1, the 1.1B model on 1, 2 and
#                                4 GPUs, with --trace (exposed communication)
#                                on 2 and 4, and PyTorch FSDP2 without DP on
#                                1, 2 and 4 (bench/fsdp2-llama.py)
#   scripts/gpu-session.sh channels
#                                four GPUs: the 1.1B model on 2 and 4 GPUs
#                                with --trace under NCCL_MAX_NCHANNELS 2 to 32
#                                (do fewer SMs for NCCL speed compute up?)
#
# What comes back is written to $OUT (at most 8 files).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
run=$root/gpu-run
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
source "$root/scripts/gpu-env.sh" || exit 2
export PYTHONUNBUFFERED=1

mode=${1:?usage: gpu-session.sh one|two|attention|four|channels}
log=$out/session-$mode.log
exec > >(tee "$log") 2>&1
date -u +"%Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
  --format=csv
work=/tmp/gpu-work
mkdir -p "$work"
python3 "$root/scripts/long-records.py" "$run/corpus.txt" --bytes 1023 \
  --records 12000 > "$work/long.txt"

# Saves one step from seed 11 without noise and keeps the parameters.
one_step() {
  local name=$1 program=$2 data=$3
  shift 3
  rm -rf "$work/$name"
  "$program" --data "$data" --steps 1 --sigma 0 --seed 11 --save \
    "$work/$name" --quiet "$@" > /dev/null &&
    rm -rf "$out/$name" &&
    cp -r "$work/$name"/step-00000001 "$out/$name" && echo "$name: saved"
}

# The tiny LM, 5 steps without noise from seed 11, on N GPUs (tinylm-rN)
# and on 1; compares the parameters. They are kept in DIR.
tinylm_against_one_gpu() {
  local n=$1 dir=$2 r prog flags
  echo "== tiny LM: 5 steps without noise on $n GPUs and on 1"
  for r in 1 "$n"; do
    prog=$run/tinylm
    flags=()
    [[ $r != 1 ]] && prog=$run/tinylm-r$r && flags=(--gpus "$r")
    rm -rf "$work/lm$r"
    "$prog" --data "$run/corpus.txt" --steps 5 --sigma 0 --seed 11 \
      --save "$work/lm$r" --quiet "${flags[@]}" > /dev/null &&
      rm -rf "$dir/tinylm-gpu$r" &&
      cp -r "$work/lm$r"/step-00000005 "$dir/tinylm-gpu$r"
  done
  python3 "$root/scripts/compare-safetensors.py" \
    "$dir/tinylm-gpu$n" "$dir/tinylm-gpu1" --quiet
}

case $mode in
one)
  echo "== dpc-gpu-check (kernels against the CPU backend, timings)"
  timeout 200 "$run/dpc-gpu-check" --timeout 190
  echo "dpc-gpu-check exit $?"

  echo "== one step without noise, to compare with the CPU backend"
  one_step mlp-gpu "$run/mlp" "$run/blobs.csv"
  one_step tinylm-gpu "$run/tinylm" "$run/corpus.txt"

  echo "== MLP, 300 steps"
  "$run/mlp" --data "$run/blobs.csv" --quiet | tail -n 16
  echo "== tiny LM, 300 steps"
  "$run/tinylm" --data "$run/corpus.txt" --steps 300 --quiet --generate 4 |
    tail -n 22
  echo "== 1.1B model, one GPU, 3 steps of 256 sequences x 1024 tokens"
  timeout 300 "$run/llama-1b" --data "$work/long.txt" --steps 3 \
    --metrics "$out/llama-1gpu.jsonl"
  echo "llama-1b exit $?"
  ;;
two)
  echo "== dpc-gpu-check --nccl"
  timeout 120 "$run/dpc-gpu-check" --nccl --timeout 110
  echo "dpc-gpu-check --nccl exit $?"
  echo "== dpc-gpu-check --launch 2 (one process per GPU, NCCL_COMM_ID)"
  DPC_GPU_CHECK=$run/dpc-gpu-check timeout 120 "$root/scripts/gpu-check.sh" \
    --launch 2 --no-timing --timeout 100 2>&1 | tail -n 12

  tinylm_against_one_gpu 2 "$out"

  echo "== 1.1B model, two GPUs, 3 steps of 256 sequences x 1024 tokens"
  timeout 300 "$run/llama-1b-r2" --gpus 2 --data "$work/long.txt" --steps 3 \
    --metrics "$out/llama-2gpu.jsonl"
  echo "llama-1b-r2 exit $?"
  ;;
attention)
  # cuDNN builds a graph per shape and direction on first use: more time.
  echo "== dpc-gpu-check --filter attention (cudnn, fused and materialized, timings)"
  timeout 300 "$run/dpc-gpu-check" --filter attention --timeout 290
  echo "dpc-gpu-check attention exit $?"
  echo "== dpc-gpu-check --no-timing (every kernel)"
  timeout 150 "$run/dpc-gpu-check" --no-timing --timeout 140 | tail -n 4
  echo "== 1.1B model, one GPU, 3 steps"
  CUDA_VISIBLE_DEVICES=0 timeout 200 "$run/llama-1b" --data "$work/long.txt" \
    --steps 3 --metrics "$out/llama-1gpu.jsonl" | tail -n 16
  echo "== 1.1B model, two GPUs, 3 steps"
  timeout 200 "$run/llama-1b-r2" --gpus 2 --data "$work/long.txt" --steps 3 \
    --metrics "$out/llama-2gpu.jsonl" --trace "$out/llama-2gpu-trace.json" |
    tail -n 16
  ;;
four)
  nvidia-smi topo -m
  echo "== dpc-gpu-check --nccl --nccl-ranks 4"
  # OUT unset: every row to stdout (not a table file under $OUT).
  OUT= timeout 150 "$run/dpc-gpu-check" --nccl --nccl-ranks 4 --timeout 140 |
    grep -E "exposedComm|FAIL|checks, |GB/s" 
  echo "dpc-gpu-check --nccl exit ${PIPESTATUS[0]}"
  echo "== dpc-gpu-check --launch 4 (one process per GPU, NCCL_COMM_ID)"
  OUT=$work DPC_GPU_CHECK=$run/dpc-gpu-check timeout 120 \
    "$root/scripts/gpu-check.sh" --launch 4 --no-timing --timeout 100 2>&1 |
    grep -E "^=== rank|checks, |FAIL"

  tinylm_against_one_gpu 4 "$work"

  # The same machine for every count: GPUs 0..n-1.
  for n in 1 2 4; do
    echo "== 1.1B model, $n GPU(s), 5 steps of 256 sequences x 1024 tokens"
    prog=$run/llama-1b
    flags=()
    [[ $n != 1 ]] && prog=$run/llama-1b-r$n && flags=(--gpus $n)
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout 200 "$prog" \
      "${flags[@]}" --data "$work/long.txt" --steps 5 \
      --metrics "$out/llama-${n}gpu.jsonl" | tail -n 16
    echo "llama-1b on $n GPU(s) exit ${PIPESTATUS[0]}"
  done
  for n in 2 4; do
    echo "== 1.1B model, $n GPUs, 3 steps with --trace (exposed communication)"
    metrics=$work/llama-${n}gpu-trace.jsonl
    [[ $n == 4 ]] && metrics=$out/llama-4gpu-trace.jsonl
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout 200 \
      "$run/llama-1b-r$n" --gpus $n --data "$work/long.txt" --steps 3 \
      --metrics "$metrics" \
      --trace "$work/llama-${n}gpu-trace.json" | tail -n 16
    echo "llama-1b-r$n --trace exit ${PIPESTATUS[0]}"
    python3 "$root/scripts/trace-summary.py" "$work/llama-${n}gpu-trace.json"
    cat "$metrics"
  done
  cp "$work/llama-4gpu-trace.json" "$out/" 2>/dev/null

  echo "== PyTorch FSDP2 without DP (bench/fsdp2-llama.py), 1, 2 and 4 GPUs"
  for n in 1 2 4; do
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout 200 \
      torchrun --standalone --nproc_per_node $n "$root/bench/fsdp2-llama.py" \
      --steps 10 --warmup 3 --json "$work/fsdp2-${n}gpu.json" 2>&1 |
      grep -v "^W.*OMP_NUM_THREADS\|^\*\*\*" | tail -n 14
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
      "$work/fsdp2-${n}gpu.json" >> "$out/fsdp2.jsonl"
  done
  ;;
channels)
  for n in 2 4; do
    for ch in default 2 4 8 16 32; do
      unset NCCL_MAX_NCHANNELS
      [[ $ch != default ]] && export NCCL_MAX_NCHANNELS=$ch
      echo "== 1.1B model, $n GPUs, NCCL_MAX_NCHANNELS $ch, 4 steps, --trace"
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout 120 \
        "$run/llama-1b-r$n" --gpus $n --data "$work/long.txt" --steps 4 \
        --quiet --metrics "$work/m.jsonl" --trace "$work/t.json" |
        grep -E "throughput|exposed comm"
      # Steps 2 to 4: without the captures of step 1.
      python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
t = sum(r["step_time_s"] for r in rows)
print("steady: %.0f tokens/s, %.1f ms per micro-step, exposed %.1f %%" % (
    sum(r["tokens"] for r in rows) / t,
    1e3 * t / sum(r["micro_steps"] for r in rows),
    100 * sum(r["exposed_comm_s"] for r in rows) / t))' "$work/m.jsonl"
    done
  done
  unset NCCL_MAX_NCHANNELS
  ;;
*)
  echo "usage: gpu-session.sh one|two|attention|four|channels" >&2
  exit 2
  ;;
esac
