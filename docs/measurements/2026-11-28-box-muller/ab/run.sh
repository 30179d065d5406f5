#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
chmod +x gpu-run/pb/epibench2 gpu-run/upd/*
gpu-run/pb/epibench2 100 > $R/tiles-clusters.txt 2>&1; grep -v differ $R/tiles-clusters.txt; grep differ $R/tiles-clusters.txt | cut -c1-120
for round in 1 2; do for v in old new; do echo "### $v round $round"; gpu-run/upd/upd-$v 11534336 8; done; done > $R/upd.txt 2>&1
grep -E '###|now|tiles' $R/upd.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'box_muller\|add_noise' $R/gc.txt
for round in 1 2; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    tail -8 $R/tab-$d-$round.txt | grep "^|"
  done
done
tar czf $OUT/all.tgz -C $OUT r
