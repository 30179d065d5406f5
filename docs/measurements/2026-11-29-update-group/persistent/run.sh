#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
/tmp/gc --no-timing --filter update > $R/gc.txt 2>&1; tail -2 $R/gc.txt; grep -c PASS $R/gc.txt; grep FAIL $R/gc.txt | head -5
for round in 1 2 3; do
  for d in base new; do
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round $(grep 'tokens/s' $R/tab-$d-$round.txt | grep -v DPC | awk '{print $NF, $(NF-1)}' | tr '\n' ' ')"
  done
done
DPC_KERNEL_TIMES=$R/kt-new.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-new/t1024-sgd-dp --data /tmp/w-new/t1024.tok --steps 14 --quiet > $R/kt.log 2>&1
grep -i "groupUpdate" $R/kt-new.md | head -3
tar czf $OUT/all.tgz -C $OUT r
