#!/usr/bin/env python3
"""Training throughput of PyTorch FSDP2, without differential privacy, on the
1.1B Llama-shaped model of examples/llama-1b.mlir (or another shape of
scripts/gen-llama.py).

This is the non-private baseline that DPC's DP training is compared against
(docs/PERFORMANCE.md, bench/dp-vs-fsdp2.py). It measures tokens per second of
full training steps (forward, backward, optimizer step, zero_grad) on random
tokens, and the peak GPU memory per rank.

Model (default): vocab 32000, width 2048, 16 blocks, 32 heads, 8 KV heads
(head dim 64), SwiGLU MLP 8192, RoPE theta 10000, pre-norm RMSNorm and a
final RMSNorm, rotary embeddings on q and k, untied output head, no biases,
causal attention, mean per-token cross-entropy; 1024 tokens, 8 sequences per
GPU per micro-batch, one micro-batch per optimizer step (--accum).
Sharding: fully_shard on each block, then on the root; bf16 compute,
f32 reductions and f32 master weights; fused AdamW (lr 1e-4, weight decay
0.1) or plain foreach SGD (--optimizer sgd: lr 1e-2, no weight decay).
--compile compiles each block and the loss before fully_shard, as
torchtitan's `compile.enable` does with its default components (graph breaks
are counted; --fullgraph makes one an error, as torchtitan does).

Run (N = 1, 2 or 4 GPUs):
    torchrun --standalone --nproc_per_node N bench/fsdp2-llama.py \\
        --steps 10 --warmup 3 --json OUT.json
One GPU without torchrun (still sharded, on a 1-rank group):
    python3 bench/fsdp2-llama.py
The 128K-vocabulary shape at 2048 tokens, compiled, SGD then AdamW in one
process (each with its own warm-up and timed steps):
    python3 bench/fsdp2-llama.py --vocab 128256 --rope-theta 500000 \\
        --seq 2048 --batch 4 --compile --optimizer sgd,adamw --json OUT.json
Check without a GPU (gloo, tiny model):
    python3 bench/fsdp2-llama.py --device cpu --tiny --steps 3 --warmup 1
Needs only torch (2.5 or newer; 2.6 for the torch.distributed.fsdp import path);
no internet, no transformers.
"""
import os

# Set before torch.distributed starts NCCL: the H200 hosts need NVLink
# multicast (NVLS) off, and NCCL and symmetric memory read these once, at init.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass, replace

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

try:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError:  # torch < 2.6 kept FSDP2 under _composable
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard


@dataclass
class Config:
    vocab: int = 32000
    width: int = 2048
    blocks: int = 16
    heads: int = 32
    kv_heads: int = 8
    mlp: int = 8192
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.width // self.heads


FULL = Config()
TINY = Config(vocab=256, width=64, blocks=2, heads=4, kv_heads=2, mlp=128)

# The shape flags and the Config fields they set (the names of
# scripts/gen-llama.py's flags).
SHAPE_FLAGS = ("vocab", "width", "blocks", "heads", "kv_heads", "mlp", "rope_theta")

# Per-optimizer defaults of --lr and --weight-decay. AdamW's are this
# script's original ones; SGD's are plain SGD without weight decay.
OPTIMIZER_DEFAULTS = {"adamw": (1e-4, 0.1), "sgd": (1e-2, 0.0)}


def rope_tables(tokens, head_dim, theta, device):
    """cos and sin of t * theta^(-2i/head_dim), [tokens, head_dim], each
    frequency twice: the half-split layout of the DPC runtime (pairs
    (x[i], x[i + head_dim/2]), runtime/cpu/Attention.cpp)."""
    half = head_dim // 2
    freq = theta ** (-2.0 * torch.arange(half, device=device, dtype=torch.float32) / head_dim)
    angle = torch.outer(torch.arange(tokens, device=device, dtype=torch.float32), freq)
    angle = torch.cat([angle, angle], dim=-1)
    return angle.cos(), angle.sin()


def apply_rope(x, cos, sin):
    # (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) on the half-split pairs.
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def cross_entropy_loss(logits, targets):
    # log-softmax over the vocabulary in f32, as DPC's cross_entropy
    # accumulates (runtime/cuda/Losses.cu); mean over every token of every
    # sequence. torchtitan's loss is the same function (and compiles it).
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


