#!/usr/bin/env python3
"""DPC with DP, DPC with DP off and PyTorch FSDP2 without DP (compiled and
eager), side by side on one GPU, in one go: the table of the issue "Faster
than book-keeping" (BRIEF.md's targets).

    bench/dp-vs-fsdp2.py gpu-run/dp-vs-fsdp2 --budget 540

The folder holds the DPC programs and manifest.json written by
bench/dp-vs-fsdp2-build.py. For every shape and optimizer of the manifest it
runs the DPC programs (DP on, DP off) and bench/fsdp2-llama.py (compiled,
eager; SGD and AdamW in one process), with the manifest's warm-up and timed
steps on both sides, then prints one markdown table with the ratios and the
targets met. A missing program (DP off before dpc accepts it) is n/a.

Order: every run of the first shape (T = 1024), then for each further shape
the DPC programs and compiled FSDP2, then eager FSDP2 of the further shapes.
A run whose estimate no longer fits the budget is skipped and the next one
tried; a run still going when the budget is spent is stopped. So a cut run
still gives the most important rows. --estimate prints the plan only.

Raw results go to $OUT (default /tmp/dp-vs-fsdp2-out): results.jsonl (one
object per run: command, wall time, parsed numbers, DPC's per-step metrics),
dp-vs-fsdp2.log (every run's output), table.md, smi.csv (nvidia-smi's SM
clock and power every 200 ms: each run's record and the table give their
medians, as under the 700 W cap the clock decides the speed and differs
from one H200 to the next); with --save-compile-cache,
compile-cache.tar.gz (Inductor's and Triton's caches, for --compile-cache in
a later call).
"""
import argparse
import atexit
import datetime
import gzip
import lzma
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FSDP2 = os.path.join(ROOT, "bench", "fsdp2-llama.py")

SYSTEMS = ("dp", "nodp", "compiled", "eager")
SYSTEM_LABEL = {"dp": "DPC, DP", "nodp": "DPC, DP off",
                "compiled": "FSDP2, compiled", "eager": "FSDP2, eager"}

# Estimates, in seconds, before anything was measured on this table's machine.
# Throughput guesses (tokens/s on one H200) from /work/shared/NORM-METHODS.md,
# 2026-11-23: DPC DP-SGD, and FSDP2 compiled SGD standing in for DPC with DP
# off and both FSDP2 settings; unknown shapes take the slowest.
RATE_GUESS = {
    "dp": {"t1024": 63705, "t4096": 48859, "t8192": 39346, "v128k-t2048": 44207},
    "nodp": {"t1024": 74211, "t4096": 65605, "t8192": 57358, "v128k-t2048": 57885},
    "fsdp2": {"t1024": 71499, "t4096": 65605, "t8192": 57358, "v128k-t2048": 57885},
}
# A DPC program's start (initialization of 1.1B parameters, data) and first
# step's CUDA-graph capture: 0.8 s and ~0.15 s measured on 2026-11-22
# (docs/measurements/2026-11-22-h200x4/llama-1gpu.jsonl), with margin.
DPC_START_S = 4.0
# An FSDP2 process up to its first step: ~12 s per run on 2026-11-22
# (session-four.log, torchrun), with margin for a cold page cache.
FSDP2_START_S = 20.0
# torch.compile of one block (forward and backward) and the loss with
# Inductor, once per process: not measured on these machines; a guess.
# With a compile cache from an earlier call (--compile-cache), a guess too.
COMPILE_COLD_S = 90.0
COMPILE_CACHED_S = 25.0
# Host copies of the weights between the two optimizers of one process.
FSDP2_SWITCH_S = 3.0


def log(msg=""):
    print(msg, flush=True)


class Job:
    def __init__(self, shape, system, optimizers, program=None, error=None):
        self.shape, self.system, self.optimizers = shape, system, optimizers
        self.program, self.error = program, error
        self.estimate_s = 0.0
        self.record_status = None

    @property
    def key(self):
        return f"{self.shape['name']}/{self.system}/{','.join(self.optimizers)}"


