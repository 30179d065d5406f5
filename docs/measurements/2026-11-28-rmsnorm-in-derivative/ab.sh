#!/bin/bash
# A/B: 7abcd30's programs (base) against the RMSNorm clone folded into its derivative (new; not kept).
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
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
# kernel-times of the T = 8192 SGD DP-off programs, last 11 of 14 steps
for d in base new; do
  DPC_KERNEL_TIMES=$R/kt-$d-t8192-sgd-nodp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 \
  LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib \
  /tmp/w-$d/t8192-sgd-nodp --data /tmp/w-$d/t8192.tok --steps 14 --quiet > $R/kt-$d.log 2>&1
  head -40 $R/kt-$d-t8192-sgd-nodp.md | grep -i "nvjet\|BinaryOp\|kernel time" | head -12
done
tar czf $OUT/all.tgz -C $OUT r
