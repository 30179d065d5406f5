#!/usr/bin/env bash
# The main job (`make demo`): compile the tiny decoder-only transformer of
# examples/tinylm.mlir into a training program and train it with DP-SGD
# (flat clipping, noise calibrated for epsilon = 8) on Debian's fortunes, one
# fortune per record. Shows the plan, the loss falling and epsilon rising,
# the privacy report and a few generated lines. Uses the CUDA backend when a
# GPU is there and the CUDA runtime was built (`make demo` builds it only
# there), the CPU backend otherwise.
#
#   scripts/demo.sh [BUILD_DIR]        DEMO_STEPS=N overrides the 400 steps
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $build = /* ]] || build=$root/$build
work=$build/demo
mkdir -p "$work"
steps=${DEMO_STEPS:-400}

backend=cpu
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1 &&
  [[ -f $build/runtime/cuda/libdprt_cuda.a ]]; then
  backend=cuda
fi

echo "== corpus: Debian's fortunes, one fortune per line (at most 127 bytes)"
python3 "$root/scripts/fortunes-corpus.py" --max-bytes 127 > "$work/corpus.txt"
echo "   $(wc -l < "$work/corpus.txt") records in $work/corpus.txt"
echo
echo "== dpc examples/tinylm.mlir --backend $backend --report"
"$build/bin/dpc" "$root/examples/tinylm.mlir" --backend "$backend" --report \
  -o "$work/tinylm"
echo
echo "== training $steps steps (progress on stderr; metrics in $work/metrics.jsonl)"
rm -f "$work/metrics.jsonl"
"$work/tinylm" --data "$work/corpus.txt" --steps "$steps" \
  --metrics "$work/metrics.jsonl" --generate 5 --save "$work/checkpoint"
echo
echo "== loss and epsilon during training"
python3 - "$work/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
every = max(1, len(rows) // 10)
print(f"{'step':>6} {'loss':>8} {'epsilon':>8}")
for r in rows:
    if r["step"] % every == 0 or r["step"] in (1, rows[-1]["step"]):
        print(f"{r['step']:>6} {r['loss']:>8.3f} {r['epsilon']:>8.3f}")
first = sum(r["loss"] for r in rows[:10]) / min(10, len(rows))
last = sum(r["loss"] for r in rows[-10:]) / min(10, len(rows))
print(f"mean loss of the first 10 steps {first:.3f}, of the last 10 {last:.3f}")
if not last < first:
    sys.exit("demo: the loss did not fall")
EOF
