#!/usr/bin/env python3
"""Summarises a training program's Chrome trace (`--trace FILE`) per rank.

For each rank: the optimizer steps and micro-steps the trace holds, the host
time of the steps (first `fill_inputs` to the end of the last `dp_apply`),
and the exposed communication: the `wait_for_communication` spans of the
"compute waits for communication" track (thread 2), which the backend
records when the compute stream waits for the communication stream
(docs/training-program.md, "Exposed communication"). The first optimizer
step holds the warm-up and the CUDA-graph captures; the columns "after
step 1" leave it out.

    scripts/trace-summary.py trace.json
"""

import argparse
import json
import sys


def summarise(events):
    ranks = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        r = ranks.setdefault(e["pid"], {"apply": [], "micro": [], "fill": [],
                                        "waits": []})
        name = e["name"]
        span = (e["ts"], e["ts"] + e["dur"])
        if name == "dp_apply":
            r["apply"].append(span)
        elif name == "dp_microstep":
            r["micro"].append(span)
        elif name == "fill_inputs":
            r["fill"].append(span)
        elif name == "wait_for_communication":
            r["waits"].append(span)
    return ranks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    args = parser.parse_args()
    try:
        with open(args.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace-summary.py: cannot read {args.trace}: {e}")
    ranks = summarise(events)
    if not ranks:
        sys.exit(f"trace-summary.py: {args.trace} holds no spans")
    print("rank  steps  micro-steps  step time ms  exposed ms  exposed %"
          "  | after step 1: step time ms  exposed ms  exposed %  waits")
    for rank in sorted(ranks):
        r = ranks[rank]
        if not r["apply"] or not r["fill"]:
            print(f"{rank:4}  (no complete step)")
            continue
        begin = min(s[0] for s in r["fill"])
        end = max(s[1] for s in r["apply"])
        first_end = min(s[1] for s in r["apply"])
        total = end - begin
        exposed = sum(b - a for a, b in r["waits"])
        later = end - first_end
        later_waits = [(a, b) for a, b in r["waits"] if a >= first_end]
        later_exposed = sum(b - a for a, b in later_waits)
        print(f"{rank:4}  {len(r['apply']):5}  {len(r['micro']):11}  "
              f"{total / 1e3:12.1f}  {exposed / 1e3:10.1f}  "
              f"{100 * exposed / total:9.1f}  | {later / 1e3:26.1f}  "
              f"{later_exposed / 1e3:10.1f}  "
              f"{100 * later_exposed / later if later > 0 else 0:9.1f}  "
              f"{len(later_waits):5}")


if __name__ == "__main__":
    main()
