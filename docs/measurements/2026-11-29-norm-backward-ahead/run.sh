#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'norm' $R/gc.txt | grep -v "^PASS.*layer" | cut -c1-150 | head -30; grep -c FAIL $R/gc.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $R/smi.csv &
SMI=$!
for round in 1 2 3; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 300 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round"; grep '^| 1.1B' $R/tab-$d-$round.txt | cut -d'|' -f2-5
  done
done
kill $SMI
for d in base new; do
  for p in t1024-sgd-dp:t1024 t8192-sgd-nodp:t8192; do
    n=${p%%:*}; t=${p##*:}
    DPC_KERNEL_TIMES=$R/kt-$d-$n.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-$d/$n --data /tmp/w-$d/$t.tok --steps 14 --quiet > $R/kt-$d-$n.log 2>&1
    echo "$d $n"; grep -i "kernel time\|rmsNorm\|normBackward\|chunkSum" $R/kt-$d-$n.md | head -5
  done
done
tar czf $OUT/all.tgz -C $OUT r
