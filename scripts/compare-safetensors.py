#!/usr/bin/env python3
"""Compares the tensors of two safetensors files (f32 or f64), or the
parameters of two dpc checkpoints.

Prints, per tensor and overall, the relative difference ||a - b|| / ||b|| and
the largest absolute difference; exits 1 if a tensor is missing or its shape
differs, or if --tolerance is given and a relative difference exceeds it.

    scripts/compare-safetensors.py gpu.safetensors cpu.safetensors --tolerance 1e-4

A directory argument is a checkpoint (DIR/step-NNNNNNNN, or a --save DIR
whose `latest` names one): its parameters, put together from the rank files
by manifest.json's ranges (docs/training-program.md), or read from
params.safetensors in a checkpoint of format version 1.
"""
import argparse
import array
import json
import math
import os
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = {"F32": "f", "F64": "d"}.get(info["dtype"])
        if code is None:
            sys.exit(f"{path}: {name} has dtype {info['dtype']}, expected F32 or F64")
        begin, end = info["data_offsets"]
        values = array.array(code)
        values.frombytes(body[begin:end])
        tensors[name] = (info["shape"], values)
    return tensors


def load_checkpoint(path):
    if not os.path.exists(os.path.join(path, "state.json")):
        with open(os.path.join(path, "latest")) as f:
            path = os.path.join(path, f.read().strip())
    manifest_path = os.path.join(path, "manifest.json")
    if not os.path.exists(manifest_path):
        return load(os.path.join(path, "params.safetensors"))
    with open(manifest_path) as f:
        manifest = json.load(f)
    code = {"F32": "f", "F64": "d"}[manifest["dtype"]]
    master = {u["name"]: array.array(code, [math.nan]) * u["numel"]
              for u in manifest["units"]}
    for shard in manifest["shards"]:
        tensors = load(os.path.join(path, shard["file"]))
        for unit, (lo, hi) in shard["ranges"].items():
            shape, values = tensors[unit + ".master"]
            if shape != [hi - lo]:
                sys.exit(f"{path}: {shard['file']} holds {unit}.master of "
                         f"shape {shape}, the manifest says [{hi - lo}]")
            master[unit][lo:hi] = values
    params = {}
    for p in manifest["params"]:
        numel = math.prod(p["shape"])
        params[p["name"]] = (p["shape"],
                             master[p["unit"]][p["offset"]:p["offset"] + numel])
    return params


def load_any(path):
    return load_checkpoint(path) if os.path.isdir(path) else load(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tolerance", type=float)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    a, b = load_any(args.a), load_any(args.b)
    status = 0
    if set(a) != set(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    num = den = worst_abs = 0.0
    worst_rel, worst_name = 0.0, ""
    for name in sorted(a):
        (sa, va), (sb, vb) = a[name], b[name]
        if sa != sb:
            print(f"{name}: shape {sa} against {sb}")
            status = 1
            continue
        d2 = sum((x - y) ** 2 for x, y in zip(va, vb))
        n2 = sum(y * y for y in vb)
        mx = max((abs(x - y) for x, y in zip(va, vb)), default=0.0)
        rel = math.sqrt(d2 / n2) if n2 > 0 else math.sqrt(d2)
        num, den, worst_abs = num + d2, den + n2, max(worst_abs, mx)
        if rel > worst_rel:
            worst_rel, worst_name = rel, name
        if not args.quiet:
            print(f"{name:24s} relative {rel:.3e}  max abs {mx:.3e}")
        if args.tolerance is not None and rel > args.tolerance:
            status = 1
    total = math.sqrt(num / den) if den > 0 else 0.0
    print(f"all tensors: relative {total:.3e}, worst tensor {worst_name} "
          f"{worst_rel:.3e}, max abs {worst_abs:.3e}")
    return status


if __name__ == "__main__":
    sys.exit(main())
