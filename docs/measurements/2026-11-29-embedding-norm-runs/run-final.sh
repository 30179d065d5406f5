#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'norm_embedding' $R/gc.txt | cut -c1-160; grep -c FAIL $R/gc.txt
/tmp/gc --only-timing --filter norm_embedding > $R/gc-timing.txt 2>&1; grep -i "^TIME.*norm_embedding" $R/gc-timing.txt | cut -c1-160
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $R/smi.csv &
SMI=$!
for round in 1 2 3; do
    date -u +"%T $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/t1 --systems dp,nodp --budget 300 --out $R/t1-$round --work /tmp/w > $R/tab-$round.txt 2>&1
    echo "$round"; grep 'tokens/s' $R/tab-$round.txt | grep -v DPC | cut -c1-90; grep '^| 1.1B' $R/tab-$round.txt | cut -d'|' -f3,8
done
kill $SMI
DPC_KERNEL_TIMES=$R/kt-t1024-sgd-dp.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w/t1024-sgd-dp --data /tmp/w/t1024.tok --steps 14 --quiet > $R/kt.log 2>&1
grep -i "kernel time\|groupTokens\|runParts\|runJoin" $R/kt-t1024-sgd-dp.md | head -8
xz -T4 $R/smi.csv
tar czf $OUT/all.tgz -C $OUT r
