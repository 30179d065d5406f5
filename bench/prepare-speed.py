#!/usr/bin/env python3
"""The data path's speed: dpc-prepare's tokenization and the C++ reader.

    .venv/bin/python bench/prepare-speed.py [--build build] [--mb 20]
        [--tokenizer DIR] [--big-gb 4] [--seconds 20]

1. Tokenization: dpc-prepare on MB megabytes of generated English-like text
   (one record per line) and on the same text as prompt/completion JSON
   lines, with each engine (--engine tokenizers with RAYON_NUM_THREADS=1 and
   with every core; --engine tiktoken, one thread, where tiktoken is
   installed). For each: wall time, CPU time (user + system of the process),
   MB/s over each, tokens/s; and each tokenizer alone (the same lines, no
   file I/O) to show what the tokenizer itself costs. Without a build
   (--build has no bin/dpc-prepare) it runs tools/dpc-prepare's source.
2. Reading: a token file of 4 GB (and a small one, 40 MB) with random ids in
   records of 64 to 1025 tokens, written with dpc-prepare's writer into
   /tmp, read by bench/token-file-read.cpp (built here against
   runtime/driver/TokenFile.cpp): micro-batches of 8 x 1024 from records
   drawn at random for SECONDS, tokens/s and resident memory (RssAnon,
   RssFile). The files are removed afterwards.

Prints tables (markdown) to stdout. Needs the .venv of scripts/setup-venv.sh
(tokenizers, numpy) and a built dpc-prepare.
"""

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "dpc-prepare"))

from tokenfile import TokenFileWriter  # noqa: E402