def plan_jobs(manifest, shapes, optimizers, systems):
    """Runs in priority order (module docstring)."""
    programs = {(p["shape"], p["optimizer"], p["dp"]): p for p in manifest["programs"]}

    def dpc(shape, system):
        out = []
        for opt in optimizers:
            p = programs.get((shape["name"], opt, system == "dp"))
            if p is None:
                out.append(Job(shape, system, [opt], error="not built (not in the manifest)"))
            elif not p.get("file"):
                out.append(Job(shape, system, [opt], error=p.get("error") or "not built"))
            else:
                out.append(Job(shape, system, [opt], program=p))
        return out

    def shape_jobs(shape, with_eager):
        jobs = []
        # DPC first: quick, and with DP the subject of the table.
        for opt_jobs in zip(*(dpc(shape, s) for s in ("dp", "nodp"))):
            jobs += opt_jobs
        jobs.append(Job(shape, "compiled", list(optimizers)))
        if with_eager:
            jobs.append(Job(shape, "eager", list(optimizers)))
        return jobs

    jobs = []
    for i, shape in enumerate(shapes):
        jobs += shape_jobs(shape, with_eager=i == 0)
    for shape in shapes[1:]:
        jobs.append(Job(shape, "eager", list(optimizers)))
    return [j for j in jobs if j.system in systems]


def estimate(job, manifest, previous, compile_cached):
    if job.key in previous:
        return previous[job.key]
    if job.error:
        return 0.0
    shape = job.shape
    steps = manifest["warmup"] + manifest["steps"]
    tokens = manifest["accum"] * shape["batch"] * shape["seq"]
    kind = job.system if job.system in ("dp", "nodp") else "fsdp2"
    guesses = RATE_GUESS[kind]
    rate = guesses.get(shape["name"], min(guesses.values()))
    run = steps * tokens / rate
    if job.system in ("dp", "nodp"):
        return DPC_START_S + run
    total = FSDP2_START_S + len(job.optimizers) * run + (len(job.optimizers) - 1) * FSDP2_SWITCH_S
    if job.system == "compiled":
        total += COMPILE_CACHED_S if compile_cached else COMPILE_COLD_S
    return total


def load_previous(path):
    """Measured wall times of an earlier call's results.jsonl, by job."""
    out = {}
    if not path:
        return out
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok" and r.get("wall_s"):
                out[r["key"]] = r["wall_s"]
    return out


def gpu_env():
    """The environment with scripts/gpu-env.sh's LD_LIBRARY_PATH (NCCL and
    cuBLASLt from PyTorch's wheels) for DPC's CUDA programs."""
    r = subprocess.run(
        ["bash", "-c", f"source {shlex.quote(os.path.join(ROOT, 'scripts', 'gpu-env.sh'))} "
                       ">&2 && env -0"],
        capture_output=True)
    if r.returncode != 0:
        sys.exit("dp-vs-fsdp2: scripts/gpu-env.sh failed:\n" + r.stderr.decode(errors="replace"))
    env = dict(kv.split("=", 1) for kv in r.stdout.decode().split("\0") if "=" in kv)
    return env


def write_tok(path, shape, records, seed):
    """Records of seq + 1 token ids drawn uniformly from the vocabulary: the
    same data as fsdp2-llama.py's (random ids; inputs ids[:-1], targets
    ids[1:], no padding)."""
    rng = random.Random(seed)
    n, v = shape["seq"] + 1, shape["vocab"]
    with open(path, "w") as f:
        for _ in range(records):
            f.write(" ".join(str(rng.randrange(v)) for _ in range(n)))
            f.write("\n")


def extract(tar, folder, members=None):
    """tar's members (all without a list) into folder, through the "data"
    filter where this Python has it (3.11.4 and 3.12 on, and backports)."""
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    if members is None:
        tar.extractall(folder, **safe)
    else:
        for m in members:
            tar.extract(m, folder, **safe)


def unpack_archive(manifest, folder):
    """The programs of a solid build (dp-vs-fsdp2-build.py --compress solid)
    into `folder`, beside the manifest, unless they are there already."""
    archive = manifest.get("archive")
    if not archive:
        return
    missing = [p["file"] for p in manifest["programs"]
               if p.get("file") and not os.path.exists(os.path.join(folder, p["file"]))]
    if not missing:
        return
    path = os.path.join(folder, archive)
    if not os.path.exists(path):
        sys.exit(f"dp-vs-fsdp2: {path} is missing, and with it {', '.join(missing)}")
    t0 = time.monotonic()
    with tarfile.open(path, "r:xz") as tar:
        names = set(tar.getnames())
        lost = [m for m in missing if m not in names]
        if lost:
            sys.exit(f"dp-vs-fsdp2: {path} lacks {', '.join(lost)}")
        extract(tar, folder, missing)
    log(f"programs: {len(missing)} unpacked from {archive} ({time.monotonic() - t0:.1f} s)")


