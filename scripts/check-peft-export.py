#!/usr/bin/env python3
"""Loads a peft adapter that DPC exported with transformers and peft and
compares their loss with DPC's (not run by CI: it needs torch, transformers
and peft; .venv-fixtures of scripts/make-hf-fixtures.py has them).

    .venv-fixtures/bin/python scripts/check-peft-export.py BASE ADAPTER TOKENS \\
        [--merged MERGED] [--expect LOSS] [--tolerance 1e-5]

BASE is the Hugging Face folder the program was imported from (--init),
ADAPTER the folder `--export` (or `dpc export`) wrote for a program with
LoRA, TOKENS a .tok file (one record of T + 1 token ids a line, the
--eval-data of the run). The script prints the mean next-token
cross-entropy over the records' targets (eval_loss as DPC computes it) of
PeftModel.from_pretrained(BASE, ADAPTER) in float32 and float64, and with
--merged that of AutoModelForCausalLM.from_pretrained(MERGED) (the
--export-merged folder). With --expect (DPC's eval_loss after the last
step), it exits 1 when a relative difference exceeds the tolerance.
"""
import argparse
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def mean_loss(model, tokens, dtype):
    model = model.to(dtype)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=tokens[:, :-1]).logits
    losses = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    # Every record has T targets: the mean over all of them is DPC's
    # eval_loss (sum of n_i loss_i over sum of n_i).
    return float(losses.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("adapter")
    ap.add_argument("tokens")
    ap.add_argument("--merged")
    ap.add_argument("--expect", type=float)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    with open(args.tokens) as f:
        tokens = torch.tensor([[int(t) for t in line.split()]
                               for line in f if line.strip()])
    worst = 0.0
    results = []
    for dtype in (torch.float32, torch.float64):
        base = AutoModelForCausalLM.from_pretrained(args.base, dtype=dtype)
        model = PeftModel.from_pretrained(base, args.adapter)
        results.append((f"peft {dtype}", mean_loss(model, tokens, dtype)))
        if args.merged:
            merged = AutoModelForCausalLM.from_pretrained(args.merged, dtype=dtype)
            results.append((f"merged {dtype}", mean_loss(merged, tokens, dtype)))
    for name, loss in results:
        line = f"{name}: loss {loss:.9f}"
        if args.expect is not None:
            err = abs(loss - args.expect) / abs(args.expect)
            worst = max(worst, err)
            line += f" DPC {args.expect:.9f} relative {err:.2e}"
        print(line)
    if args.expect is not None:
        print(f"largest relative difference {worst:.2e} "
              f"(tolerance {args.tolerance})")
        if worst > args.tolerance:
            sys.exit(1)


if __name__ == "__main__":
    main()