class Block(nn.Module):
    """Pre-norm decoder block; parameter names follow examples/llama-1b.mlir
    (b<i>.n1, wq, wk, wv, wo, n2, gate, up, down)."""

    def __init__(self, c: Config, gqa: bool):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.head_dim
        self.gqa = gqa
        kv = c.kv_heads * c.head_dim
        self.n1 = nn.RMSNorm(c.width, eps=c.norm_eps)
        self.wq = nn.Linear(c.width, c.width, bias=False)
        self.wk = nn.Linear(c.width, kv, bias=False)
        self.wv = nn.Linear(c.width, kv, bias=False)
        self.wo = nn.Linear(c.width, c.width, bias=False)
        self.n2 = nn.RMSNorm(c.width, eps=c.norm_eps)
        self.gate = nn.Linear(c.width, c.mlp, bias=False)
        self.up = nn.Linear(c.width, c.mlp, bias=False)
        self.down = nn.Linear(c.mlp, c.width, bias=False)

    def forward(self, x, cos, sin):
        b, t, w = x.shape
        h = self.n1(x)
        # [b, t, heads, d] -> [b, heads, t, d], the layout SDPA takes.
        q = self.wq(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.gqa:
            # Each KV head serves heads/kv_heads query heads inside the kernel,
            # without materialising repeated k and v (flash backend on CUDA).
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            rep = self.heads // self.kv_heads
            a = F.scaled_dot_product_attention(
                q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1),
                is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, w))
        m = self.n2(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Llama(nn.Module):
    def __init__(self, c: Config, gqa: bool = True):
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(c.vocab, c.width)
        self.blocks = nn.ModuleList(Block(c, gqa) for _ in range(c.blocks))
        self.norm = nn.RMSNorm(c.width, eps=c.norm_eps)
        self.head = nn.Linear(c.width, c.vocab, bias=False)  # untied from emb
        self.loss_fn = cross_entropy_loss  # replaced by a compiled one with --compile

    def init_weights(self):
        # normal(0, 0.02) for every matrix as in the DPC model (#dp.normal<0.02>),
        # ones for the norm gains.
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, mean=0.0, std=0.02)
            else:
                nn.init.ones_(p)

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        # Recomputed per step: [seq, head_dim] floats, far cheaper than a step,
        # and no buffer for FSDP to place or cast.
        cos, sin = rope_tables(tokens.shape[1], self.c.head_dim, self.c.rope_theta, x.device)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.loss_fn(self.head(self.norm(x)), targets)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def flops_per_token(c: Config, seq):
    """Matrix-product FLOPs of one training token (forward + backward = 3x
    forward): 6 per weight of every Linear (the head included, the embedding
    gather not), plus attention's QK^T and PV counting the causal half
    (2 * seq * width per layer forward), the convention of docs/PERFORMANCE.md's
    attention rates."""
    kv = c.kv_heads * c.head_dim
    linear = c.blocks * (2 * c.width * c.width + 2 * c.width * kv + 3 * c.width * c.mlp)
    linear += c.vocab * c.width
    return 6 * linear + 6 * c.blocks * seq * c.width


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)

    def positive(s):
        v = int(s)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {s}")
        return v

    def non_negative(s):
        v = int(s)
        if v < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {s}")
        return v

    def optimizer_list(s):
        names = s.split(",")
        bad = [n for n in names if n not in OPTIMIZER_DEFAULTS]
        if bad or len(set(names)) != len(names):
            raise argparse.ArgumentTypeError(
                f"a comma list of distinct names from sgd, adamw, got {s}")
        return names

    def float_list(s):
        try:
            values = [float(x) for x in s.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"a number or a comma list of numbers, got {s}")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise argparse.ArgumentTypeError(f"must be finite and >= 0, got {s}")
        return values

    ap.add_argument("--steps", type=positive, default=10,
                    help="timed optimizer steps (default 10)")
    ap.add_argument("--warmup", type=non_negative, default=3,
                    help="untimed optimizer steps first (default 3)")
    ap.add_argument("--seq", type=positive, default=None,
                    help="tokens per sequence (default 1024; 32 with --tiny)")
    ap.add_argument("--batch", type=positive, default=None,
                    help="sequences per GPU per micro-batch (default 8; 2 with --tiny)")
    ap.add_argument("--accum", type=positive, default=1,
                    help="micro-batches per optimizer step, gradients accumulated "
                         "(default 1); a DPC recipe's logical batch is "
                         "accum x batch x GPUs")
    ap.add_argument("--optimizer", type=optimizer_list, default=["adamw"],
                    help="adamw (fused on CUDA; default), sgd (plain: "
                         "w -= lr (g + wd w), as DPC's #dp.sgd; foreach on CUDA), or "
                         "a comma list, e.g. sgd,adamw: one after the other in this "
                         "process, each from the same initial weights with its own "
                         "warm-up and timed steps; --json then writes a list")
    ap.add_argument("--lr", type=float_list, default=None,
                    help="learning rate, one for all optimizers or one per "
                         "--optimizer entry (default: adamw 1e-4, sgd 1e-2)")
    ap.add_argument("--weight-decay", type=float_list, default=None,
                    help="decoupled weight decay, like --lr (default: adamw 0.1, sgd 0)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile each block and the loss before "
                         "fully_shard, as torchtitan does")
    ap.add_argument("--fullgraph", action="store_true",
                    help="with --compile: fail on a graph break in a block "
                         "(torchtitan's fullgraph=True); without it a break "
                         "splits the graph and is counted in the results")
    ap.add_argument("--no-compile-loss", dest="compile_loss", action="store_false",
                    help="with --compile: compile the blocks only, not the loss")
    ap.add_argument("--compile-backend", default="inductor",
                    help="torch.compile backend (default inductor; aot_eager checks "
                         "the traced graphs where inductor cannot build)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda: NCCL, one GPU per rank; cpu: gloo, for checks")
    ap.add_argument("--tiny", action="store_true",
                    help="vocab 256, width 64, 2 blocks, 4 heads, 2 KV heads, MLP 128")
    shape = ap.add_argument_group(
        "model shape (default: the 1.1B model, or the tiny one with --tiny; "
        "the flags of scripts/gen-llama.py)")
    shape.add_argument("--vocab", type=positive)
    shape.add_argument("--width", type=positive)
    shape.add_argument("--blocks", type=positive)
    shape.add_argument("--heads", type=positive)
    shape.add_argument("--kv-heads", type=positive)
    shape.add_argument("--mlp", type=positive)
    shape.add_argument("--rope-theta", type=float)
    ap.add_argument("--param-dtype", choices=["bf16", "f32"], default="bf16",
                    help="compute (all-gathered parameter) dtype; masters stay f32")
    ap.add_argument("--attention", choices=["gqa", "repeat"], default="gqa",
                    help="gqa: SDPA enable_gqa=True; repeat: repeat_interleave k and v")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH",
                    help="rank 0 writes the results here (an object; a list of "
                         "objects, one per optimizer, for a list of optimizers)")
    a = ap.parse_args(argv)
    if a.seq is None:
        a.seq = 32 if a.tiny else 1024
    if a.batch is None:
        a.batch = 2 if a.tiny else 8
    cfg = replace(TINY if a.tiny else FULL,
                  **{k: getattr(a, k) for k in SHAPE_FLAGS if getattr(a, k) is not None})
    if cfg.width % cfg.heads or cfg.heads % cfg.kv_heads or cfg.head_dim % 2:
        ap.error(f"width {cfg.width} must split into {cfg.heads} heads of even size, "
                 f"and heads into {cfg.kv_heads} KV groups")
    a.cfg = cfg
    for name in ("lr", "weight_decay"):
        values = getattr(a, name)
        if values is not None and len(values) not in (1, len(a.optimizer)):
            ap.error(f"--{name.replace('_', '-')}: one value or one per optimizer "
                     f"({len(a.optimizer)}), got {len(values)}")
    a.hyper = []
    for i, opt in enumerate(a.optimizer):
        lr, wd = OPTIMIZER_DEFAULTS[opt]
        if a.lr is not None:
            lr = a.lr[i if len(a.lr) > 1 else 0]
        if a.weight_decay is not None:
            wd = a.weight_decay[i if len(a.weight_decay) > 1 else 0]
        a.hyper.append((opt, lr, wd))
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no CUDA device (use --device cpu to check on CPU)")
    return a