class ClockSampler:
    """nvidia-smi's SM clock and board power every 200 ms into a file, for
    the medians over a run's samples at the power cap (650 W or more: the
    regime the runs are compared in) or over all of them when none reached
    it. Without nvidia-smi, or if it fails, there are no medians and the
    runs go on."""
    CAP_W = 650.0

    def __init__(self, path, env):
        self.path, self.proc = path, None
        try:
            with open(path, "w") as out:
                # The child keeps its own copy of the descriptor.
                self.proc = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                     "--format=csv,noheader,nounits", "-lms", "200"],
                    stdout=out, stderr=subprocess.DEVNULL, env=env)
        except OSError:
            self.proc = None
        # nvidia-smi -lms runs until stopped: stop it however the runner
        # ends (stop() again is harmless).
        atexit.register(self.stop)

    def samples(self):
        """(seconds since the epoch, MHz, W) of every whole line so far."""
        rows = []
        try:
            with open(self.path) as f:
                for line in f:
                    parts = [x.strip() for x in line.split(",")]
                    if len(parts) != 3:
                        continue
                    try:
                        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                        rows.append((t.timestamp(), float(parts[1]), float(parts[2])))
                    except ValueError:
                        continue
        except OSError:
            pass
        return rows

    def medians(self, begin=None, end=None):
        """{median_mhz, median_w, samples, at_cap} over [begin, end] (seconds
        since the epoch; all samples without them), or None."""
        rows = [r for r in self.samples()
                if (begin is None or r[0] >= begin) and (end is None or r[0] <= end)]
        capped = [r for r in rows if r[2] >= self.CAP_W]
        use = capped or rows
        if not use:
            return None
        return {"median_mhz": statistics.median(r[1] for r in use),
                "median_w": statistics.median(r[2] for r in use),
                "samples": len(use), "at_cap": bool(capped)}

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def clock_text(m):
    if not m:
        return ""
    cap = f"{ClockSampler.CAP_W:.0f} W"
    where = f"at >= {cap}" if m["at_cap"] else f"below {cap}"
    return f"{m['median_mhz']:.0f} MHz at {m['median_w']:.0f} W ({m['samples']} samples {where})"


def run_process(cmd, env, timeout, logf, title):
    """Runs cmd in its own process group (so that a stop also ends its
    children, such as Inductor's compile workers) with its output into the
    log; returns (exit status or 'timeout', seconds, output)."""
    logf.write(f"\n===== {title}\n$ {shlex.join(cmd)}\n")
    logf.flush()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout))
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        status = "timeout"
    seconds = time.monotonic() - start
    text = out.decode(errors="replace")
    logf.write(text)
    logf.write(f"===== {title}: {status} after {seconds:.1f} s\n")
    logf.flush()
    return status, seconds, text


def dpc_result(metrics_path, warmup, stdout):
    """Throughput over the steps after the warm-up: their tokens over the wall
    time from the end of step `warmup` to the end of the last step (what lies
    between steps, such as the metrics line, included, as in FSDP2's timed
    loop); peak memory: the program's (cudaMalloc'd bytes of rank 0: arena,
    cuBLASLt workspace, attention scratch)."""
    rows = []
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            rows = [json.loads(l) for l in f if l.strip()]
    timed = [r for r in rows if r["step"] > warmup]
    base = [r for r in rows if r["step"] == warmup]
    res = {"metrics": rows}
    if timed and base:
        seconds = timed[-1]["wall_time_s"] - base[0]["wall_time_s"]
        tokens = sum(r["tokens"] for r in timed)
        res.update({
            "tokens_per_s": tokens / seconds,
            "tokens_per_s_steps": tokens / sum(r["step_time_s"] for r in timed),
            "s_per_step": seconds / len(timed),
            "timed_steps": len(timed),
            "peak_gib": max(r["memory_bytes"] for r in rows) / 2**30,
            "first_step_s": rows[0]["step_time_s"],
            "final_loss": timed[-1]["loss"],
        })
    # The final report's "memory per rank   peak 31.0 GiB; predicted 30.8 GiB".
    m = re.search(r"predicted ([0-9.]+) (GiB|MiB|KiB|B)\b", stdout)
    if m:
        scale = {"GiB": 1, "MiB": 2**-10, "KiB": 2**-20, "B": 2**-30}[m.group(2)]
        res["predicted_gib"] = float(m.group(1)) * scale
    return res


