#!/bin/bash
# gpu-run/base: bench/dp-vs-fsdp2-build.py --shapes t1024,t8192 --optimizers sgd
# at d8dec5a; gpu-run/ce: the same at 3c6b197; gpu-run/gc.xz: 3c6b197's
# dpc-gpu-check.
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt | head -2; grep -c "cross_entropy_forward_backward" $R/gc.txt; grep FAIL $R/gc.txt | head -5
/tmp/gc --only-timing --filter cross_entropy > $R/timing.txt 2>&1; grep -i "cross_entropy" $R/timing.txt | head -6
for round in 1 2; do
  for d in base ce; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round"; grep 'tokens/s' $R/tab-$d-$round.txt | grep -v DPC | cut -c1-100
  done
done
xz -T4 $R/gc.txt
tar czf $OUT/all.tgz -C $OUT r
