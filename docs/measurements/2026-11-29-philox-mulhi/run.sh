#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'noise\|box_muller\|philox\|update_rows' $R/gc.txt | cut -c1-160 | head -40; grep -c FAIL $R/gc.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $R/smi.csv &
SMI=$!
for round in 1 2 3; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round $(tail -8 $R/tab-$d-$round.txt | grep '^| 1.1B' | cut -d'|' -f3,4 | tr '\n' ' ')"
  done
done
kill $SMI
for d in base new; do
  DPC_KERNEL_TIMES=$R/kt-$d-t1024-sgd-dp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-$d/t1024-sgd-dp --data /tmp/w-$d/t1024.tok --steps 14 --quiet > $R/kt-$d.log 2>&1
  grep -i "mxAhead\|kernel time" $R/kt-$d-t1024-sgd-dp.md | head -3
done
tar czf $OUT/all.tgz -C $OUT r
