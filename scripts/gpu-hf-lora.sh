#!/usr/bin/env bash
# On a GPU machine: the Hugging Face fixtures loaded with --init into CUDA
# programs (loss against transformers' reference.json, 1e-4 relative, f32),
# and DP-LoRA on the 1.1B benchmark model against DP full fine-tuning.
# Programs are built where dpc is (gzip'd, carried in gpu-run/):
#
#   gpu-run/hf/{llama,gpt2,qwen2-tied,llama3-rope}.gz
#       dpc-import-hf test/fixtures/hf/M --seq T [--dtype f32] (expected
#       batch 4), dpc --backend cuda
#   gpu-run/lora/t1024-adamw-lora.gz
#       gpu-run/dp-vs-fsdp2/t1024-adamw-dp.mlir with
#       lora = #dp.lora<rank = 16, alpha = 32.0, targets = [wq, wk, wv, wo,
#       gate, up, down]>, dpc --backend cuda
#
#   scripts/gpu-hf-lora.sh [hf] [lora]
#
# Writes to $OUT: hf-losses.log, lora.jsonl (the LoRA run's metrics).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
run=$root/gpu-run
out=${OUT:-/tmp/gpu-hf-lora}
work=/tmp/gpu-hf-lora-work
mkdir -p "$out" "$work"
source "$root/scripts/gpu-env.sh" >/dev/null || exit 2
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(hf lora)

unpack() { gzip -dc "$1" > "$2" && chmod +x "$2"; }

for part in "${parts[@]}"; do
  case $part in
  hf)
    for m in llama gpt2 qwen2-tied llama3-rope; do
      unpack "$run/hf/$m.gz" "$work/$m" || continue
      echo "== $m (cuda)"
      python3 "$root/test/hf-weights/Inputs/hf-tool.py" check-losses \
        "$work/$m" "$root/test/fixtures/hf/$m" \
        "$root/test/fixtures/hf/$m/reference.json" "$work/$m.work" 2>&1 |
        tail -3
    done 2>&1 | tee "$out/hf-losses.log"
    ;;
  lora)
    unpack "$run/lora/t1024-adamw-lora.gz" "$work/lora" || exit 1
    # The benchmark's data: 184 records of 1025 random ids (vocabulary 32000).
    python3 - "$work/lora.tok" <<'EOF'
import random, sys
rng = random.Random(1)
with open(sys.argv[1], "w") as f:
    for _ in range(184):
        f.write(" ".join(str(rng.randrange(32000)) for _ in range(1025)) + "\n")
EOF
    rm -f "$out/lora.jsonl"
    "$work/lora" --data "$work/lora.tok" --steps 23 --metrics "$out/lora.jsonl" \
      --quiet 2>&1 | tail -12
    python3 - "$out/lora.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
timed = rows[3:]
print("DP-LoRA 1.1B T=1024 b=8 AdamW: median tokens/s %.0f over %d steps, "
      "peak memory %.2f GiB, loss %.4f -> %.4f" % (
          statistics.median(r["tokens_per_s"] for r in timed), len(timed),
          max(r["memory_bytes"] for r in rows) / 2**30, rows[0]["loss"],
          rows[-1]["loss"]))
EOF
    ;;
  *)
    echo "gpu-hf-lora.sh: unknown part $part (hf, lora)" >&2
    exit 2
    ;;
  esac
done
