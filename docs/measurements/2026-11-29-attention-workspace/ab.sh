#!/bin/bash
R=$OUT/r; mkdir -p $R; W=/tmp/ab; mkdir -p $W
nvidia-smi -L > $R/gpu.txt; date -u >> $R/gpu.txt
python3 - $W/d1024.tok $W/d8192.tok <<'PY'
import random, sys
rng = random.Random(1)
for path, n, t in ((sys.argv[1], 400, 1025), (sys.argv[2], 60, 8193)):
    with open(path, "w") as f:
        for _ in range(n):
            f.write(" ".join(str(rng.randrange(32000)) for _ in range(t)) + "\n")
PY
tar xJf gpu-run/tab/programs.tar.xz -C $W t1024-adamw-dp t1024-adamw-nodp t8192-sgd-dp
for p in t1024-adamw-dp t1024-adamw-nodp t8192-sgd-dp; do
  mv $W/$p $W/new-$p; gzip -dc gpu-run/ab/old-$p.gz > $W/old-$p; chmod +x $W/old-$p $W/new-$p
done
for round in 1 2 3; do
  for p in t1024-adamw-dp t1024-adamw-nodp t8192-sgd-dp; do
    d=$W/d1024.tok; [[ $p == t8192* ]] && d=$W/d8192.tok
    order="old new"; [ $round = 2 ] && order="new old"
    for v in $order; do
      $W/$v-$p --data $d --steps 33 --metrics $R/$v-$p-$round.jsonl --quiet > $R/$v-$p-$round.txt 2>&1
      python3 - $R/$v-$p-$round.jsonl $v $p $round <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
t = rows[3:]
print("%s %s round %s: median tokens/s %.0f, peak %.3f GiB" % (sys.argv[2], sys.argv[3], sys.argv[4],
      statistics.median(r["tokens_per_s"] for r in t), max(r["memory_bytes"] for r in rows) / 2**30))
PY
    done
  done
done | tee $R/ab.txt
date -u >> $R/gpu.txt
tar czf $OUT/all.tgz -C $OUT r
