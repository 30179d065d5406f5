#!/usr/bin/env python3
"""A step's kernels in the steady state, from two kernel-times tables
(bench/kernel-times.cpp) of one program run for two step counts: the
difference of every kernel's calls and time, divided by the steps between
them, leaves out what runs once (initialization, the first step's capture,
warm-ups of smaller micro-steps, torch.compile's benchmarking).

    bench/kernel-times-steady.py short.md long.md STEPS [--rows N]

STEPS: the difference of the two runs' step counts. Prints the total kernel
time a step and the largest rows: ms a step, calls a step, us a call; then
the GPU's idle time a step and its largest gaps by the work around them
(the `idle:` rows of kernel-times).
"""
import argparse
import re


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\| `(.*)` \| (\d+) \| ([\d.]+) \|", line)
            if m:
                rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("short")
    ap.add_argument("long")
    ap.add_argument("steps", type=float)
    ap.add_argument("--rows", type=int, default=45)
    a = ap.parse_args()
    if a.steps <= 0:
        ap.error("STEPS must be > 0")
    short, long_ = load(a.short), load(a.long)
    rows = []
    for name in set(short) | set(long_):
        c0, t0 = short.get(name, (0, 0.0))
        c1, t1 = long_.get(name, (0, 0.0))
        rows.append((t1 - t0, c1 - c0, name))
    rows.sort(reverse=True)
    work = [r for r in rows if not r[2].startswith("idle: ")]
    idle = [r for r in rows if r[2].startswith("idle: ")]
    print(f"total {sum(r[0] for r in work) / a.steps:.2f} ms a step")
    show(work[:a.rows], a.steps, 100)
    if idle:
        print(f"\nidle {sum(r[0] for r in idle) / a.steps:.2f} ms a step")
        show(idle[:a.rows], a.steps, 200)


def show(rows, steps, width):
    for t, c, name in rows:
        per_call = t / c * 1000 if c else float("nan")
        print(f"{t / steps:8.3f} ms {c / steps:7.1f} calls {per_call:8.1f} us  {name[:width]}")


if __name__ == "__main__":
    main()
