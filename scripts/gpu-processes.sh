#!/usr/bin/env bash
# One process per GPU on a machine of 2 GPUs (issue [7/7]): the runs that
# show DPC launched the way clusters launch it, with their numbers, in one
# device call. Built here and carried in gpu-run/x2/:
#
#   t1024-adamw-{dp,nodp}.gz      the 1.1B model, T = 1024, 8 sequences a
#                                 micro-step, logical batch 16, 1 rank
#                                 (bench/dp-vs-fsdp2-build.py --accum 2)
#   t1024-adamw-{dp,nodp}-r2.gz   the same, compiled for 2 ranks (dpc --ranks 2)
#   small-r1.xz small-r2.xz       a 2-block f32 model (small.mlir), Poisson
#                                 sampling, sigma 1, for checkpoints and faults
#   small.tok                     its data (512 records of random ids)
#
#   scripts/gpu-processes.sh speed   1.1B: DPC DP on 1 GPU, on 2 GPUs from
#                                    torchrun (one process per GPU) and from
#                                    one process (--gpus 2), DP off from
#                                    torchrun, PyTorch FSDP2 without DP from
#                                    torchrun (compiled and eager)
#   scripts/gpu-processes.sh resume  save with 2 processes, resume with 1,
#                                    and 1 -> 2; against uninterrupted runs
#   scripts/gpu-processes.sh faults  rank 1 of 2 hangs or exits at step 3
#                                    (DPRT_TEST_FAULT), without a launcher and
#                                    under torchrun: rank 0 must end within
#                                    --collective-timeout; cuda-gdb
#                                    backtraces of a rank that does not
#   scripts/gpu-processes.sh trace   the 2-process DP run with --trace
#                                    alone (exposed communication per rank)
#   scripts/gpu-processes.sh all     resume, faults, speed, in that order
#
# Everything comes back in $OUT: processes-MODE.log and results.jsonl.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
run=$root/gpu-run/x2
out=${OUT:-/tmp/gpu-processes}
work=/tmp/gpu-processes-work
mkdir -p "$out" "$work"
source "$root/scripts/gpu-env.sh" || exit 2
export PYTHONUNBUFFERED=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mode=${1:?usage: gpu-processes.sh speed|resume|faults|all}
exec > >(tee -a "$out/processes-$mode.log") 2>&1
results=$out/results.jsonl

