#!/bin/bash
# gpu-run/gc.xz: dpc-gpu-check of 3c6b197 with the row copied to shared
# memory first (kCrossEntropyCopyAhead = 16), not committed.
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
/tmp/gc --no-timing --filter cross_entropy > $R/gc-ce.txt 2>&1; tail -1 $R/gc-ce.txt; grep FAIL $R/gc-ce.txt | head -5
/tmp/gc --only-timing --filter cross_entropy > $R/timing.txt 2>&1; grep "^TIME" $R/timing.txt | head -6
tar czf $OUT/all.tgz -C $OUT r
