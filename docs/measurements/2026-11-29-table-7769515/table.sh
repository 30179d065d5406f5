#!/bin/bash
# gpu-check, then the whole table, every column in one call.
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 500 > $R/smi.csv &
SMI=$!
( time python3 bench/dp-vs-fsdp2.py gpu-run/tab --budget 440 --out $R/table --work /tmp/w ) > $R/tab.txt 2>&1
kill $SMI
date -u >> $R/gpu.txt
tail -22 $R/tab.txt
tar czf $OUT/all.tgz -C $OUT r