date -u +"%Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
nvidia-smi topo -m 2>/dev/null | head -4
for f in "$run"/*.gz; do gunzip -c "$f" > "$work/$(basename "${f%.gz}")"; done
for f in "$run"/*.xz; do xz -dc "$f" > "$work/$(basename "${f%.xz}")"; done
# bench/dp-vs-fsdp2-build.py's default since 2026-11-29: one solid archive.
if [ -f "$run/programs.tar.xz" ]; then tar -xJf "$run/programs.tar.xz" -C "$work"; fi
chmod +x "$work"/t1024-* "$work"/small-*
launch2=(torchrun --standalone --nproc-per-node 2 --no-python)

# Appends one JSON object to results.jsonl: name, command, exit status,
# seconds, and the numbers of DPC's metrics file (rank 0's lines; one process
# per rank adds every rank's heartbeat, whose memory is the per-GPU peak).
record() {
  local name=$1 status=$2 seconds=$3 metrics=$4
  shift 4
  python3 - "$name" "$status" "$seconds" "$metrics" "$*" >> "$results" <<'EOF'
import json, os, sys
name, status, seconds, metrics, cmd = sys.argv[1:]
r = {"name": name, "status": int(status), "wall_s": float(seconds), "command": cmd}
rows = []
if metrics and os.path.exists(metrics):
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
warm = 3
timed = [x for x in rows if x["step"] > warm]
base = [x for x in rows if x["step"] == warm]
if timed and base:
    s = timed[-1]["wall_time_s"] - base[0]["wall_time_s"]
    r["tokens_per_s"] = sum(x["tokens"] for x in timed) / s
    r["s_per_step"] = s / len(timed)
    r["timed_steps"] = len(timed)
    r["final_loss"] = timed[-1]["loss"]
if rows:
    r["peak_gib_rank0"] = max(x["memory_bytes"] for x in rows) / 2**30
    per_rank = {}
    for x in rows:
        for h in x.get("ranks", []):
            per_rank[h["rank"]] = max(per_rank.get(h["rank"], 0), h["memory_bytes"])
    if per_rank:
        r["peak_gib_per_rank"] = {k: v / 2**30 for k, v in sorted(per_rank.items())}
    comm = [x["exposed_comm_s"] for x in rows if "exposed_comm_s" in x]
    if comm:
        r["exposed_comm_s_mean"] = sum(comm[1:] or comm) / len(comm[1:] or comm)
print(json.dumps(r))
# and into the log
print(json.dumps(r), file=sys.stderr)
EOF
}

# Runs a command with a time limit; records it under `name`.
timed_run() {
  local name=$1 limit=$2 metrics=$3
  shift 3
  echo
  echo "== $name: $*"
  local start=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@"
  local status=$?
  local seconds=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  echo "== $name: exit $status after $seconds s"
  record "$name" "$status" "$seconds" "$metrics" "$@"
  return $status
}

# 1024 records of 1025 random ids below 32000 (bench/dp-vs-fsdp2.py's data).
t1024_data() {
  python3 - "$work/t1024.tok" <<'EOF'
import random, sys
r = random.Random(1024)
with open(sys.argv[1], "w") as f:
    for _ in range(1024):
        f.write(" ".join(str(r.randrange(32000)) for _ in range(1025)) + "\n")
EOF
}

# The 2-process run with --trace: exposed communication per rank.
trace_2proc() {
  timed_run dp-2proc-trace 300 "$work/dp-2proc-trace.jsonl" "${launch2[@]}" \
    "$work/t1024-adamw-dp-r2" --data "$work/t1024.tok" --steps 8 --quiet \
    --trace "$work/dp-2proc.trace.json" --metrics "$work/dp-2proc-trace.jsonl"
  [[ -f $work/dp-2proc.trace.json ]] &&
    python3 "$root/scripts/trace-summary.py" "$work/dp-2proc.trace.json"
}

speed() {
  t1024_data
  local data=(--data "$work/t1024.tok" --steps 23 --quiet)
  timed_run dp-1gpu 300 "$work/dp-1gpu.jsonl" \
    "$work/t1024-adamw-dp" "${data[@]}" --metrics "$work/dp-1gpu.jsonl"
  timed_run dp-2proc 300 "$work/dp-2proc.jsonl" "${launch2[@]}" \
    "$work/t1024-adamw-dp-r2" "${data[@]}" --metrics "$work/dp-2proc.jsonl"
  timed_run dp-2gpus-1proc 300 "$work/dp-2gpus.jsonl" \
    "$work/t1024-adamw-dp-r2" --gpus 2 "${data[@]}" --metrics "$work/dp-2gpus.jsonl"
  timed_run nodp-2proc 300 "$work/nodp-2proc.jsonl" "${launch2[@]}" \
    "$work/t1024-adamw-nodp-r2" "${data[@]}" --metrics "$work/nodp-2proc.jsonl"
  trace_2proc
  for compiled in --compile ""; do
    local tag=fsdp2-2proc${compiled:+-compiled}
    [[ -z $compiled ]] && tag=fsdp2-2proc-eager
    timed_run "$tag" 300 "" torchrun --standalone --nproc_per_node 2 \
      "$root/bench/fsdp2-llama.py" --seq 1024 --batch 8 --optimizer adamw \
      --steps 20 --warmup 3 $compiled --json "$work/$tag.json"
    [[ -f $work/$tag.json ]] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({'name': sys.argv[2], 'fsdp2': d}))" "$work/$tag.json" "$tag" >> "$results"
  done
}

resume() {
  local data=(--data "$run/small.tok" --quiet)
  local p1=$work/small-r1 p2=$work/small-r2 c=$work/ck
  rm -rf "$c"
  mkdir -p "$c"
  timed_run small-u2 120 "" "${launch2[@]}" "$p2" "${data[@]}" --steps 8 --save "$c/u2"
  timed_run small-u2-again 120 "" "${launch2[@]}" "$p2" "${data[@]}" --steps 8 --save "$c/u2b"
  timed_run small-u1 120 "" "$p1" "${data[@]}" --steps 8 --save "$c/u1"
  timed_run small-u1-again 120 "" "$p1" "${data[@]}" --steps 8 --save "$c/u1b"
  # 2 processes save at step 4, 1 process resumes to step 8; and 1 -> 2.
  timed_run small-2to1-save 120 "" "${launch2[@]}" "$p2" "${data[@]}" --steps 4 --save "$c/a"
  timed_run small-2to1-resume 120 "" "$p1" "${data[@]}" --steps 8 --resume "$c/a" --save "$c/a"
  timed_run small-1to2-save 120 "" "$p1" "${data[@]}" --steps 4 --save "$c/b"
  timed_run small-1to2-resume 120 "" "${launch2[@]}" "$p2" "${data[@]}" --steps 8 --resume "$c/b" --save "$c/b"
  ls -R "$c" | head -60
  for pair in "u2b u2" "u1b u1" "u1 u2" "a u1" "a u2" "b u2" "b u1"; do
    set -- $pair
    echo "== compare $1 $2 (step 8)"
    python3 "$root/scripts/compare-safetensors.py" "$c/$1" "$c/$2" | tail -3
  done
}

# Host backtraces of every thread of the processes running `pattern`
# (cuda-gdb attaches to host code too), for a rank that outlived its timeout.
backtraces() {
  local pattern=$1 pid
  for pid in $(pgrep -f "$pattern"); do
    echo "-- backtraces of $pid ($(tr '\0' ' ' < /proc/$pid/environ 2>/dev/null | grep -o 'RANK=[0-9]*' | head -1))"
    timeout 60 cuda-gdb -batch -p "$pid" -ex "set pagination off" \
      -ex "thread apply all bt 25" 2>&1 | grep -E "^Thread|^#" | head -120
  done
}

# A 2-process job with rank 1 stuck at step 3 (DPRT_TEST_FAULT), started
# without a launcher (torchrun would end rank 1 itself); records when rank 0
# leaves and, if it outlives its timeout by 40 s, its threads' backtraces.
hung_job() {
  local name=$1 fault=$2
  shift 2
  echo
  echo "== $name: DPRT_TEST_FAULT=$fault $*"
  local pids=() r start=$(date +%s.%N) port=$((29700 + RANDOM % 200))
  for r in 0 1; do
    DPRT_TEST_FAULT=$fault RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" \
      > "$work/$name-rank$r.log" 2>&1 &
    pids+=($!)
    sleep 0.2
  done
  local i
  for i in $(seq 1 90); do
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.5
  done
  local left=no
  if kill -0 "${pids[0]}" 2>/dev/null; then
    left=yes
    backtraces "$work/small-r2"
    kill -9 "${pids[@]}" 2>/dev/null
  fi
  wait "${pids[0]}"
  local status=$?
  kill -9 "${pids[1]}" 2>/dev/null
  wait "${pids[1]}" 2>/dev/null
  local after=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  echo "== $name: rank 0 exit $status after $after s (killed by this script: $left)"
  for r in 0 1; do echo "-- rank $r:"; tail -6 "$work/$name-rank$r.log"; done
  python3 -c "import json,sys; print(json.dumps({'name': sys.argv[1], 'rank0_status': int(sys.argv[2]), 'rank0_wall_s': float(sys.argv[3]), 'killed_by_script': sys.argv[4], 'rank0_tail': open(sys.argv[5]).read()[-600:]}))" \
    "$name" "$status" "$after" "$left" "$work/$name-rank0.log" >> "$results"
}

faults() {
  local data=(--data "$run/small.tok" --steps 100000 --no-budget-stop --quiet)
  export NCCL_DEBUG=WARN
  # Rank 1 stops before its collectives of step 3 (as a stuck rank would):
  # rank 0's watchdog must end it within --collective-timeout (20 s).
  hung_job hang-graphs 1:hang:3 "$work/small-r2" "${data[@]}" --collective-timeout 20
  # Rank 1 ends at step 3 (exit 3, as a crash would).
  hung_job exit-graphs 1:exit:3 "$work/small-r2" "${data[@]}" --collective-timeout 20
  # Under torchrun: rank 0 must leave within the timeout, then torchrun
  # ends rank 1; every rank says why.
  echo
  echo "== hang-torchrun: DPRT_TEST_FAULT=1:hang:3 ${launch2[*]} small-r2"
  local start=$(date +%s.%N) i
  DPRT_TEST_FAULT=1:hang:3 "${launch2[@]}" "$work/small-r2" "${data[@]}" \
    --collective-timeout 20 > "$work/hang-torchrun.log" 2>&1 &
  local launcher=$!
  for i in $(seq 1 90); do
    kill -0 $launcher 2>/dev/null || break
    sleep 0.5
  done
  local left=no
  if kill -0 $launcher 2>/dev/null; then
    left=yes
    backtraces "$work/small-r2"
    kill $launcher
  fi
  wait $launcher
  local status=$?
  local after=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  echo "== hang-torchrun: torchrun exit $status after $after s (ended by this script: $left)"
  grep -v "^W1123\|^  File\|^    " "$work/hang-torchrun.log" | tail -30
  python3 -c "import json,sys; print(json.dumps({'name': 'hang-torchrun', 'status': int(sys.argv[1]), 'wall_s': float(sys.argv[2]), 'killed_by_script': sys.argv[3]}))" \
    "$status" "$after" "$left" >> "$results"
  unset DPRT_TEST_FAULT NCCL_DEBUG
}

case $mode in
speed) speed ;;
resume) resume ;;
faults) faults ;;
trace) t1024_data; trace_2proc ;;
all) resume; faults; speed ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
date -u +"%Y-%m-%dT%H:%M:%SZ"
