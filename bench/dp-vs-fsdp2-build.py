#!/usr/bin/env python3
"""Builds the DPC training programs that bench/dp-vs-fsdp2.py runs.

For every shape, optimizer and DP setting: scripts/gen-llama.py writes the
model, this script replaces its recipe with the benchmark's, and
`dpc --backend cuda` compiles it. Run where dpc is built (`make build`); the
folder then travels to the GPU machine. A device call carries at most 64
MiB with the repository: the 16 programs of commit 232aef6 take 45 MiB as
16 .xz files, 6 MiB as one solid tar.xz (the default: most of each program
is the same runtime), about 210 MiB unpacked.

    bench/dp-vs-fsdp2-build.py gpu-run/dp-vs-fsdp2

Folder contents:
    manifest.json            shapes, recipe, steps, programs (read by the runner)
    programs.tar.xz          the programs (--compress solid, the default), which
                             the runner unpacks beside the manifest on first use:
      SHAPE-OPT-dp           DP-SGD: flat clipping C = 1, Gaussian noise sigma = 1
      SHAPE-OPT-nodp         DP off: clip = #dp.clip<none>, noise = #dp.none
                             (each its own SHAPE-OPT-*.xz with --compress xz,
                             .gz with gzip, no suffix and no archive with none)
    SHAPE-OPT-{dp,nodp}.mlir the compiled model and recipe
with SHAPE one of t1024, t4096, t8192, v128k-t2048 and OPT sgd or adamw.
A program dpc cannot build (the DP-off recipe before dpc accepts it) is
listed in the manifest with dpc's error and no file; the runner prints n/a.

The recipe matches bench/fsdp2-llama.py's run: the same optimizer and
hyperparameters (AdamW lr 1e-4, weight decay 0.1; SGD lr 1e-2, no weight
decay: fsdp2-llama.py's defaults), logical batch = accum x physical batch
sequences per optimizer step (fixed-size shuffled batches by default, so a
DPC step does the same work as an FSDP2 step), steps = warm-up + timed steps.
"""
import argparse
import concurrent.futures
import datetime
import gzip
import lzma
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Shape:
    name: str
    label: str
    seq: int
    batch: int
    # The 1.1B model of examples/llama-1b.mlir unless overridden.
    vocab: int = 32000
    width: int = 2048
    blocks: int = 16
    heads: int = 32
    kv_heads: int = 8
    mlp: int = 8192
    rope_theta: float = 10000.0
    # BRIEF.md's target for DP against FSDP2 without DP at this shape.
    dp_target: float = 0.9


# In the runner's priority order: the first shape runs complete before any
# other (bench/dp-vs-fsdp2.py, "Order").
SHAPES = [
    Shape("t1024", "1.1B, T = 1024, b = 8", seq=1024, batch=8, dp_target=1.0),
    Shape("t4096", "1.1B, T = 4096, b = 2", seq=4096, batch=2),
    Shape("t8192", "1.1B, T = 8192, b = 1", seq=8192, batch=1),
    Shape("v128k-t2048", "128K vocabulary, T = 2048, b = 4", seq=2048, batch=4,
          vocab=128256, rope_theta=500000.0),
]

# For checks on the CPU (--backend cpu --shapes tiny): fsdp2-llama.py's --tiny.
TINY = Shape("tiny", "tiny, T = 32, b = 2", seq=32, batch=2, vocab=256, width=64,
             blocks=2, heads=4, kv_heads=2, mlp=128)

# bench/fsdp2-llama.py's OPTIMIZER_DEFAULTS: (lr, weight decay).
OPTIMIZERS = {"adamw": (1e-4, 0.1), "sgd": (1e-2, 0.0)}


def mlir_float(x):
    # MLIR's float literals need a '.': 1e-4 would not parse, 1.0e-04 does.
    return f"{x:.6e}"


def recipe(opt, dp, sampling, accum, batch, steps):
    lr, wd = OPTIMIZERS[opt]
    logical = accum * batch
    if opt == "adamw":
        optimizer = f"#dp.adamw<lr = {mlir_float(lr)}, weight_decay = {mlir_float(wd)}>"
    else:
        optimizer = f"#dp.sgd<lr = {mlir_float(lr)}, weight_decay = {mlir_float(wd)}>"
    if sampling == "shuffle":
        sampler = f"#dp.shuffle<batch = {logical}, physical_batch = {batch}>"
    else:
        sampler = f"#dp.poisson<expected_batch = {logical}, physical_batch = {batch}>"
    if dp:
        # A fixed sigma rather than a target epsilon: the work is the same and
        # nothing depends on calibration or the budget stop.
        clip = "#dp.clip<flat, max_norm = 1.0>"
        noise = "#dp.noise<sigma = 1.0, delta = 1.0e-6>"
    else:
        clip = "#dp.clip<none>"
        noise = "#dp.none"
    return "\n".join([
        "dp.recipe @train for @llama {",
        f"  clip = {clip},",
        f"  noise = {noise},",
        f"  sampling = {sampler},",
        f"  optimizer = {optimizer},",
        f"  steps = {steps},",
        "  precision = #dp.precision<compute = bf16, master = f32>,",
        "  shard = #dp.fsdp<unit = block, prefetch = 1>,",
        "  grid = @ranks",
        "}",
    ])