def init_distributed(device_type):
    # A plain `python3 bench/fsdp2-llama.py` is a 1-rank job: the same FSDP2
    # code path as under torchrun, so 1-GPU numbers include FSDP's overheads.
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29533"),
                 ("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(k, v)
    local_rank = int(os.environ["LOCAL_RANK"])
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # device_id binds the NCCL communicator to this GPU now, so barriers
        # need not guess the device.
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def build_model(cfg, args, device, mesh):
    # Same seed on every rank: each rank builds the same full f32 model and
    # fully_shard keeps this rank's shard of it. 1.1B f32 parameters are
    # 4.4 GB per GPU for a moment; the peak counter is reset after this.
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = Llama(cfg, gqa=args.attention == "gqa")
    model.init_weights()
    params = count_params(model)
    if args.compile:
        # torchtitan's apply_compile: each block on its own (all blocks share
        # one compiled graph, their parameters being graph inputs), before
        # fully_shard, so FSDP's hooks stay outside the compiled regions.
        for i, blk in enumerate(model.blocks):
            model.blocks[i] = torch.compile(blk, backend=args.compile_backend,
                                            fullgraph=args.fullgraph)
        if args.compile_loss:
            model.loss_fn = torch.compile(cross_entropy_loss, backend=args.compile_backend)
    dtype = torch.bfloat16 if args.param_dtype == "bf16" else torch.float32
    # Parameters are all-gathered in bf16 for compute, gradients reduce-scattered
    # in f32, the sharded masters and AdamW state stay f32.
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    # One FSDP unit per block, as the DPC recipe's #dp.fsdp<unit = block>; the
    # root unit holds the embedding, final norm and head.
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    return model, params


def optimizer_implementation(name, cuda):
    """fused: one kernel for many parameters, the setting a tuned baseline
    uses, for AdamW on CUDA; foreach for SGD on CUDA, whose fused kernel
    has no DTensor sharding rule (torch 2.11: "aten._fused_sgd_.default does
    not have a sharding strategy registered"); the default on the CPU."""
    if not cuda:
        return "default"
    return "fused" if name == "adamw" else "foreach"


def make_optimizer(name, params, lr, weight_decay, cuda):
    impl = optimizer_implementation(name, cuda)
    kw = {"fused": True} if impl == "fused" else {"foreach": True} if impl == "foreach" else {}
    if name == "adamw":
        # w -= lr (m^ / (sqrt(v^) + eps) + wd w): DPC's #dp.adamw, same betas
        # and eps defaults.
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **kw)
    # Plain SGD on the mean gradient g of the batch: w -= lr (g + wd w), which
    # is DPC's #dp.sgd (its gradient is the sum over the batch times 1/B).
    return torch.optim.SGD(params, lr=lr, momentum=0.0, weight_decay=weight_decay, **kw)


