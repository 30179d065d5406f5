#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
for round in 1 2 3; do
  for d in base new; do
    date -u +"%T $d $round" >> $R/marks.txt
    python3 bench/dp-vs-fsdp2.py gpu-run/$d --systems dp,nodp --budget 200 --out $R/$d-$round --work /tmp/w-$d > $R/tab-$d-$round.txt 2>&1
    echo "$d $round"; grep 'tokens/s' $R/tab-$d-$round.txt | grep -v DPC | cut -c1-100
  done
done
for p in t1024-sgd-dp t8192-sgd-nodp; do
  d=t1024; case $p in t8192*) d=t8192;; esac
  DPC_KERNEL_TIMES=$R/kt-new-$p.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w-new/$p --data /tmp/w-new/$d.tok --steps 14 --quiet --metrics $R/kt-new-$p.jsonl > $R/kt-new-$p.log 2>&1
  grep -A6 "GPU idle" $R/kt-new-$p.md
done
grep -c '"queued_ahead": true' $R/new-1/*.jsonl $R/kt-new-*.jsonl 2>/dev/null | head
tar czf $OUT/all.tgz -C $OUT r
