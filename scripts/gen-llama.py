#!/usr/bin/env python3
"""Writes a Llama-shaped decoder as dp dialect IR.

Used to produce examples/llama-1b.mlir (the benchmark model of BRIEF.md):
    scripts/gen-llama.py --vocab 32000 --width 2048 --blocks 16 --heads 32 \
        --kv-heads 8 --mlp 8192 --seq 1024 --dtype bf16 > examples/llama-1b.mlir
"""
import argparse


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--name", default="llama")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--mlp", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8, help="physical batch per rank")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--clip", choices=["flat", "per_layer", "automatic"],
                    default="flat")
    ap.add_argument("--shards", type=int, default=0,
                    help="hybrid sharding: a grid of ? replicas x SHARDS "
                    "(default: FSDP over every rank)")
    a = ap.parse_args()

    d, v, t, f, dt = a.width, a.vocab, a.seq, a.mlp, a.dtype
    hd = d // a.heads
    kv = a.kv_heads * hd
    act = lambda w: f"tensor<?x{t}x{w}x{dt}>"
    out = []
    w = out.append
    w(f"// Llama-shaped decoder: vocab {v}, width {d}, {a.blocks} blocks, {a.heads} heads,")
    w(f"// {a.kv_heads} KV heads, MLP {f}, {t} tokens. Written by scripts/gen-llama.py.")
    w("")
    w(f"shard.grid @ranks(shape = ?x{a.shards})" if a.shards > 0
      else "shard.grid @ranks(shape = ?)")
    w("")
    w(f"dp.model @{a.name} attributes {{vocab = {v}, seq = {t}, width = {d}, blocks = {a.blocks}}} {{")
    w(f"  dp.param @emb : tensor<{v}x{d}x{dt}> {{init = #dp.normal<0.02>}}")
    for b in range(a.blocks):
        w(f"  dp.param @b{b}.n1 : tensor<{d}x{dt}> {{init = #dp.ones}}")
        w(f"  dp.param @b{b}.wq : tensor<{d}x{d}x{dt}>")
        w(f"  dp.param @b{b}.wk : tensor<{kv}x{d}x{dt}>")
        w(f"  dp.param @b{b}.wv : tensor<{kv}x{d}x{dt}>")
        w(f"  dp.param @b{b}.wo : tensor<{d}x{d}x{dt}>")
        w(f"  dp.param @b{b}.n2 : tensor<{d}x{dt}> {{init = #dp.ones}}")
        w(f"  dp.param @b{b}.gate : tensor<{f}x{d}x{dt}>")
        w(f"  dp.param @b{b}.up : tensor<{f}x{d}x{dt}>")
        w(f"  dp.param @b{b}.down : tensor<{d}x{f}x{dt}>")
    w(f"  dp.param @norm : tensor<{d}x{dt}> {{init = #dp.ones}}")
    w(f"  dp.param @head : tensor<{v}x{d}x{dt}>")
    w("")
    w(f"  dp.forward(%tok: tensor<?x{t}xi32>, %tgt: tensor<?x{t}xi32>) -> tensor<?xf32> {{")
    w(f"    %x0 = dp.embedding @emb(%tok) : tensor<?x{t}xi32> -> {act(d)}")
    for b in range(a.blocks):
        x, y = f"%x{b}", f"%x{b + 1}"
        w(f"    %h{b} = dp.rms_norm @b{b}.n1({x}) {{eps = 1.0e-5}} : {act(d)}")
        w(f"    %q{b} = dp.linear @b{b}.wq(%h{b}) : {act(d)} -> {act(d)}")
        w(f"    %k{b} = dp.linear @b{b}.wk(%h{b}) : {act(d)} -> {act(kv)}")
        w(f"    %v{b} = dp.linear @b{b}.wv(%h{b}) : {act(d)} -> {act(kv)}")
        w(f"    %a{b} = dp.attention %q{b}, %k{b}, %v{b} {{causal, heads = {a.heads}, kv_heads = {a.kv_heads}, rope, rope_theta = {a.rope_theta}}} : {act(d)}, {act(kv)}")
        w(f"    %o{b} = dp.linear @b{b}.wo(%a{b}) : {act(d)} -> {act(d)}")
        w(f"    %r{b} = dp.add {x}, %o{b} : {act(d)}")
        w(f"    %m{b} = dp.rms_norm @b{b}.n2(%r{b}) {{eps = 1.0e-5}} : {act(d)}")
        w(f"    %g{b} = dp.linear @b{b}.gate(%m{b}) : {act(d)} -> {act(f)}")
        w(f"    %u{b} = dp.linear @b{b}.up(%m{b}) : {act(d)} -> {act(f)}")
        w(f"    %s{b} = dp.silu %g{b} : {act(f)}")
        w(f"    %p{b} = dp.mul %s{b}, %u{b} : {act(f)}")
        w(f"    %d{b} = dp.linear @b{b}.down(%p{b}) : {act(f)} -> {act(d)}")
        w(f"    {y} = dp.add %r{b}, %d{b} : {act(d)}")
    w(f"    %f = dp.rms_norm @norm(%x{a.blocks}) {{eps = 1.0e-5}} : {act(d)}")
    w(f"    %logits = dp.linear @head(%f) : {act(d)} -> {act(v)}")
    w(f"    %loss = dp.cross_entropy %logits, %tgt per_sample = mean ignore_index = -1 : {act(v)}, tensor<?x{t}xi32> -> tensor<?xf32>")
    w("    dp.return %loss : tensor<?xf32>")
    w("  }")
    w("}")
    w("")
    w(f"dp.recipe @train for @{a.name} {{")
    w(f"  clip = #dp.clip<{a.clip}, max_norm = 1.0>,")
    w("  noise = #dp.target<epsilon = 8.0, delta = 1.0e-6>,")
    w(f"  sampling = #dp.poisson<expected_batch = 256, physical_batch = {a.batch}>,")
    w("  optimizer = #dp.adamw<lr = 3.0e-4, weight_decay = 0.0>,"
      if a.optimizer == "adamw" else "  optimizer = #dp.sgd<lr = 1.0e-3>,")
    w("  steps = 1000,")
    w(f"  precision = #dp.precision<compute = {dt}, master = f32>,")
    w("  shard = #dp.fsdp<unit = block, prefetch = 1>,")
    w("  grid = @ranks")
    w("}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
