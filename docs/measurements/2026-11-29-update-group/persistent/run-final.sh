#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
xz -dc gpu-run/gc80.xz > /tmp/gc80 && chmod +x /tmp/gc80
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt | head -1; grep FAIL $R/gc.txt | head -5
/tmp/gc80 --no-timing --filter update > $R/gc-sm80-ptx-update.txt 2>&1; tail -1 $R/gc-sm80-ptx-update.txt; grep FAIL $R/gc-sm80-ptx-update.txt | head -5
python3 bench/dp-vs-fsdp2.py gpu-run/solid --systems dp --budget 60 --out $R/solid --work /tmp/ws > $R/solid.txt 2>&1; grep -E "programs:|tokens/s" $R/solid.txt | grep -v DPC | head -3
xz -T4 $R/gc.txt