def fsdp2_results(json_path):
    if not os.path.exists(json_path):
        return []
    with open(json_path) as f:
        data = json.load(f)
    return data if isinstance(data, list) else [data]


def fmt_rate(cell):
    if cell is None:
        return "-"  # not asked for
    if "tokens_per_s" not in cell:
        return cell.get("status", "n/a")
    mem = cell.get("peak_gib")
    text = f"{cell['tokens_per_s']:,.0f}" + (f" ({mem:.2f} GiB)" if mem is not None else "")
    if cell.get("graph_breaks"):
        text += f" [{cell['graph_breaks']} graph breaks]"
    return text


def ratio(a, b):
    if not a or not b or "tokens_per_s" not in a or "tokens_per_s" not in b:
        return None
    return a["tokens_per_s"] / b["tokens_per_s"]


def target_cell(value, goal, higher=True):
    if value is None:
        return "n/a", None
    met = value >= goal if higher else value <= goal
    return f"{value:.2f}x {'yes' if met else 'no'}", met


def table(shapes, optimizers, cells):
    """One markdown row per shape and optimizer; cells[(shape, opt, system)]
    holds tokens_per_s and peak_gib (or a status)."""
    head = ("| shape | optimizer | DPC, DP | DPC, DP off | FSDP2, compiled | FSDP2, eager "
            "| DP off / FSDP2 best (>= 1.1) | DP / DP off (>= 0.95) "
            "| DP / FSDP2 best (>= target) | DP memory / FSDP2 best (<= 1.10) |")
    lines = [head, "|" + "---|" * 10]
    met = missed = unknown = 0
    for shape in shapes:
        for opt in optimizers:
            c = {s: cells.get((shape["name"], opt, s)) for s in SYSTEMS}
            fsdp2 = [x for x in (c["compiled"], c["eager"]) if x and "tokens_per_s" in x]
            best = max(fsdp2, key=lambda x: x["tokens_per_s"]) if fsdp2 else None
            best_name = None
            if best is not None:
                best_name = "compiled" if best is c["compiled"] else "eager"
            goal = shape.get("dp_target", 0.9)
            mem = None
            if best and c["dp"] and c["dp"].get("peak_gib") and best.get("peak_gib"):
                mem = c["dp"]["peak_gib"] / best["peak_gib"]
            checks = [target_cell(ratio(c["nodp"], best), 1.1),
                      target_cell(ratio(c["dp"], c["nodp"]), 0.95),
                      target_cell(ratio(c["dp"], best), goal),
                      target_cell(mem, 1.10, higher=False)]
            texts = []
            for text, ok in checks:
                met += ok is True
                missed += ok is False
                unknown += ok is None
                texts.append(text)
            texts[2] = texts[2] + f" (>= {goal:g})"
            rates = [fmt_rate(c[s]) for s in SYSTEMS]
            if best_name:
                # FSDP2 best: the faster of the two settings, in bold.
                i = SYSTEMS.index(best_name)
                rates[i] = f"**{rates[i]}**"
            lines.append(f"| {shape['label']} | {opt} | " + " | ".join(rates) + " | " +
                         " | ".join(texts) + " |")
    lines.append("")
    lines.append(f"Targets met: {met} of {met + missed + unknown} "
                 f"({missed} missed, {unknown} unknown). FSDP2 best (bold): the "
                 "faster of compiled and eager; peak memory: DPC's cudaMalloc'd "
                 "bytes, FSDP2's torch.cuda.max_memory_allocated over the timed steps.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", help="folder of bench/dp-vs-fsdp2-build.py (manifest.json)")
    ap.add_argument("--budget", type=float, default=540.0,
                    help="seconds for everything, the runs' start-up included "
                         "(default 540: 9 minutes)")
    ap.add_argument("--estimate", action="store_true", help="print the plan and stop")
    ap.add_argument("--shapes", help="comma list, in the order to run them "
                                     "(default: the manifest's)")
    ap.add_argument("--optimizers", help="comma list (default: the manifest's)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma list of dp, nodp, compiled, eager (default all)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/dp-vs-fsdp2-out",
                    help="raw results (default $OUT)")
    ap.add_argument("--work", default="/tmp/dp-vs-fsdp2-work",
                    help="unpacked programs, data, metrics, compile caches")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with torch")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: check this script with CPU programs and gloo")
    ap.add_argument("--dpc-args", default="",
                    help="more arguments for every DPC program (e.g. "
                         "--skip-nonfinite-steps, which checks the gradients in "
                         "a pass of their own before the update)")
    ap.add_argument("--fsdp2-args", default="",
                    help="more arguments for fsdp2-llama.py (e.g. on the CPU: "
                         "--compile-backend aot_eager)")
    ap.add_argument("--previous", metavar="RESULTS_JSONL",
                    help="an earlier call's results.jsonl: its wall times become "
                         "the estimates")
    ap.add_argument("--compile-cache", metavar="TAR_GZ",
                    help="an earlier call's compile-cache.tar.gz, unpacked first")
    ap.add_argument("--save-compile-cache", action="store_true",
                    help="pack Inductor's and Triton's caches into "
                         "$OUT/compile-cache.tar.gz (if under 16 MiB)")
    a = ap.parse_args()
    t0 = time.monotonic()

    with open(os.path.join(a.programs, "manifest.json")) as f:
        manifest = json.load(f)
    unpack_archive(manifest, a.programs)
    all_shapes = manifest["shapes"]
    if a.shapes:
        by_name = {s["name"]: s for s in all_shapes}
        names = a.shapes.split(",")
        if any(n not in by_name for n in names) or len(set(names)) != len(names):
            ap.error(f"--shapes: the manifest has {', '.join(by_name)}")
        shapes = [by_name[n] for n in names]
    else:
        shapes = all_shapes
    optimizers = a.optimizers.split(",") if a.optimizers else list(manifest["optimizers"])
    if any(o not in manifest["optimizers"] for o in optimizers):
        ap.error(f"--optimizers: the manifest has {', '.join(manifest['optimizers'])}")
    systems = a.systems.split(",")
    if any(s not in SYSTEMS for s in systems):
        ap.error(f"--systems from {', '.join(SYSTEMS)}")

    previous = load_previous(a.previous)
    jobs = plan_jobs(manifest, shapes, optimizers, systems)
    total = 0.0
    log(f"DPC against FSDP2: {len(jobs)} runs, {manifest['warmup']} warm-up and "
        f"{manifest['steps']} timed steps each, {manifest['accum']} micro-batch(es) a step, "
        f"{manifest['sampling']} sampling in DPC; budget {a.budget:.0f} s")
    log(f"{'run':34s} {'estimate':>9s} {'total':>7s}")
    for j in jobs:
        j.estimate_s = estimate(j, manifest, previous, bool(a.compile_cache))
        total += j.estimate_s
        note = f"  n/a: {j.error[:60]}" if j.error else ("" if total <= a.budget else "  (over the budget)")
        log(f"{j.key:34s} {j.estimate_s:8.0f}s {total:6.0f}s{note}")
    source = "earlier measurements" if previous else "guesses (see RATE_GUESS and the *_S constants)"
    log(f"estimated total {total:.0f} s ({total / 60:.1f} min) from {source}")
    if a.estimate:
        return 0

    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    logf = open(os.path.join(a.out, "dp-vs-fsdp2.log"), "w")
    results_path = os.path.join(a.out, "results.jsonl")
    open(results_path, "w").close()
    env = gpu_env() if a.device == "cuda" else dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    cache = os.path.join(a.work, "compile-cache")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    if a.compile_cache:
        os.makedirs(cache, exist_ok=True)
        with tarfile.open(a.compile_cache) as tar:
            extract(tar, cache)

    header = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "manifest": {k: v for k, v in manifest.items() if k != "programs"}}
    def output(cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        except OSError:
            return None
        return r.stdout.strip() if r.returncode == 0 else None
    if a.device == "cuda":
        header["gpu"] = output(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,"
                                "clocks.max.sm", "--format=csv,noheader"])
    header["torch"] = output([a.python, "-c", "import torch; print(torch.__version__)"])
    header["bench_commit"] = output(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"])
    log(f"GPU {header.get('gpu', 'none (cpu)')}, torch {header['torch']}, "
        f"DPC {manifest.get('dpc_commit')}, bench {header['bench_commit']}")
    with open(results_path, "a") as f:
        f.write(json.dumps({"header": header}) + "\n")

    data = {}
    for shape in shapes:
        path = os.path.join(a.work, f"{shape['name']}.tok")
        write_tok(path, shape, shape["records"], seed=zlib.crc32(shape["name"].encode()))
        data[shape["name"]] = path
    log(f"data: {len(data)} files of random tokens ({time.monotonic() - t0:.1f} s)")

    cells = {}
    deadline = t0 + a.budget
    clock = ClockSampler(os.path.join(a.out, "smi.csv"), env) if a.device == "cuda" else None
    for n, job in enumerate(jobs):
        shape = job.shape
        rec = {"key": job.key, "shape": shape["name"], "system": job.system,
               "optimizers": job.optimizers, "estimate_s": job.estimate_s}
        left = deadline - time.monotonic()
        if job.error:
            rec.update(status="n/a", error=job.error)
            for opt in job.optimizers:
                cells[(shape["name"], opt, job.system)] = {"status": "n/a"}
        elif job.estimate_s > left:
            rec.update(status="skipped", error=f"estimate {job.estimate_s:.0f} s, "
                                               f"{max(left, 0):.0f} s left of the budget")
            for opt in job.optimizers:
                cells[(shape["name"], opt, job.system)] = {"status": "skipped"}
        else:
            began = time.time()
            if job.system in ("dp", "nodp"):
                run_dpc(job, rec, cells, manifest, data, env, left, logf, a)
            else:
                run_fsdp2(job, rec, cells, manifest, env, left, logf, a, n)
            # The whole run's samples: start-up, warm-up and timed steps.
            if clock and (m := clock.medians(began, time.time())):
                rec["clock"] = m
        job.record_status = rec["status"]
        with open(results_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        took = f"{rec['wall_s']:.0f} s (estimate {job.estimate_s:.0f})" if "wall_s" in rec else ""
        summary = "; ".join(f"{o} {r['tokens_per_s']:,.0f} tokens/s"
                            for o, r in rec.get("results", {}).items() if "tokens_per_s" in r)
        if rec["status"] != "ok":
            summary = f"{rec['status']}: {rec.get('error', '')[:100]}" + \
                (f" ({summary})" if summary else "")
        log(f"{job.key:34s} {took:24s} {summary}" +
            (f"  [{clock_text(rec['clock'])}]" if "clock" in rec else ""))

    text = table(shapes, optimizers, cells)
    if clock:
        clock.stop()
        overall = clock.medians()
        if overall:
            text += f"\nSM clock over the call, median: {clock_text(overall)} (smi.csv)."
    title = (f"DPC against PyTorch FSDP2 without DP, one GPU ({header.get('gpu', 'cpu')}), "
             f"torch {header['torch']}, DPC {manifest.get('dpc_commit')}, {header['date']}; "
             f"{manifest['warmup']} warm-up + {manifest['steps']} timed steps, "
             f"{manifest['accum']} x b sequences a step, tokens/s (peak GiB)")
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(title + "\n\n" + text + "\n")
    if a.save_compile_cache and os.path.isdir(cache):
        pack = os.path.join(a.out, "compile-cache.tar.gz")
        with tarfile.open(pack, "w:gz") as tar:
            for sub in sorted(os.listdir(cache)):
                tar.add(os.path.join(cache, sub), arcname=sub)
        size = os.path.getsize(pack)
        if size > 16 * 2**20:
            os.remove(pack)
            log(f"compile cache {size / 2**20:.1f} MiB: over the 16 MiB a file can bring back; dropped")
        else:
            log(f"compile cache: {size / 2**20:.1f} MiB in {pack}")
    skipped = [j for j in jobs if j.record_status in ("skipped", "timeout")]
    log(f"\nall runs in {time.monotonic() - t0:.0f} s")
    if skipped:
        shapes_cut = sorted({j.shape["name"] for j in skipped})
        log("not measured (budget): " + ", ".join(j.key for j in skipped) +
            f"\nfor rows measured in one call, run again with --shapes {','.join(shapes_cut)}")
    log("")
    log(title + "\n")
    log(text)
    return 0


def run_dpc(job, rec, cells, manifest, data, env, left, logf, a):
    shape, opt = job.shape, job.optimizers[0]
    packed = os.path.join(a.programs, job.program["file"])
    prog = os.path.join(a.work, job.program["name"])
    if packed.endswith((".gz", ".xz")):
        opener = gzip.open if packed.endswith(".gz") else lzma.open
        with opener(packed, "rb") as src, open(prog, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(packed, prog)
    os.chmod(prog, 0o755)
    metrics = os.path.join(a.work, job.program["name"] + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)  # the program appends
    steps = manifest["warmup"] + manifest["steps"]
    cmd = [prog, "--data", data[shape["name"]], "--steps", str(steps),
           "--metrics", metrics, "--quiet", *shlex.split(a.dpc_args)]
    status, seconds, out = run_process(cmd, env, left, logf, job.key)
    res = dpc_result(metrics, manifest["warmup"], out)
    rec.update(command=shlex.join(cmd), exit=status, wall_s=seconds,
               status="ok" if status == 0 and "tokens_per_s" in res else
               ("timeout" if status == "timeout" else "failed"))
    if rec["status"] != "ok":
        rec["error"] = ("stopped at the budget's end; " if status == "timeout" else "") + \
            " | ".join(out.strip().splitlines()[-3:])
    rec["results"] = {opt: res}
    cell = {k: res[k] for k in ("tokens_per_s", "peak_gib") if k in res}
    cells[(shape["name"], opt, job.system)] = cell if rec["status"] == "ok" else {"status": rec["status"]}


def run_fsdp2(job, rec, cells, manifest, env, left, logf, a, n):
    shape = job.shape
    out_json = os.path.join(a.work, job.key.replace("/", "-").replace(",", "+") + ".json")
    if os.path.exists(out_json):
        os.remove(out_json)
    lrs = ",".join(repr(manifest["optimizers"][o]["lr"]) for o in job.optimizers)
    wds = ",".join(repr(manifest["optimizers"][o]["weight_decay"]) for o in job.optimizers)
    cmd = [a.python, FSDP2, "--device", a.device,
           "--steps", str(manifest["steps"]), "--warmup", str(manifest["warmup"]),
           "--seq", str(shape["seq"]), "--batch", str(shape["batch"]),
           "--accum", str(manifest["accum"]),
           "--optimizer", ",".join(job.optimizers), "--lr", lrs, "--weight-decay", wds,
           "--vocab", str(shape["vocab"]), "--width", str(shape["width"]),
           "--blocks", str(shape["blocks"]), "--heads", str(shape["heads"]),
           "--kv-heads", str(shape["kv_heads"]), "--mlp", str(shape["mlp"]),
           "--rope-theta", repr(shape["rope_theta"]), "--json", out_json]
    if job.system == "compiled":
        cmd.append("--compile")
    cmd += shlex.split(a.fsdp2_args)
    job_env = dict(env)
    # A port of its own: the last run's store may not have let go of one yet.
    job_env["MASTER_PORT"] = str(29600 + n)
    status, seconds, out = run_process(cmd, job_env, left, logf, job.key)
    results = {r["optimizer"]: r for r in fsdp2_results(out_json)}
    rec.update(command=shlex.join(cmd), exit=status, wall_s=seconds, results=results)
    complete = all(o in results for o in job.optimizers)
    rec["status"] = "ok" if status == 0 and complete else \
        ("timeout" if status == "timeout" else "failed")
    if rec["status"] != "ok":
        rec["error"] = ("stopped at the budget's end; " if status == "timeout" else "") + \
            " | ".join(out.strip().splitlines()[-3:])
    for opt in job.optimizers:
        r = results.get(opt)
        if r is None:
            cells[(shape["name"], opt, job.system)] = {"status": rec["status"]}
            continue
        # The timed steps' peak: DPC's is its static arena, steady from step 1.
        peak = r.get("peak_mem_timed_gib", r.get("peak_mem_gib"))
        cells[(shape["name"], opt, job.system)] = {"tokens_per_s": r["tokens_per_s"],
                                                   "peak_gib": peak,
                                                   "graph_breaks": r.get("graph_breaks")}


if __name__ == "__main__":
    sys.exit(main())