def model_text(shape):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "gen-llama.py"),
           "--vocab", str(shape.vocab), "--width", str(shape.width),
           "--blocks", str(shape.blocks), "--heads", str(shape.heads),
           "--kv-heads", str(shape.kv_heads), "--mlp", str(shape.mlp),
           "--seq", str(shape.seq), "--batch", str(shape.batch),
           "--rope-theta", str(shape.rope_theta), "--dtype", "bf16"]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def with_recipe(text, new_recipe):
    pattern = re.compile(r"^dp\.recipe @train for @llama \{\n.*?^\}\n?", re.S | re.M)
    if len(pattern.findall(text)) != 1:
        sys.exit("dp-vs-fsdp2-build: scripts/gen-llama.py's output has no single "
                 "`dp.recipe @train for @llama { ... }`")
    return pattern.sub(new_recipe + "\n", text)


@dataclass
class Program:
    shape: str
    optimizer: str
    dp: bool
    name: str
    file: str = None
    error: str = None
    build_s: float = None
    bytes: int = None


def build(program, text, out, dpc, backend, compress, dpc_args):
    mlir = os.path.join(out, program.name + ".mlir")
    with open(mlir, "w") as f:
        f.write(text)
    binary = os.path.join(out, program.name)
    start = datetime.datetime.now()
    r = subprocess.run([dpc, mlir, "--backend", backend, "-o", binary, *dpc_args],
                       capture_output=True, text=True)
    program.build_s = (datetime.datetime.now() - start).total_seconds()
    if r.returncode != 0 or not os.path.exists(binary):
        lines = (r.stderr or r.stdout or f"exit {r.returncode}").strip().splitlines()
        program.error = next((l for l in lines if "error" in l), lines[0] if lines else "")
        return program
    if compress not in ("none", "solid"):
        suffix, opener = {"xz": (".xz", lambda p: lzma.open(p, "wb", preset=6)),
                          "gzip": (".gz", lambda p: gzip.open(p, "wb", compresslevel=6))}[compress]
        with open(binary, "rb") as src, opener(binary + suffix) as dst:
            shutil.copyfileobj(src, dst)
        os.remove(binary)
        binary += suffix
    program.file = os.path.basename(binary)
    program.bytes = os.path.getsize(binary)
    return program


