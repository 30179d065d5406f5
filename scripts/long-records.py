#!/usr/bin/env python3
"""Packs the lines of a corpus into records of a fixed length in bytes.

Benchmarks measure full sequences: every record of the output is exactly
--bytes long (lines joined with spaces, the last one cut), so that a model
with --bytes + 1 tokens sees no padding. Deterministic for a given --seed.

    scripts/long-records.py corpus.txt --bytes 1023 --records 12000 > long.txt
"""
import argparse
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--bytes", type=int, default=1023)
    ap.add_argument("--records", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    lines = [l.strip() for l in open(a.corpus, encoding="ascii", errors="ignore") if l.strip()]
    if not lines:
        sys.exit("long-records: the corpus is empty")
    rng = random.Random(a.seed)
    out = sys.stdout
    for _ in range(a.records):
        record = ""
        while len(record) < a.bytes:
            record += (" " if record else "") + rng.choice(lines)
        out.write(record[:a.bytes] + "\n")


if __name__ == "__main__":
    main()
