#!/usr/bin/env python3
"""Training throughput of PyTorch FSDP2, without differential privacy, on the
1.1B Llama-shaped model of examples/llama-1b.mlir.

This is the non-private baseline that DPC's DP training is compared against
(docs/PERFORMANCE.md). It measures tokens per second of full training steps
(forward, backward, AdamW step, zero_grad) on random tokens, and the peak
GPU memory per rank.

Model: vocab 32000, width 2048, 16 blocks, 32 heads, 8 KV heads (head dim 64),
SwiGLU MLP 8192, pre-norm RMSNorm and a final RMSNorm, rotary embeddings on
q and k, untied output head, no biases, causal attention, mean per-token
cross-entropy; 1024 tokens, 8 sequences per GPU per step.
Sharding: fully_shard on each block, then on the root; bf16 compute,
f32 reductions and f32 master weights; fused AdamW (lr 1e-4, weight decay 0.1).

Run (N = 1, 2 or 4 GPUs):
    torchrun --standalone --nproc_per_node N bench/fsdp2-llama.py \\
        --steps 10 --warmup 3 --json OUT.json
One GPU without torchrun (still sharded, on a 1-rank group):
    python3 bench/fsdp2-llama.py
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
from dataclasses import asdict, dataclass

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
        logits = self.head(self.norm(x))
        # log-softmax over the vocabulary in f32, as DPC's cross_entropy
        # accumulates (runtime/cuda/Losses.cu); mean over every token of
        # every sequence.
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def count_params(model):
    return sum(p.numel() for p in model.parameters())


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

    ap.add_argument("--steps", type=positive, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=non_negative, default=3,
                    help="untimed steps first (default 3)")
    ap.add_argument("--seq", type=positive, default=None,
                    help="tokens per sequence (default 1024; 32 with --tiny)")
    ap.add_argument("--batch", type=positive, default=None,
                    help="sequences per GPU per step (default 8; 2 with --tiny)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda: NCCL, one GPU per rank; cpu: gloo, for checks")
    ap.add_argument("--tiny", action="store_true",
                    help="vocab 256, width 64, 2 blocks, 4 heads, 2 KV heads, MLP 128")
    ap.add_argument("--param-dtype", choices=["bf16", "f32"], default="bf16",
                    help="compute (all-gathered parameter) dtype; masters stay f32")
    ap.add_argument("--attention", choices=["gqa", "repeat"], default="gqa",
                    help="gqa: SDPA enable_gqa=True; repeat: repeat_interleave k and v")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="rank 0 writes the results here")
    a = ap.parse_args(argv)
    if a.seq is None:
        a.seq = 32 if a.tiny else 1024
    if a.batch is None:
        a.batch = 2 if a.tiny else 8
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


def main(argv=None):
    args = parse_args(argv)
    cfg = TINY if args.tiny else FULL
    device = init_distributed(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = device.type == "cuda"
    mesh = init_device_mesh(device.type, (world,))

    model, params = build_model(cfg, args, device, mesh)
    # Fused AdamW updates many parameters per kernel launch on CUDA, the fast
    # setting a tuned baseline would use; the CPU checks use the default.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            fused=True if cuda else None)

    # One fixed random batch per rank (seed + rank: ranks see different data,
    # as data-parallel ranks do). Token values do not change the work done, and
    # a fixed batch lets the loss fall, which shows training does train.
    g = torch.Generator(device=device).manual_seed(args.seed + 1 + rank)
    data = torch.randint(0, cfg.vocab, (args.batch, args.seq + 1), generator=g, device=device)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    if cuda:
        torch.cuda.empty_cache()
        # Count the training steps only, not the unsharded model built above.
        torch.cuda.reset_peak_memory_stats(device)

    losses = []

    def step():
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # Kept as a tensor: .item() here would sync the GPU every step.
        losses.append(loss.detach())

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - t0

    # The job is as slow as its slowest rank.
    t = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    seconds = t.item()
    peak = torch.tensor([torch.cuda.max_memory_allocated(device) if cuda else 0],
                        dtype=torch.float64, device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    # Per-step loss averaged over ranks (SUM / world: gloo has no AVG).
    loss_hist = torch.stack(losses).float()
    dist.all_reduce(loss_hist, op=dist.ReduceOp.SUM)
    loss_hist = (loss_hist / world).tolist()

    tokens_total = world * args.batch * args.seq * args.steps
    result = {
        "gpus": world,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(device) if cuda else f"cpu ({platform.machine()})",
        "torch": torch.__version__,
        "tokens_per_s": tokens_total / seconds,
        "tokens_per_s_per_gpu": tokens_total / seconds / world,
        "s_per_step": seconds / args.steps,
        "peak_mem_gib": peak.item() / 2**30 if cuda else None,
        "final_loss": loss_hist[-1],
        "first_loss": loss_hist[0],
        "losses": loss_hist,
        "steps": args.steps,
        "warmup": args.warmup,
        "seq": args.seq,
        "batch_per_gpu": args.batch,
        "params": params,
        "param_dtype": args.param_dtype,
        "attention": args.attention,
        "model": asdict(cfg),
    }
    if rank == 0:
        mem = f"{result['peak_mem_gib']:.2f} GiB" if cuda else "n/a (cpu)"
        print(
            f"FSDP2 Llama, {params:,} parameters ({'tiny' if args.tiny else 'full'}), "
            f"seq {args.seq} x batch {args.batch}/GPU, {args.param_dtype} compute, f32 master\n"
            f"  GPUs            {world} x {result['gpu']}\n"
            f"  torch           {result['torch']}\n"
            f"  tokens/s        {result['tokens_per_s']:,.1f}\n"
            f"  tokens/s/GPU    {result['tokens_per_s_per_gpu']:,.1f}\n"
            f"  s/step          {result['s_per_step']:.4f}  "
            f"({args.steps} timed after {args.warmup} warmup)\n"
            f"  peak mem/GPU    {mem}\n"
            f"  loss            {result['first_loss']:.4f} (first) -> "
            f"{result['final_loss']:.4f} (final)",
            flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
        if not all(math.isfinite(x) for x in loss_hist):
            print("warning: non-finite loss", flush=True)
    dist.destroy_process_group()
    if not cuda:
        # Gloo's worker threads free a finished collective's tensors after
        # wait() returns, which takes the GIL; if the interpreter is already
        # finalising, that thread is killed and the process aborts
        # ("terminate called without an active exception", seen with torch
        # 2.15 in about half of 2-rank runs). Everything is written and
        # flushed by now, so leave without finalising.
        os._exit(0)


if __name__ == "__main__":
    main()
