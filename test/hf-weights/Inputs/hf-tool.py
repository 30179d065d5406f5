#!/usr/bin/env python3
"""The --init / --export tests' helper (standard library only: CI has no
torch, numpy or transformers).

  hf-tool.py tokens REFERENCE OUT [--record I]
      the reference.json sequences (or sequence I) as a .tok file
  hf-tool.py check-losses PROG INIT REFERENCE WORK [--tolerance R] [-- ARGS]
      runs PROG --init INIT --steps 0 --eval-data on each sequence of
      REFERENCE alone and on all of them, then one training step on all of
      them (the recipe must sample every record: q = 1), and compares
      eval_loss and the first step's loss with transformers' loss_f32 and
      loss_f64 (relative difference at most R, default 1e-4); prints the
      largest
  hf-tool.py compare A B [--rounded]
      A and B are Hugging Face folders (model.safetensors or shards with the
      index): the same tensor names and shapes, and byte-identical data; with
      --rounded, A's BF16 (F16) tensors are B's F32 ones rounded to nearest
      even
  hf-tool.py check-adapter ADAPTER CKPT REFERENCE
      ADAPTER is a peft adapter folder DPC exported, CKPT the checkpoint
      directory (step-...) of the same parameters, REFERENCE an
      adapter_config.json that peft wrote: the adapter's tensors are the
      checkpoint's lora_A and lora_B parameters under their peft names, of
      their shapes, F32, with the same values (bytes); adapter_config.json
      has every key of REFERENCE and the checkpoint's r, lora_alpha and
      target_modules; prints what it checked
  hf-tool.py eval-losses METRICS... [--tolerance R]
      the last eval_loss of each metrics file: all within R (relative) of
      the first's; prints the largest difference
  hf-tool.py copy SRC DST
      copies a folder's files (config.json, weights, index)
  hf-tool.py edit FILE (drop NAME | add NAME | reshape NAME | truncate |
                        retype NAME DTYPE | nan NAME | to-bf16 | to-f16)
      edits a safetensors file in place: removes a tensor, adds a 4-element
      F32 tensor, swaps a 2-d tensor's dimensions (a [1, numel] tensor for
      1-d), cuts the data's last 8 bytes, changes a tensor's dtype name, sets
      an F32 tensor's element 1 to NaN, or stores every F32 tensor as BF16 (rounded to nearest even) or F16
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    return header, data[8 + size:]


def write_file(path, header, tensors):
    """tensors: [(name, dtype, shape, bytes)] in order."""
    out = {}
    if "__metadata__" in header:
        out["__metadata__"] = header["__metadata__"]
    offset = 0
    for name, dtype, shape, data in tensors:
        out[name] = {"dtype": dtype, "shape": shape,
                     "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, data in tensors:
            f.write(data)


def tensors_of(path):
    header, body = read_file(path)
    items = [(k, v) for k, v in header.items() if k != "__metadata__"]
    items.sort(key=lambda kv: kv[1]["data_offsets"][0])
    return header, [(k, v["dtype"], v["shape"],
                     body[v["data_offsets"][0]:v["data_offsets"][1]])
                    for k, v in items]


def folder_tensors(folder):
    """{name: (dtype, shape, bytes)} of a Hugging Face folder."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            index = json.load(f)
        files = [os.path.join(folder, name)
                 for name in sorted(set(index["weight_map"].values()))]
    out = {}
    for path in files:
        for name, dtype, shape, data in tensors_of(path)[1]:
            out[name] = (dtype, shape, data)
    return out


def bf16_of_f32(data):
    """Rounds F32 bytes to BF16 bytes, nearest even."""
    out = bytearray()
    for (bits,) in struct.iter_unpack("<I", data):
        if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
            top = (bits >> 16) | 0x40
        else:
            top = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out += struct.pack("<H", top & 0xFFFF)
    return bytes(out)


def f16_of_f32(data):
    values = struct.unpack(f"<{len(data) // 4}f", data)
    return struct.pack(f"<{len(values)}e", *values)


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited with {result.returncode}:\n"
                 f"{result.stderr}")


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def relative(a, b):
    return abs(a - b) / abs(b)