def git_describe(dpc):
    """The commit of the checkout dpc was built in, and whether its sources
    (bench/ aside) differ from it."""
    where = os.path.dirname(os.path.realpath(dpc))

    def git(*args):
        r = subprocess.run(["git", "-C", where, *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    commit = git("rev-parse", "--short=12", "HEAD")
    top = git("rev-parse", "--show-toplevel")
    dirty = bool(top and git("-C", top, "status", "--porcelain", "--untracked-files=no",
                             "--", ".", ":!bench"))
    return commit, dirty


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="folder for the programs and manifest.json")
    ap.add_argument("--dpc", default=os.path.join(ROOT, "build", "bin", "dpc"))
    ap.add_argument("--shapes", default=",".join(s.name for s in SHAPES),
                    help="comma list (default: all, " +
                         ", ".join(s.name for s in SHAPES) + "; tiny for CPU checks)")
    ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: programs for checking the runner without a GPU")
    ap.add_argument("--optimizers", default="adamw,sgd")
    ap.add_argument("--dp", default="on,off", help="on, off or on,off (default)")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed steps on both sides (default 3; DPC's first "
                         "captures the CUDA graphs)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per optimizer step (default 1: the "
                         "logical batch is the physical batch)")
    ap.add_argument("--sampling", choices=["shuffle", "poisson"], default="shuffle",
                    help="shuffle (default): fixed-size batches, the same work "
                         "as FSDP2's; poisson: DP-SGD's sampler, variable batches "
                         "padded to physical batches (needs --accum >= 8 or so)")
    ap.add_argument("--records", type=int, default=None,
                    help="records in the runner's data files (default: one "
                         "epoch of the run with shuffle; 47 logical batches with "
                         "poisson, q = 0.021 as in docs/PERFORMANCE.md)")
    ap.add_argument("--jobs", type=int, default=2, help="dpc runs at once (default 2)")
    ap.add_argument("--compress", choices=["solid", "xz", "gzip", "none"],
                    default="solid",
                    help="how the programs are packed (default solid: one "
                         "programs.tar.xz, 6 MiB for 16 programs against 45 MiB "
                         "as separate .xz files, which no longer fit into a "
                         "device call beside the repository)")
    ap.add_argument("--dpc-arg", action="append", default=[], metavar="ARG",
                    help="one more dpc argument for every program, e.g. "
                         "--dpc-arg=--materialized-norms=auto (repeatable; "
                         "recorded in the manifest)")
    a = ap.parse_args()

    shapes = {s.name: s for s in SHAPES + [TINY]}
    wanted = a.shapes.split(",")
    unknown = [n for n in wanted if n not in shapes]
    opts = a.optimizers.split(",")
    dps = a.dp.split(",")
    if unknown or any(o not in OPTIMIZERS for o in opts) or any(d not in ("on", "off") for d in dps):
        ap.error(f"--shapes from {', '.join(shapes)}; --optimizers from sgd, adamw; "
                 "--dp from on, off")
    if a.warmup < 1 or a.steps < 1 or a.accum < 1:
        ap.error("--warmup, --steps and --accum must be >= 1 (the warm-up holds "
                 "DPC's graph capture)")
    if not os.access(a.dpc, os.X_OK):
        ap.error(f"{a.dpc} is not there: `make build` first, or --dpc PATH")
    os.makedirs(a.out, exist_ok=True)

    total_steps = a.warmup + a.steps
    jobs = []
    ordered = [s for s in SHAPES + [TINY] if s.name in wanted]
    for shape in ordered:
        name = shape.name
        text = model_text(shape)
        for opt in opts:
            for d in dps:
                dp = d == "on"
                p = Program(shape=name, optimizer=opt, dp=dp,
                            name=f"{name}-{opt}-{'dp' if dp else 'nodp'}")
                r = recipe(opt, dp, a.sampling, a.accum, shape.batch, total_steps)
                jobs.append((p, with_recipe(text, r)))

    programs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = [pool.submit(build, p, t, a.out, a.dpc, a.backend, a.compress, a.dpc_arg) for p, t in jobs]
        for fut in futures:
            p = fut.result()
            programs.append(p)
            state = f"{p.file} ({p.bytes / 2**20:.1f} MiB)" if p.file else f"not built: {p.error}"
            print(f"{p.name:24s} {p.build_s:5.1f} s  {state}", flush=True)

    archive = None
    if a.compress == "solid" and any(p.file for p in programs):
        # One xz stream over all programs (tar's order: the manifest's).
        archive = "programs.tar.xz"
        files = [p.file for p in programs if p.file]
        r = subprocess.run(["tar", "-C", a.out, "-cf", "-", *files], capture_output=True)
        if r.returncode != 0:
            sys.exit("dp-vs-fsdp2-build: tar failed: " + r.stderr.decode(errors="replace"))
        # One thread and a dictionary larger than a program (12.5 MiB), so
        # that each program is coded against the ones before it: with -T0 on
        # two cores xz cuts the stream into blocks of 24 MiB, coded apart,
        # and the 16 programs of 207646f took 47 MiB instead of 6.2.
        with open(os.path.join(a.out, archive), "wb") as f:
            x = subprocess.run(["xz", "-T1", "--lzma2=preset=6,dict=64MiB", "-c"],
                               input=r.stdout, stdout=f)
        if x.returncode != 0:
            sys.exit("dp-vs-fsdp2-build: xz failed")
        for name in files:
            os.remove(os.path.join(a.out, name))

    commit, dirty = git_describe(a.dpc)
    manifest = {
        "format": 1,
        "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "dpc_commit": commit,
        "dpc_dirty": dirty,
        "backend": a.backend,
        "dpc_args": a.dpc_arg,
        "warmup": a.warmup,
        "steps": a.steps,
        "accum": a.accum,
        "sampling": a.sampling,
        "optimizers": {o: {"lr": OPTIMIZERS[o][0], "weight_decay": OPTIMIZERS[o][1]} for o in opts},
        "dp": {"clip": "flat, max_norm = 1.0", "noise": "sigma = 1.0, delta = 1.0e-6"},
        "shapes": [],
        "programs": [asdict(p) for p in programs],
    }
    if archive:
        manifest["archive"] = archive
    for s in ordered:
        logical = a.accum * s.batch
        n = a.records or (logical * total_steps if a.sampling == "shuffle" else 47 * logical)
        manifest["shapes"].append(dict(asdict(s), records=n))
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    built = sum(1 for p in programs if p.file)
    size = (os.path.getsize(os.path.join(a.out, archive)) if archive
            else sum(p.bytes or 0 for p in programs)) / 2**20
    print(f"{built} of {len(programs)} programs in {a.out} ({size:.1f} MiB"
          f"{' in ' + archive if archive else ''}), "
          f"DPC {commit}{' (uncommitted changes)' if dirty else ''}")
    return 0 if built else 1


if __name__ == "__main__":
    sys.exit(main())
