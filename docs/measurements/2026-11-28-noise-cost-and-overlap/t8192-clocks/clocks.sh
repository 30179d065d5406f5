#!/bin/bash
# Clocks and power under DPC DP off and compiled FSDP2 at T = 8192 (SGD), one after the other.
set -u
W=/tmp/wc; mkdir -p $W
python3 bench/dp-vs-fsdp2.py gpu-run/p --systems nodp --shapes t8192 --optimizers sgd --budget 60 --out $OUT/tab --work $W > $OUT/tab.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv &
smi=$!
for r in 1 2; do
  echo "dpc-start-$r $(date +%s.%N)" >> $OUT/marks.txt
  $W/t8192-sgd-nodp --data $W/t8192.tok --steps 60 --metrics $OUT/dpc-$r.jsonl --quiet > $OUT/dpc-$r.log 2>&1
  echo "dpc-end-$r $(date +%s.%N)" >> $OUT/marks.txt
  echo "fsdp2-start-$r $(date +%s.%N)" >> $OUT/marks.txt
  /opt/torch/.venv/bin/python3 bench/fsdp2-llama.py --device cuda --steps 40 --warmup 3 --seq 8192 --batch 1 --accum 1 --optimizer sgd --lr 0.01 --weight-decay 0.0 --vocab 32000 --width 2048 --blocks 16 --heads 32 --kv-heads 8 --mlp 8192 --rope-theta 10000.0 --json $OUT/fsdp2-$r.json --compile > $OUT/fsdp2-$r.log 2>&1
  echo "fsdp2-end-$r $(date +%s.%N)" >> $OUT/marks.txt
done
kill $smi
cd $OUT && tar czf all.tgz *.csv *.txt *.jsonl *.json *.log tab && ls
