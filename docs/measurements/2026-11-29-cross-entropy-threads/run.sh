#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
xz -dc gpu-run/gc-old.xz > /tmp/gco && chmod +x /tmp/gco
xz -dc gpu-run/gc-new.xz > /tmp/gcn && chmod +x /tmp/gcn
/tmp/gcn --no-timing --filter cross_entropy > $R/gc-new-ce.txt 2>&1; tail -2 $R/gc-new-ce.txt
for r in 1 2; do
  echo "old $r"; /tmp/gco --only-timing --filter cross_entropy 2>&1 | grep TIME | tee -a $R/t-old.txt
  for t in 128 256 512; do echo "new $t $r"; DPRT_EXPERIMENT_CE_THREADS=$t /tmp/gcn --only-timing --filter cross_entropy 2>&1 | grep TIME | tee -a $R/t-new-$t.txt; done
done
tar czf $OUT/all.tgz -C $OUT r
