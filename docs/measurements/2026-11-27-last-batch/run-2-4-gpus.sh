#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
t=gpu-run/tiny
xz -dk $t/tiny-auto.xz $t/tiny-none.xz && chmod +x $t/tiny-auto $t/tiny-none
for v in auto none; do
  CUDA_VISIBLE_DEVICES=0 $t/tiny-$v --data $t/corpus.txt --steps 6 --seed 3 --metrics $OUT/tiny-$v.jsonl --save /tmp/ck-$v > /dev/null 2>&1
  echo "tiny $v rc=$?"
done
echo "== tiny, GPU auto (warmed sizes) against GPU none"
python3 scripts/compare-safetensors.py /tmp/ck-auto /tmp/ck-none | tail -1
echo "== tiny, GPU auto against CPU auto"
python3 scripts/compare-safetensors.py /tmp/ck-auto $t/cpu-ck | tail -1
python3 scripts/long-records.py gpu-run/corpus.txt --bytes 1023 --records 12000 > /tmp/long.txt
for n in 2 4; do
  for v in full auto none; do
    xz -dkc gpu-run/r$n/llama-$v.xz > /tmp/llama-$v && chmod +x /tmp/llama-$v
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout 170 /tmp/llama-$v --gpus $n --data /tmp/long.txt --steps 25 --metrics $OUT/r$n-$v.jsonl --quiet > /tmp/r$n-$v.log 2>&1
    echo "r$n $v rc=$?"
  done
done
python3 - <<'PY'
import json, os
for n in (2, 4):
  for v in ['full','auto','none']:
    p=os.environ['OUT']+f'/r{n}-{v}.jsonl'
    if not os.path.exists(p): print(v,'no metrics'); continue
    m=[json.loads(l) for l in open(p)]
    for lo in (3, 10):
        tail=m[lo:]
        if not tail: continue
        S=sum(x['samples'] for x in tail); P=sum(x.get('padding_rows',0) for x in tail)
        T=sum(x['step_time_s'] for x in tail)
        print(f'{n} GPUs', v, f'steps {lo+1}..{len(m)}', 'samples', S, 'padding rows', P, 'time', round(T,3), 'samples/s', round(S/T,3))
    print(f'{n} GPUs', v, [(x['samples'], x.get('padding_rows'), round(x['step_time_s'],3)) for x in m][:12])
PY