def check_losses(args):
    prog, init, reference, work = args[:4]
    rest = args[4:]
    tolerance = 1e-4
    if rest[:1] == ["--tolerance"]:
        tolerance = float(rest[1])
        rest = rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    with open(reference) as f:
        ref = json.load(f)
    os.makedirs(work, exist_ok=True)
    expected = ref["loss_f32"]
    exact = ref["loss_f64"]
    worst = 0.0

    def eval_loss(records, name):
        tok = os.path.join(work, name + ".tok")
        with open(tok, "w") as f:
            for r in records:
                f.write(" ".join(map(str, ref["tokens"][r])) + "\n")
        out = os.path.join(work, name + ".jsonl")
        if os.path.exists(out):
            os.remove(out)
        run([prog, "--init", init, "--steps", "0", "--eval-data", tok,
             "--metrics", out, "--quiet"] + rest)
        lines = [m for m in metrics(out) if "eval_loss" in m]
        if len(lines) != 1 or lines[0]["step"] != 0:
            sys.exit(f"{out}: expected one evaluation at step 0: {lines}")
        return lines[0]["eval_loss"]

    for r in range(len(expected)):
        got = eval_loss([r], f"record{r}")
        err = max(relative(got, expected[r]), relative(got, exact[r]))
        print(f"record {r}: eval_loss {got:.9f} transformers {expected[r]:.9f}"
              f" (f64 {exact[r]:.9f}) relative {err:.2e}")
        worst = max(worst, err)
        if err > tolerance:
            sys.exit(f"record {r}: relative difference {err:.3e} > "
                     f"{tolerance}")
    every = list(range(len(expected)))
    mean = sum(expected) / len(expected)
    got = eval_loss(every, "all")
    err = relative(got, mean)
    print(f"all: eval_loss {got:.9f} mean {mean:.9f} relative {err:.2e}")
    worst = max(worst, err)
    if err > tolerance:
        sys.exit(f"all records: relative difference {err:.3e} > {tolerance}")

    # The first training step's loss: the per-sample losses of the sampled
    # batch (q = 1: every record) before the update.
    out = os.path.join(work, "train.jsonl")
    if os.path.exists(out):
        os.remove(out)
    # The RDP accountant: only the loss is checked, and calibrating sigma
    # with PLD took 2.3 of the run's 2.4 s.
    run([prog, "--init", init, "--data", os.path.join(work, "all.tok"),
         "--steps", "1", "--metrics", out, "--quiet", "--accountant", "rdp"]
        + rest)
    step = [m for m in metrics(out) if "loss" in m][0]
    if step["samples"] != len(expected):
        sys.exit(f"step 1 sampled {step['samples']} records, not all "
                 f"{len(expected)}: the recipe must have q = 1")
    err = relative(step["loss"], mean)
    print(f"step 1: loss {step['loss']:.9f} mean {mean:.9f} "
          f"relative {err:.2e}")
    worst = max(worst, err)
    if err > tolerance:
        sys.exit(f"step 1: relative difference {err:.3e} > {tolerance}")
    print(f"largest relative difference {worst:.2e} (tolerance {tolerance})")


def compare(args):
    a_dir, b_dir = args[0], args[1]
    rounded = "--rounded" in args[2:]
    a, b = folder_tensors(a_dir), folder_tensors(b_dir)
    if set(a) != set(b):
        sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
    for name in sorted(a):
        (adt, ashape, adata), (bdt, bshape, bdata) = a[name], b[name]
        if ashape != bshape:
            sys.exit(f"{name}: shape {ashape} vs {bshape}")
        if rounded and adt in ("BF16", "F16") and bdt == "F32":
            bdata = (bf16_of_f32 if adt == "BF16" else f16_of_f32)(bdata)
            bdt = adt
        if adt != bdt:
            sys.exit(f"{name}: dtype {adt} vs {bdt}")
        if adata != bdata:
            sys.exit(f"{name}: the data differs")
    print(f"{len(a)} tensors identical" + (" (rounded)" if rounded else ""))


def edit(args):
    path, op = args[0], args[1]
    header, tensors = tensors_of(path)
    if op == "truncate":
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:-8])
        return
    if op == "drop":
        tensors = [t for t in tensors if t[0] != args[2]]
    elif op == "add":
        tensors.append((args[2], "F32", [4], struct.pack("<4f", 1, 2, 3, 4)))
    elif op == "reshape":
        tensors = [(n, d, (s[::-1] if len(s) == 2 else [1] + s)
                    if n == args[2] else s, x) for n, d, s, x in tensors]
    elif op == "retype":
        tensors = [(n, args[3] if n == args[2] else d, s, x)
                   for n, d, s, x in tensors]
    elif op == "nan":
        tensors = [(n, d, s, x[:4] + struct.pack("<f", math.nan) + x[8:])
                   if n == args[2] else (n, d, s, x)
                   for n, d, s, x in tensors]
    elif op in ("to-bf16", "to-f16"):
        convert = bf16_of_f32 if op == "to-bf16" else f16_of_f32
        name = "BF16" if op == "to-bf16" else "F16"
        tensors = [(n, name, s, convert(x)) if d == "F32" else (n, d, s, x)
                   for n, d, s, x in tensors]
    else:
        sys.exit(f"unknown edit '{op}'")
    write_file(path, header, tensors)


def copy(args):
    src, dst = args
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name != "reference.json":
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))


def tokens(args):
    with open(args[0]) as f:
        ref = json.load(f)
    records = ref["tokens"]
    if args[2:3] == ["--record"]:
        records = [records[int(args[3])]]
    with open(args[1], "w") as f:
        for r in records:
            f.write(" ".join(map(str, r)) + "\n")


