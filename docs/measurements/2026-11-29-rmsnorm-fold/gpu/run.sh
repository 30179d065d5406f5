#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc-fold.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt | head -2; grep -c "remade y" $R/gc.txt; grep FAIL $R/gc.txt | head -5
for round in 1 2 3; do
  for d in main fold; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round"; grep 'tokens/s' $R/tab-$d-$round.txt | grep -v DPC | cut -c1-100
  done
done
DPC_KERNEL_TIMES=$R/kt-fold-t8192-sgd-nodp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-fold/t8192-sgd-nodp --data /tmp/w-fold/t8192.tok --steps 14 --quiet > $R/kt-fold.log 2>&1
DPC_KERNEL_TIMES=$R/kt-main-t8192-sgd-nodp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-main/t8192-sgd-nodp --data /tmp/w-main/t8192.tok --steps 14 --quiet > $R/kt-main.log 2>&1
head -12 $R/kt-fold-t8192-sgd-nodp.md
xz -T4 $R/gc.txt
tar czf $OUT/all.tgz -C $OUT r