def measure(model, opt, tokens, targets, args, device):
    """Warm-up steps, then timed steps; returns the timed seconds, the
    warm-up seconds, the warm-up's peak allocated bytes (0 on the CPU) and the
    per-step losses (tensors)."""
    cuda = device.type == "cuda"
    losses = []

    def step():
        total = None
        for _ in range(args.accum):
            # Mean over the accum micro-batches: the gradient of the mean loss
            # of the accum x batch sequences.
            loss = model(tokens, targets)
            (loss / args.accum if args.accum > 1 else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # Kept as a tensor: .item() here would sync the GPU every step.
        losses.append(total / args.accum)

    t_warm = time.perf_counter()
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    dist.barrier()
    warm_seconds = time.perf_counter() - t_warm
    warm_peak = 0
    if cuda:
        # The timed steps get their own peak: the warm-up's holds one-offs
        # (compilation, the optimizer state's first allocation).
        warm_peak = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, warm_seconds, warm_peak, losses


def dynamo_count(group, name=None):
    """A Dynamo counter (torch._dynamo.utils.counters): one entry, or the sum
    of a group."""
    from torch._dynamo.utils import counters
    c = counters[group]
    return int(c[name]) if name else int(sum(c.values()))


def all_reduce_max(value, device):
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main(argv=None):
    t_start = time.perf_counter()
    args = parse_args(argv)
    cfg = args.cfg
    device = init_distributed(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = device.type == "cuda"
    mesh = init_device_mesh(device.type, (world,))

    model, params = build_model(cfg, args, device, mesh)

    # One fixed random batch per rank (seed + rank: ranks see different data,
    # as data-parallel ranks do). Token values do not change the work done, and
    # a fixed batch lets the loss fall, which shows training does train.
    g = torch.Generator(device=device).manual_seed(args.seed + 1 + rank)
    data = torch.randint(0, cfg.vocab, (args.batch, args.seq + 1), generator=g, device=device)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    setup_seconds = time.perf_counter() - t_start

    compiled = None
    if args.compile:
        compiled = "blocks+loss" if args.compile_loss else "blocks"
    fpt = flops_per_token(cfg, args.seq)
    # Each optimizer starts from the same weights, as in a run of its own: a
    # host copy of this rank's shards, restored before every optimizer after
    # the first (a device copy would count in the peak).
    initial = None
    if len(args.hyper) > 1:
        initial = [p.detach().to_local().to("cpu", copy=True) for p in model.parameters()]
    results = []
    for i, (opt_name, lr, wd) in enumerate(args.hyper):
        if i > 0:
            with torch.no_grad():
                for p, saved in zip(model.parameters(), initial):
                    p.to_local().copy_(saved)
        opt = make_optimizer(opt_name, model.parameters(), lr, wd, cuda)
        start_allocated = 0
        if cuda:
            torch.cuda.empty_cache()
            # Count the training steps only, not the unsharded model built above
            # (nor an earlier optimizer's run).
            torch.cuda.reset_peak_memory_stats(device)
            # The sharded parameters alone, unless something outlived an
            # earlier optimizer's run.
            start_allocated = torch.cuda.memory_allocated(device)
        elapsed, warm_seconds, warm_peak, losses = measure(
            model, opt, tokens, targets, args, device)
        timed_peak = torch.cuda.max_memory_allocated(device) if cuda else 0
        reserved = torch.cuda.max_memory_reserved(device) if cuda else 0
        run_peak = max(warm_peak, timed_peak)

        # The job is as slow as its slowest rank.
        seconds = all_reduce_max(elapsed, device)
        warm_seconds = all_reduce_max(warm_seconds, device)
        peak = all_reduce_max(run_peak, device)
        peak_timed = all_reduce_max(timed_peak, device)
        peak_reserved = all_reduce_max(reserved, device)
        # Per-step loss averaged over ranks (SUM / world: gloo has no AVG).
        loss_hist = torch.stack(losses).float()
        dist.all_reduce(loss_hist, op=dist.ReduceOp.SUM)
        loss_hist = (loss_hist / world).tolist()
        del opt

        tokens_per_step = world * args.accum * args.batch * args.seq
        tokens_total = tokens_per_step * args.steps
        gib = (lambda b: b / 2**30) if cuda else (lambda b: None)
        result = {
            "gpus": world,
            "device": args.device,
            "gpu": torch.cuda.get_device_name(device) if cuda else f"cpu ({platform.machine()})",
            "torch": torch.__version__,
            "tokens_per_s": tokens_total / seconds,
            "tokens_per_s_per_gpu": tokens_total / seconds / world,
            "s_per_step": seconds / args.steps,
            # torch.cuda.max_memory_allocated: bytes in live tensors of the
            # caching allocator (not its cached free blocks, the CUDA context
            # or NCCL's buffers), from after the model build: warm-up and
            # timed steps; _timed: the timed steps only; reserved: the most
            # the allocator held from the device in the timed steps.
            "peak_mem_gib": gib(peak),
            "peak_mem_timed_gib": gib(peak_timed),
            "peak_reserved_gib": gib(peak_reserved),
            "allocated_at_start_gib": gib(all_reduce_max(start_allocated, device)),
            "final_loss": loss_hist[-1],
            "first_loss": loss_hist[0],
            "losses": loss_hist,
            "steps": args.steps,
            "warmup": args.warmup,
            "warmup_s": warm_seconds,
            "setup_s": setup_seconds,
            "seq": args.seq,
            "batch_per_gpu": args.batch,
            "accum": args.accum,
            "tokens_per_step": tokens_per_step,
            "optimizer": opt_name,
            "optimizer_implementation": optimizer_implementation(opt_name, cuda),
            "lr": lr,
            "weight_decay": wd,
            "compile": compiled,
            "compile_backend": args.compile_backend if compiled else None,
            # Graphs Dynamo compiled and the breaks between them, over the
            # process so far: 2 graphs (a block, the loss) and no breaks is
            # torchtitan's fullgraph compile.
            "compiled_graphs": dynamo_count("stats", "unique_graphs") if compiled else None,
            "graph_breaks": dynamo_count("graph_break") if compiled else None,
            "flops_per_token": fpt,
            "model_tflops_per_s": fpt * tokens_total / seconds / 1e12,
            "params": params,
            "param_dtype": args.param_dtype,
            "attention": args.attention,
            "model": asdict(cfg),
        }
        results.append(result)
        if rank == 0:
            print_summary(result, args, params)
            if not all(math.isfinite(x) for x in loss_hist):
                print("warning: non-finite loss", flush=True)
            if args.json:
                # Rewritten after each optimizer: a run stopped in the second
                # still leaves the first's results.
                with open(args.json, "w") as f:
                    json.dump(results[0] if len(args.hyper) == 1 else results, f, indent=2)
                    f.write("\n")
    dist.destroy_process_group()
    if not cuda:
        # Gloo's worker threads free a finished collective's tensors after
        # wait() returns, which takes the GIL; if the interpreter is already
        # finalising, that thread is killed and the process aborts
        # ("terminate called without an active exception", seen with torch
        # 2.15 in about half of 2-rank runs). Everything is written and
        # flushed by now, so leave without finalising.
        os._exit(0)


def print_summary(r, args, params):
    cfg = args.cfg
    cuda = r["device"] == "cuda"
    shape = "tiny" if args.tiny and cfg == TINY else (
        "full" if cfg == FULL else
        f"vocab {cfg.vocab}, width {cfg.width}, {cfg.blocks} blocks, {cfg.heads} heads, "
        f"{cfg.kv_heads} KV heads, MLP {cfg.mlp}, RoPE theta {cfg.rope_theta:g}")
    compiled = {None: "eager", "blocks": "compiled blocks",
                "blocks+loss": "compiled blocks and loss"}[r["compile"]]
    mem = (f"{r['peak_mem_gib']:.2f} GiB (timed steps {r['peak_mem_timed_gib']:.2f}, "
           f"reserved {r['peak_reserved_gib']:.2f})" if cuda else "n/a (cpu)")
    accum = f" x {args.accum} micro-batches" if args.accum > 1 else ""
    print(
        f"FSDP2 Llama, {params:,} parameters ({shape}), "
        f"seq {args.seq} x batch {args.batch}/GPU{accum}, {args.param_dtype} compute, "
        f"f32 master, {compiled}, {r['optimizer']} ({r['optimizer_implementation']}, "
        f"lr {r['lr']:g}, weight decay {r['weight_decay']:g})\n"
        f"  GPUs            {r['gpus']} x {r['gpu']}\n"
        f"  torch           {r['torch']}\n"
        f"  tokens/s        {r['tokens_per_s']:,.1f}\n"
        f"  tokens/s/GPU    {r['tokens_per_s_per_gpu']:,.1f}\n"
        f"  model TFLOP/s   {r['model_tflops_per_s']:,.4g} per job "
        f"({r['flops_per_token'] / 1e9:.2f} GFLOP a token)\n"
        f"  s/step          {r['s_per_step']:.4f}  "
        f"({args.steps} timed after {args.warmup} warmup, {r['warmup_s']:.1f} s)\n"
        f"  peak mem/GPU    {mem}\n"
        f"  loss            {r['first_loss']:.4f} (first) -> "
        f"{r['final_loss']:.4f} (final)",
        flush=True)


if __name__ == "__main__":
    main()
