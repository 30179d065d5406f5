#!/usr/bin/env python3
"""Loads a folder written by --export or dpc export with transformers and
checks that it is the model DPC trained.

Run by hand, never by CI (it needs torch and transformers; the fixtures'
environment has them, scripts/make-hf-fixtures.py says how to make one):

    .venv-fixtures/bin/python scripts/check-hf-export.py EXPORTED \\
        --tokens test/fixtures/hf/llama/reference.json [--metrics m.jsonl]

AutoModelForCausalLM.from_pretrained(EXPORTED) must load every tensor (no
missing, unexpected or mismatched key) and AutoConfig must read its config.
The sequences of --tokens (reference.json's form) are run through the model
in float64; the mean next-token cross-entropy over all their targets is
printed and, with --metrics, compared with the last eval_loss of that
metrics file (a run whose --eval-data held the same sequences): relative
difference at most --tolerance (1e-4). With --expect-reference the
per-sequence losses are compared with reference.json's loss_f64 instead (an
export of the fixture's own weights, --steps 0). Exit status 0 when every
check holds, 1 otherwise.
"""
import argparse
import json
import sys

import torch
import transformers


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exported")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--metrics")
    ap.add_argument("--expect-reference", action="store_true")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()

    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        args.exported, output_loading_info=True, dtype=torch.float64)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        print(f"{args.exported}: loading reported {problems}")
        return 1
    model.eval()
    with open(args.tokens) as f:
        ref = json.load(f)
    tokens = torch.tensor(ref["tokens"])
    with torch.no_grad():
        logits = model(tokens[:, :-1]).logits
    losses = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(dim=1)
    mean = losses.mean().item()
    print(f"{type(model).__name__} from {args.exported}: "
          f"losses {[round(x, 9) for x in losses.tolist()]}, mean {mean:.9f}")
    status = 0
    if args.expect_reference:
        for i, (got, want) in enumerate(zip(losses.tolist(), ref["loss_f64"])):
            err = abs(got - want) / abs(want)
            print(f"sequence {i}: relative difference to loss_f64 {err:.2e}")
            if err > args.tolerance:
                status = 1
    if args.metrics:
        with open(args.metrics) as f:
            evals = [json.loads(line) for line in f
                     if line.strip() and "eval_loss" in line]
        if not evals:
            print(f"{args.metrics}: no eval_loss line")
            return 1
        want = evals[-1]["eval_loss"]
        err = abs(mean - want) / abs(want)
        print(f"DPC eval_loss after step {evals[-1]['step']}: {want:.9f}, "
              f"relative difference {err:.2e}")
        if err > args.tolerance:
            status = 1
    print("ok" if status == 0 else "FAILED")
    return status


if __name__ == "__main__":
    sys.exit(main())
