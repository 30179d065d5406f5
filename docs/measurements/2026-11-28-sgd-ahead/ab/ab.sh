#!/bin/bash
# A/B: 5aac985 programs (base) against SGD rows fetched ahead of the noise (new).
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt
grep -i "per_sample\|mx\|update_rows" $R/gc.txt | head -80 > $R/gc-mx.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 200 > $R/smi.csv &
SMI=$!
for round in 1 2; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    tail -12 $R/tab-$d-$round.txt | grep "^|"
  done
done
kill $SMI
for d in base new; do
  for o in sgd; do
  DPC_KERNEL_TIMES=$R/kt-$d-t1024-$o-dp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 \
  LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib \
  /tmp/w-$d/t1024-$o-dp --data /tmp/w-$d/t1024.tok --steps 14 --quiet > $R/kt-$d-$o.log 2>&1
  head -12 $R/kt-$d-t1024-$o-dp.md | grep -i "cutlass\|update\|kernel time" | head -6
  done
done
tar czf $OUT/all.tgz -C $OUT r
