#!/usr/bin/env python3
"""Prints the Llama 3 rope tables that ReferenceExtensionsTest.cpp compares
llama3InverseFrequencies with.

The numbers are transformers' own: the source of `_compute_llama3_parameters`
in transformers/modeling_rope_utils.py, run with numpy in place of torch (the
function needs only arange, where and elementwise arithmetic). numpy's
float64 stands for torch.float, so the table is transformers' formula in f64;
transformers itself evaluates it in float32, 1e-7 away. Run by hand, never by
CI; needs numpy (the project's .venv has it):

    pip download transformers==5.23.0 --no-deps -d /tmp/tf
    unzip -o -d /tmp/tf /tmp/tf/transformers-5.23.0-py3-none-any.whl \\
        transformers/modeling_rope_utils.py
    .venv/bin/python test/unit/reference/llama3_inv_freq.py \\
        /tmp/tf/transformers/modeling_rope_utils.py
"""
import ast
import math
import sys
import types
import typing

import numpy as np


class Tensor(np.ndarray):
    """An ndarray with torch's Tensor.to(device=, dtype=)."""

    def to(self, device=None, dtype=None):
        return self if dtype is None else self.astype(dtype).view(Tensor)


TORCH = types.SimpleNamespace(
    int64=np.int64, float=np.float64, where=np.where,
    arange=lambda *args, dtype=None: np.arange(*args, dtype=dtype).view(Tensor))


class Config:
    """The attributes of a PreTrainedConfig the function reads."""

    def __init__(self, theta, head_dim, factor, low, high, original):
        self.head_dim = head_dim
        self.rope_parameters = {
            "rope_type": "llama3", "rope_theta": theta, "factor": factor,
            "low_freq_factor": low, "high_freq_factor": high,
            "original_max_position_embeddings": original}

    def standardize_rope_params(self):
        pass


def load(path):
    """transformers' _compute_llama3_parameters, bound to the numpy torch."""
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "_compute_llama3_parameters")
    scope = {"math": math, "torch": TORCH, "Optional": typing.Optional}
    exec(compile(ast.Module([fn], []), path, "exec"), scope)
    return scope["_compute_llama3_parameters"]


def main():
    compute = load(sys.argv[1])
    # Llama 3.1 8B's config.json, and test/fixtures/hf/llama3-rope's.
    for name, args in [("kLlama31_8B", (500000.0, 128, 8.0, 1.0, 4.0, 8192)),
                       ("kLlama3RopeFixture", (500000.0, 8, 8.0, 1.0, 4.0, 16))]:
        inv_freq, attention_factor = compute(Config(*args))
        assert attention_factor == 1.0
        print(f"// theta, head_dim, factor, low, high, original = {args}")
        print(f"const double {name}[] = {{")
        print(",\n".join(f"    {x:.17g}" for x in inv_freq) + "};")


if __name__ == "__main__":
    main()
