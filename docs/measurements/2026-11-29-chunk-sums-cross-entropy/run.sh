#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc.xz > /tmp/gc && chmod +x /tmp/gc
( time /tmp/gc --no-timing ) > $R/gc.txt 2>&1; tail -4 $R/gc.txt; grep -i 'rms_norm_backward\|cross_entropy' $R/gc.txt | cut -c1-150; grep -c FAIL $R/gc.txt
python3 bench/dp-vs-fsdp2.py gpu-run/kt-progs --systems dp,nodp --budget 200 --out $R/tab --work /tmp/w > $R/tab.txt 2>&1
grep '^| 1.1B' $R/tab.txt | cut -d'|' -f2-5
for p in t1024-sgd-dp:t1024 t8192-sgd-nodp:t8192; do
  n=${p%%:*}; t=${p##*:}
  DPC_KERNEL_TIMES=$R/kt-$n.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w/$n --data /tmp/w/$t.tok --steps 14 --quiet > $R/kt-$n.log 2>&1
  echo "$n"; grep -i "kernel time\|rmsNorm\|normBackward\|chunkSum\|crossEntropy" $R/kt-$n.md | head -8
done
tar czf $OUT/all.tgz -C $OUT r
