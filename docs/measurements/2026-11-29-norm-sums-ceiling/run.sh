#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
for round in 1 2 3; do
  for v in with skip; do
    date -u +"%T $v $round" >> $R/marks.txt
    if [ $v = skip ]; then export DPRT_EXPERIMENT_SKIP_NORM_SUMS=1; else unset DPRT_EXPERIMENT_SKIP_NORM_SUMS; fi
    python3 bench/dp-vs-fsdp2.py gpu-run/x --systems dp --budget 200 --out $R/$v-$round --work /tmp/w > $R/tab-$v-$round.txt 2>&1
    echo "$v $round $(grep '^| 1.1B' $R/tab-$v-$round.txt | cut -d'|' -f3,4 | tr '\n' ' ')"
  done
done
tar czf $OUT/all.tgz -C $OUT r