def checkpoint_values(ckpt):
    """{parameter: (shape, F32 bytes)} of a DPC checkpoint's master values,
    and its manifest."""
    with open(os.path.join(ckpt, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest["dtype"] != "F32":
        sys.exit(f"{ckpt}: dtype {manifest['dtype']}, expected F32")
    units = {u["name"]: bytearray(4 * u["numel"]) for u in manifest["units"]}
    for shard in manifest["shards"]:
        header, body = read_file(os.path.join(ckpt, shard["file"]))
        for unit, (begin, end) in shard["ranges"].items():
            info = header[unit + ".master"]
            lo = info["data_offsets"][0]
            units[unit][4 * begin:4 * end] = body[lo:lo + 4 * (end - begin)]
    out = {}
    for p in manifest["params"]:
        n = 1
        for d in p["shape"]:
            n *= d
        data = units[p["unit"]][4 * p["offset"]:4 * (p["offset"] + n)]
        out[p["name"]] = (p["shape"], bytes(data))
    return out, manifest


def check_adapter(args):
    adapter, ckpt, reference = args
    values, manifest = checkpoint_values(ckpt)
    sources = json.loads(manifest["hf_sources"])
    lora = json.loads(manifest["lora"])
    peft = {name: s["lora"]["peft"] for name, s in sources.items()
            if "lora" in s and "peft" in s["lora"]}
    if not peft:
        sys.exit(f"{ckpt}: no LoRA adapters")
    header, tensors = tensors_of(
        os.path.join(adapter, "adapter_model.safetensors"))
    if header.get("__metadata__") != {"format": "pt"}:
        sys.exit(f"metadata {header.get('__metadata__')}, peft writes "
                 "{'format': 'pt'}")
    written = {name: (dtype, shape, data)
               for name, dtype, shape, data in tensors}
    if set(written) != set(peft.values()):
        sys.exit(f"tensors {sorted(set(written) ^ set(peft.values()))} are "
                 "in one of the adapter and the checkpoint only")
    for param, name in sorted(peft.items()):
        dtype, shape, data = written[name]
        want_shape, want = values[param]
        if dtype != "F32" or shape != want_shape:
            sys.exit(f"{name}: {dtype} {shape}, parameter '{param}' is F32 "
                     f"{want_shape}")
        if data != want:
            sys.exit(f"{name}: the values differ from parameter '{param}'")
        if not name.startswith("base_model.model.") or not name.endswith(
                (".lora_A.weight", ".lora_B.weight")):
            sys.exit(f"{name} is not a peft LoRA tensor name")
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        config = json.load(f)
    with open(reference) as f:
        expected = json.load(f)
    if set(config) != set(expected):
        sys.exit(f"adapter_config.json keys {sorted(set(config) ^ set(expected))}"
                 " are in one of it and peft's only")
    want = {"peft_type": "LORA", "r": lora["r"],
            "lora_alpha": lora["lora_alpha"], "task_type": "CAUSAL_LM",
            "bias": "none", "fan_in_fan_out": False, "lora_dropout": 0.0,
            "use_rslora": False, "use_dora": False}
    for key, value in want.items():
        if config[key] != value:
            sys.exit(f"adapter_config.json: {key} is {config[key]!r}, "
                     f"expected {value!r}")
    if sorted(config["target_modules"]) != sorted(lora["target_modules"]):
        sys.exit(f"target_modules {config['target_modules']}, the program's "
                 f"{lora['target_modules']}")
    if not os.path.isabs(config["base_model_name_or_path"] or ""):
        sys.exit("base_model_name_or_path is not an absolute path")
    print(f"{len(peft)} adapter tensors identical to the checkpoint; r "
          f"{config['r']}, lora_alpha {config['lora_alpha']}, target_modules "
          f"{sorted(config['target_modules'])}; {len(config)} keys as peft's")


def eval_losses(args):
    tolerance = 0.0
    if "--tolerance" in args:
        i = args.index("--tolerance")
        tolerance = float(args[i + 1])
        args = args[:i] + args[i + 2:]
    losses = []
    for path in args:
        evals = [m for m in metrics(path) if "eval_loss" in m]
        losses.append(evals[-1]["eval_loss"])
    worst = max(relative(x, losses[0]) for x in losses)
    for path, loss in zip(args, losses):
        print(f"{os.path.basename(path)}: eval_loss {loss:.12f}")
    print(f"largest relative difference {worst:.2e} (tolerance {tolerance})")
    if worst > tolerance:
        sys.exit(f"relative difference {worst:.3e} > {tolerance}")


def main():
    command, args = sys.argv[1], sys.argv[2:]
    {"check-losses": check_losses, "compare": compare, "edit": edit,
     "copy": copy, "tokens": tokens, "check-adapter": check_adapter,
     "eval-losses": eval_losses}[command](args)


if __name__ == "__main__":
    main()