def load_script(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_corpus(directory, megabytes):
    """Generated text (the test tokenizer's generator, another seed) as
    lines and as prompt/completion JSON lines."""
    maker = load_script("maker", os.path.join(ROOT, "scripts",
                                              "make-test-tokenizer.py"))
    lines = maker.corpus(random.Random(1), int(megabytes * 1e6))
    text = os.path.join(directory, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    jsonl = os.path.join(directory, "corpus.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for i, line in enumerate(lines):
            cut = len(line) // 3
            f.write(json.dumps({"prompt": line[:cut],
                                "completion": line[cut:],
                                "user": i % 1000}) + "\n")
    return text, jsonl


def token_count(path):
    """The tokens of a token file, from its metadata."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return int(json.loads(f.read(size))["__metadata__"]["tokens"])


def timed(command, env):
    """(wall s, CPU s, peak resident MB) of a child process."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, command)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


RAW_ENCODE = """
import sys, time
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().split("\\n")
start, cpu = time.perf_counter(), time.process_time()
tokens = 0
for i in range(0, len(lines), 8192):
    ids = [e.ids for e in t.encode_batch_fast(lines[i:i + 8192])]
    tokens += sum(map(len, ids))
print(time.perf_counter() - start, time.process_time() - cpu, tokens)
"""


RAW_TIKTOKEN = """
import sys, time
sys.path.insert(0, sys.argv[3])
import tiktoken_engine
import json
enc, why = tiktoken_engine.convert(json.load(open(sys.argv[1], encoding="utf-8")))
if enc is None:
    sys.exit(why)
lines = open(sys.argv[2], encoding="utf-8").read().split("\\n")
start, cpu = time.perf_counter(), time.process_time()
tokens = sum(len(enc.encode_ordinary(line)) for line in lines)
print(time.perf_counter() - start, time.process_time() - cpu, tokens)
"""


def bench_tokenize(args, work):
    text, jsonl = write_corpus(work, args.mb)
    prepare = [os.path.join(args.build, "bin", "dpc-prepare")]
    if not os.path.exists(prepare[0]):  # no build (a GPU machine): the source
        prepare = [sys.executable,
                   os.path.join(ROOT, "tools", "dpc-prepare", "dpc_prepare.py")]
    cores = os.cpu_count()
    rows = []
    try:
        import tiktoken  # noqa: F401
        engines = ("tokenizers", "tiktoken")
    except ImportError:
        engines = ("tokenizers",)
    for name, path in (("text lines", text), ("prompt/completion", jsonl)):
        size = os.path.getsize(path)
        for engine in engines:
            # tiktoken's engine encodes on the calling thread only.
            for threads in (1, cores) if engine == "tokenizers" else (1,):
                env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
                out = os.path.join(work, "out.tokens")
                wall, cpu, peak = timed(
                    prepare + ["--quiet", "--engine", engine, "--tokenizer",
                               args.tokenizer, path, "-o", out], env)
                rows.append((f"dpc-prepare --engine {engine}, {name}", threads,
                             size, wall, cpu, token_count(out), f"{peak:.0f}"))
    size = os.path.getsize(text)
    tokenizer_json = os.path.join(args.tokenizer, "tokenizer.json")
    for threads in (1, cores):
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        raw = subprocess.run(
            [sys.executable, "-c", RAW_ENCODE, tokenizer_json, text],
            env=env, check=True, capture_output=True, text=True)
        wall, cpu, tokens = map(float, raw.stdout.split())
        rows.append(("tokenizers alone (encode only), text lines", threads,
                     size, wall, cpu, tokens, "-"))
    if "tiktoken" in engines:
        raw = subprocess.run(
            [sys.executable, "-c", RAW_TIKTOKEN, tokenizer_json, text,
             os.path.join(ROOT, "tools", "dpc-prepare")],
            check=True, capture_output=True, text=True)
        wall, cpu, tokens = map(float, raw.stdout.split())
        rows.append(("tiktoken alone (encode only), text lines", 1, size,
                     wall, cpu, tokens, "-"))
    print(f"Tokenization: {args.mb:g} MB of generated text, tokenizer "
          f"{args.tokenizer}, {cores} cores\n")
    print("| what | threads | MB | wall s | MB/s | CPU s | MB per CPU-s |"
          " tokens/s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for what, threads, size, wall, cpu, tokens, peak in rows:
        print(f"| {what} | {threads} | {size / 1e6:.1f} | {wall:.1f} | "
              f"{size / 1e6 / wall:.2f} | {cpu:.1f} | {size / 1e6 / cpu:.2f} "
              f"| {tokens / wall:,.0f} | {peak} |")
    print()


def write_token_file(path, gigabytes, vocab=32000, seed=5):
    """Random ids in records of 64..1025 tokens (5 bytes a token)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    pool = array("I", rng.integers(0, vocab, 1 << 22,
                                   dtype=np.uint32).tobytes())
    lengths = rng.integers(64, 1026, 1 << 20)
    writer = TokenFileWriter(path)
    target = gigabytes * 1e9 / 5
    at = 0
    i = 0
    while writer.tokens < target:
        n = int(lengths[i % len(lengths)])
        i += 1
        if at + n > len(pool):
            at = 0
        mask = b"\x00" * (n // 4) + b"\x01" * (n - n // 4)
        writer.add(pool[at:at + n], mask)
        at += n
    writer.finish({"vocab_size": vocab, "eos_id": 0, "users": 0,
                   "tokenizer": "synthetic"})


def bench_read(args, work):
    binary = os.path.join(work, "token-file-read")
    cxx = os.environ.get("CXX", "c++")
    driver = os.path.join(ROOT, "runtime", "driver")
    subprocess.run([cxx, "-O2", "-std=c++17", "-I", driver,
                    os.path.join(ROOT, "bench", "token-file-read.cpp"),
                    os.path.join(driver, "TokenFile.cpp"),
                    os.path.join(driver, "Json.cpp"), "-o", binary],
                   check=True)
    big_dir = tempfile.mkdtemp(prefix="dpc-bench-tokens-", dir="/tmp")
    rows = []
    try:
        for gb in (0.04, args.big_gb):
            path = os.path.join(big_dir, f"synthetic-{gb:g}GB.tokens")
            start = time.perf_counter()
            write_token_file(path, gb)
            written = time.perf_counter() - start
            out = subprocess.run([binary, path, "1024", "8",
                                  str(args.seconds)], check=True,
                                 capture_output=True, text=True).stdout
            result = json.loads(out)
            result["write_s"] = written
            rows.append(result)
            os.unlink(path)
    finally:
        shutil.rmtree(big_dir)
    print(f"Reading: micro-batches of 8 x 1024 from random records, "
          f"{args.seconds:g} s, one thread\n")
    print("| file GB | records | write s | open s | tokens/s | RssAnon MB "
          "before / opened / end | RssFile MB opened / end |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mb = lambda m, k: m[k] / 1024  # noqa: E731
        print(f"| {r['file_bytes'] / 1e9:.2f} | {r['records']:,} | "
              f"{r['write_s']:.1f} | {r['open_s']:.3f} | "
              f"{r['tokens_per_s']:,.0f} | "
              f"{mb(r['memory_before'], 'rss_anon_kb'):.1f} / "
              f"{mb(r['memory_opened'], 'rss_anon_kb'):.1f} / "
              f"{mb(r['memory_end'], 'rss_anon_kb'):.1f} | "
              f"{mb(r['memory_opened'], 'rss_file_kb'):.1f} / "
              f"{mb(r['memory_end'], 'rss_file_kb'):.1f} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--mb", type=float, default=20,
                        help="megabytes of text to tokenize (default 20)")
    parser.add_argument("--tokenizer",
                        default=os.path.join(ROOT, "test", "fixtures",
                                             "tokenizer"),
                        help="model folder (default: the test tokenizer)")
    parser.add_argument("--big-gb", type=float, default=4,
                        help="size of the large token file (default 4)")
    parser.add_argument("--seconds", type=float, default=20,
                        help="seconds of reading per file (default 20)")
    parser.add_argument("--skip", choices=("tokenize", "read"),
                        help="leave one part out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpc-bench-") as work:
        if args.skip != "tokenize":
            bench_tokenize(args, work)
        if args.skip != "read":
            bench_read(args, work)


if __name__ == "__main__":
    main()
