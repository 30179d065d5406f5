#!/usr/bin/env python3
"""Writes a synthetic classification data set as CSV: features, then label.

Each class is a Gaussian blob around its own random center; one line is one
record. Deterministic for a given --seed.

    scripts/blobs-csv.py --features 64 --classes 10 --records 5000 > blobs.csv
"""
import argparse
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--spread", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    centers = [[rng.gauss(0, 1) for _ in range(a.features)] for _ in range(a.classes)]
    for _ in range(a.records):
        label = rng.randrange(a.classes)
        x = [c + rng.gauss(0, a.spread) for c in centers[label]]
        print(",".join(f"{v:.5f}" for v in x) + f",{label}")


if __name__ == "__main__":
    main()
