#!/usr/bin/env python3
"""Writes the fortunes of Debian's `fortunes` packages as a training corpus.

One fortune is one record (the privacy unit) and one line of the output:
its lines are joined with spaces, runs of blanks collapsed, and only
fortunes of printable ASCII that fit the model (at most --max-bytes bytes)
are kept, each once.

    scripts/fortunes-corpus.py --max-bytes 127 > corpus.txt
"""
import argparse
import glob
import os
import sys


def fortunes(directory):
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path) or os.path.islink(path):
            continue
        # Pictures, not sentences: joined into one line they are noise.
        if os.path.basename(path) == "ascii-art":
            continue
        try:
            text = open(path, encoding="latin-1").read()
        except OSError:
            continue
        for entry in text.split("\n%\n"):
            yield " ".join(entry.replace("%", " ").split())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/usr/share/games/fortunes")
    ap.add_argument("--max-bytes", type=int, default=127)
    ap.add_argument("--min-bytes", type=int, default=8)
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        sys.exit(f"fortunes-corpus: {a.dir} not found (install the fortunes package)")
    seen = set()
    kept = 0
    for line in fortunes(a.dir):
        if not (a.min_bytes <= len(line) <= a.max_bytes):
            continue
        if not all(32 <= ord(c) < 127 for c in line) or line in seen:
            continue
        seen.add(line)
        print(line)
        kept += 1
    if kept == 0:
        sys.exit("fortunes-corpus: no fortune fits")
    print(f"fortunes-corpus: {kept} records", file=sys.stderr)


if __name__ == "__main__":
    main()
