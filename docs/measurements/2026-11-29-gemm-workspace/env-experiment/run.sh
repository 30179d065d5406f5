#!/bin/bash
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/gpu.txt; date -u >> $R/gpu.txt
export DPRT_GEMM_TUNING_LOG=1
for round in 1 2 3; do
  for ws in 32 0; do
    date -u +"%T ws$ws $round" >> $R/marks.txt
    DPRT_EXPERIMENT_LT_WORKSPACE_MIB=$ws python3 bench/dp-vs-fsdp2.py gpu-run/ab --systems dp,nodp --budget 200 --out $R/ws$ws-$round --work /tmp/w > $R/tab-ws$ws-$round.txt 2>&1
    echo "ws$ws $round"; grep 'tokens/s' $R/tab-ws$ws-$round.txt | grep -v DPC | cut -c1-100
  done
done
for ws in 32 0; do
  for p in t8192-sgd-nodp t1024-sgd-dp; do
    tok=${p%%-*}
    DPRT_EXPERIMENT_LT_WORKSPACE_MIB=$ws DPC_KERNEL_TIMES=$R/kt-ws$ws-$p.md DPC_KERNEL_TIMES_MARK=gatherRowsKernel DPC_KERNEL_TIMES_LAST=11 LD_PRELOAD=$PWD/gpu-run/kt/kernel-times.so /tmp/w/$p --data /tmp/w/$tok.tok --steps 14 --quiet > $R/kt-ws$ws-$p.log 2>&1
    echo "kt ws$ws $p"; grep -i "kernel time\|GPU idle\|memset" $R/kt-ws$ws-$p.md | head -6
  done
done
tar czf $OUT/all.tgz -C $OUT r
