#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
chmod +x gpu-run/pb/epibench6
gpu-run/pb/epibench6 100 > $R/epibench.txt 2>&1; cat $R/epibench.txt | cut -c1-150
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'mx_scale\|NaN blocks\|mxfp8' $R/gc.txt | cut -c1-200; grep -c FAIL $R/gc.txt
for round in 1 2 3; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    tail -8 $R/tab-$d-$round.txt | grep "^| 1.1B" | cut -d'|' -f3,4
  done
done
tar czf $OUT/all.tgz -C $OUT r
