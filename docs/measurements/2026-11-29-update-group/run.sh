#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'update_group' $R/gc.txt | cut -c1-150; grep FAIL $R/gc.txt | head -5
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $R/smi.csv &
SMI=$!
for round in 1 2 3; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 300 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round"; grep 'tokens/s' $R/tab-$d-$round.txt | grep -v DPC | cut -c1-90
  done
done
kill $SMI
DPC_KERNEL_TIMES=$R/kt-new-t1024-sgd-dp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-new/t1024-sgd-dp --data /tmp/w-new/t1024.tok --steps 14 --quiet > $R/kt.log 2>&1
grep -i "kernel time\|groupUpdate\|updateKernel\|GPU idle" $R/kt-new-t1024-sgd-dp.md | head -8
xz -T4 $R/smi.csv
tar czf $OUT/all.tgz -C $OUT r
