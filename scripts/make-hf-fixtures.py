#!/usr/bin/env python3
"""Writes the tiny Hugging Face checkpoints of test/fixtures/hf/.

Run by hand, never by CI, in a virtual environment of its own (git-ignored):

    python3 -m venv .venv-fixtures
    .venv-fixtures/bin/pip install torch==2.15.0 transformers==5.23.0 safetensors==0.8.0 peft==0.21.2
    .venv-fixtures/bin/python scripts/make-hf-fixtures.py            # writes test/fixtures/hf/

(torch from PyPI brings its CUDA libraries along; everything here runs on the
CPU.) The output is deterministic for these versions.

Each folder holds what `save_pretrained` writes (config.json and
model.safetensors, or shards with model.safetensors.index.json) and
reference.json: a few sequences of T + 1 token ids and, for each, the mean
next-token cross-entropy that transformers computes from the logits of the
first T tokens against the last T, once with the model in float32 and once in
float64 (the f64 numbers are the ones to compare DPC's f32 loss with at 1e-4
relative; the f32 numbers show how far transformers' own f32 is).

The weights are random but not the tiny N(0, 0.02^2) of `initializer_range`:
with those every sequence's loss is ln(vocab) to five digits, whatever the
model computes. Here matrices are N(0, 1/in), embedding tables N(0, 1/width),
norm scales 1 + N(0, 0.2^2) and biases N(0, 0.1^2), so a wrong bias, scale,
rotation or head layout changes the loss.

llama-lora is a peft LoRA adapter (save_pretrained of get_peft_model) on the
llama folder, with random A and B (B is zero when peft initializes it, which
would test nothing): its reference.json has llama's sequences and the loss of
PeftModel.from_pretrained(llama, llama-lora) in float32 and float64.
"""
import argparse
import json
import os
import shutil

import safetensors
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel,
                          LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

VOCAB = 512
SEQUENCES = 4


def randomize(model, seed):
    """Draws every parameter as the module docstring says."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "embed" in name or name.endswith(("wte.weight", "wpe.weight")):
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1]**0.5)
            else:
                # nn.Linear stores [out, in], GPT-2's Conv1D [in, out].
                fan_in = p.shape[0] if "transformer.h." in name else p.shape[1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)


def per_sequence_loss(model, tokens, dtype):
    model = model.to(dtype)
    with torch.no_grad():
        logits = model(input_ids=tokens[:, :-1]).logits
    losses = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    return [float(x) for x in losses.mean(dim=1)]


def write(root, name, model, seq, seed, dtype=torch.float32, shard=None):
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    randomize(model, seed)
    model.eval()
    # The checkpoint's values are what the reference sees: a bf16 checkpoint
    # is rounded first.
    model = model.to(dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(out, **kwargs)
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, VOCAB, (SEQUENCES, seq + 1), generator=gen)
    # The losses of the folder as transformers loads it, in each precision:
    # converting the in-memory model instead would also round its rotary
    # frequencies (a buffer, not a weight) to the storage type.
    def loaded_loss(compute):
        loaded = AutoModelForCausalLM.from_pretrained(out, dtype=compute)
        loaded.eval()
        return per_sequence_loss(loaded, tokens, compute)
    reference = {
        "seq": seq,
        "tokens": tokens.tolist(),
        "loss_f32": loaded_loss(torch.float32),
        "loss_f64": loaded_loss(torch.float64),
        "made_with": {"transformers": transformers.__version__,
                      "torch": torch.__version__.split("+")[0],
                      "safetensors": safetensors.__version__},
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{out}: {size // 1024} kB")


def write_lora(root, name, base, seed):
    """A LoRA adapter of rank 4, alpha 8 on q, v and down of the `base`
    fixture, A ~ N(0, 1/in) and B ~ N(0, 1/r)."""
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    base_dir = os.path.join(root, base)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8,
                        target_modules=["q_proj", "v_proj", "down_proj"],
                        lora_dropout=0.0, task_type="CAUSAL_LM")
    peft = get_peft_model(model, config)
    # Where the base is relative to the adapter, not where this script ran.
    peft.peft_config["default"].base_model_name_or_path = "../" + base
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in peft.named_parameters():
            if "lora_A" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1]**0.5)
            elif "lora_B" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1]**0.5)
    peft.save_pretrained(out)
    # The model card is peft's boilerplate.
    os.remove(os.path.join(out, "README.md"))
    with open(os.path.join(base_dir, "reference.json")) as f:
        tokens = torch.tensor(json.load(f)["tokens"])

    def loaded_loss(compute):
        loaded = AutoModelForCausalLM.from_pretrained(base_dir, dtype=compute)
        loaded = PeftModel.from_pretrained(loaded, out).to(compute)
        loaded.eval()
        return per_sequence_loss(loaded, tokens, compute)
    reference = {
        "seq": tokens.shape[1] - 1,
        "tokens": tokens.tolist(),
        "loss_f32": loaded_loss(torch.float32),
        "loss_f64": loaded_loss(torch.float64),
        "made_with": {"transformers": transformers.__version__,
                      "peft": peft_version(),
                      "torch": torch.__version__.split("+")[0],
                      "safetensors": safetensors.__version__},
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{out}: {size // 1024} kB")


def peft_version():
    import peft
    return peft.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(__file__), "..", "test", "fixtures", "hf"))
    root = ap.parse_args().out
    torch.manual_seed(0)

    llama = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, rms_norm_eps=1e-5,
                 max_position_embeddings=64, tie_word_embeddings=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                 bos_token_id=1, eos_token_id=2)
    write(root, "llama", LlamaForCausalLM(LlamaConfig(**llama)), 32, seed=1)
    write_lora(root, "llama-lora", "llama", seed=6)

    # head_dim 16 is not hidden / heads = 8: q, k and v are wider than the
    # residual stream. The window (32) covers the 16 tokens.
    mistral = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   intermediate_size=64, rms_norm_eps=1e-6,
                   max_position_embeddings=64, sliding_window=32,
                   rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                   hidden_act="silu", bos_token_id=1, eos_token_id=2)
    write(root, "mistral", MistralForCausalLM(MistralConfig(**mistral)), 16, seed=2)
    write(root, "mistral-sharded", MistralForCausalLM(MistralConfig(**mistral)),
          16, seed=2, shard="100KB")

    qwen2 = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=64, rms_norm_eps=1e-6,
                 max_position_embeddings=64, tie_word_embeddings=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                 use_sliding_window=False, bos_token_id=1, eos_token_id=2)
    write(root, "qwen2-tied", Qwen2ForCausalLM(Qwen2Config(**qwen2)), 16, seed=3)

    gpt2 = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                n_positions=64, activation_function="gelu_new",
                layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0,
                attn_pdrop=0.0, summary_first_dropout=0.0,
                bos_token_id=1, eos_token_id=2)
    write(root, "gpt2", GPT2LMHeadModel(GPT2Config(**gpt2)), 16, seed=4)

    llama3 = dict(llama, hidden_size=32, intermediate_size=64,
                  rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                   "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 16})
    write(root, "llama3-rope", LlamaForCausalLM(LlamaConfig(**llama3)), 16,
          seed=5, dtype=torch.bfloat16)


if __name__ == "__main__":
    main()
