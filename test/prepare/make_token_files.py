#!/usr/bin/env python3
"""Writes the token files the C++ reader's tests (test/driver/TokenFileTest)
read, with dpc-prepare, and what they must contain, read back through the
safetensors package:

    make_token_files.py DPC_PREPARE TOKENIZER_DIR INPUTS_DIR OUT_DIR

OUT_DIR/NAME.tokens is dpc-prepare's file for Inputs/NAME.*, and
OUT_DIR/NAME.expected holds per record three lines: "USER LENGTH" (USER -1
without users), the token ids and the loss mask bytes, space-separated.
"""

import os
import subprocess
import sys

from safetensors import safe_open

INPUTS = ("records.jsonl", "lines.txt")


def main():
    prepare, tokenizer, inputs, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    for name in INPUTS:
        stem = os.path.splitext(name)[0]
        tokens = os.path.join(out, stem + ".tokens")
        subprocess.run([prepare, "--quiet", "--tokenizer", tokenizer,
                        os.path.join(inputs, name), "-o", tokens], check=True)
        with safe_open(tokens, "numpy") as f:
            offsets = f.get_tensor("offsets")
            ids = f.get_tensor("tokens")
            mask = f.get_tensor("loss_mask")
            users = f.get_tensor("users") if "users" in f.keys() else None
        with open(os.path.join(out, stem + ".expected"), "w") as f:
            for r in range(len(offsets) - 1):
                begin, end = offsets[r], offsets[r + 1]
                user = -1 if users is None else users[r]
                f.write(f"{user} {end - begin}\n")
                f.write(" ".join(map(str, ids[begin:end])) + "\n")
                f.write(" ".join(map(str, mask[begin:end])) + "\n")


if __name__ == "__main__":
    main()
