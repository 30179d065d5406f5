"""tiktoken as dpc-prepare's fast engine for byte-level BPE tokenizers.

The tokenizers package spends about half of its time in the GPT-2
pre-tokenization regex and byte mapping; tiktoken (OpenAI's BPE, Rust)
encodes the same BPE several times faster on one core. It gives the same ids
only for tokenizers of one shape, so `convert` accepts a tokenizer.json only
when every part of it is one tiktoken reproduces, and says why not otherwise:

- the model is BPE without dropout, byte fallback, continuing-subword prefix
  or end-of-word suffix, over the GPT-2 byte alphabet (all 256 byte tokens);
- no normalizer;
- the pre-tokenizer is ByteLevel with GPT-2's regex (GPT-2, its
  descendants) or a Split by an explicit regex (behavior Isolated) then
  ByteLevel without its regex (Llama 3, Qwen 2), never adding a prefix
  space;
- tiktoken merges the adjacent pair whose joined bytes have the lowest rank
  and returns ranks as ids, while tokenizers merges by the merges list's
  order: so a token's id is its rank, and the merges' results must have
  increasing ids and be produced by one merge each.

Even then equivalence is not proven (tiktoken may join a pair the merges
list does not hold), so dpc-prepare also encodes its first records with both
engines and falls back to tokenizers on the first difference. Added tokens
(special tokens matched in the text by tokenizers) are encoded by
tokenizers: a text containing one never goes through tiktoken.
"""

import re


# GPT-2's pre-tokenization regex: what ByteLevel(use_regex=True) splits by.
GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+"
                r"| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")


def _byte_decoder():
    """GPT-2's map from the printable stand-in characters to bytes."""
    bs = (list(range(ord("!"), ord("~") + 1)) +
          list(range(ord("\u00a1"), ord("\u00ac") + 1)) +
          list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _pattern(pre):
    """The tiktoken pattern of a pre-tokenizer, or (None, why not)."""
    if pre is None:
        return None, "it has no pre-tokenizer"
    kind = pre.get("type")
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            return None, "its ByteLevel pre-tokenizer adds a prefix space"
        if not pre.get("use_regex", True):
            return None, "its ByteLevel pre-tokenizer splits by no regex"
        return GPT2_PATTERN, None
    if kind == "Sequence":
        parts = pre.get("pretokenizers") or []
        if len(parts) != 2 or parts[0].get("type") != "Split" or \
                parts[1].get("type") != "ByteLevel":
            return None, "its pre-tokenizer is not Split then ByteLevel"
        split, level = parts
        regex = (split.get("pattern") or {}).get("Regex")
        if regex is None:
            return None, "its Split pre-tokenizer has no regex"
        if split.get("behavior") != "Isolated" or split.get("invert"):
            return None, "its Split pre-tokenizer does not isolate matches"
        if level.get("add_prefix_space") or level.get("use_regex", True):
            return None, "its ByteLevel pre-tokenizer adds a prefix space " \
                "or splits again"
        return regex, None
    return None, f"its pre-tokenizer is {kind}"


def convert(data):
    """(tiktoken.Encoding, None) or (None, why not) for a tokenizer.json's
    parsed contents."""
    try:
        import tiktoken
    except ImportError:
        return None, "the tiktoken package is not installed"
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        return None, f"its model is {model.get('type')}, not BPE"
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            return None, f"its BPE model has {key}"
    if model.get("byte_fallback"):
        return None, "its BPE model has byte_fallback"
    if data.get("normalizer") is not None:
        return None, "it has a normalizer"
    pattern, why = _pattern(data.get("pre_tokenizer"))
    if pattern is None:
        return None, why

    decoder = _byte_decoder()
    ranks = {}
    for token, rank in model.get("vocab", {}).items():
        try:
            ranks[bytes(decoder[c] for c in token)] = rank
        except KeyError:
            return None, f"its vocabulary has {token!r}, not byte-level"
    if sum(1 for b in ranks if len(b) == 1) < 256:
        return None, "its vocabulary lacks some of the 256 byte tokens"
    last = -1
    produced = set()
    for merge in model.get("merges", []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        joined = bytes(decoder[c] for c in left + right)
        rank = ranks.get(joined)
        if rank is None:
            return None, f"its merge {left!r} {right!r} makes no token"
        if rank <= last:
            return None, "its merges' tokens do not have increasing ids"
        if joined in produced:
            return None, f"two merges make {left + right!r}"
        produced.add(joined)
        last = rank
    try:
        encoding = tiktoken.Encoding("dpc-prepare", pat_str=pattern,
                                     mergeable_ranks=ranks,
                                     special_tokens={})
    except Exception as e:  # tiktoken raises ValueError and Rust panics
        return None, f"tiktoken refused it: {e}"
    return encoding, None


def added_token_pattern(data):
    """A regex finding any added token's text (in a tokenizer.json's parsed
    contents), or None without any."""
    contents = [t["content"] for t in data.get("added_tokens") or []
                if t.get("content")]
    if not contents:
        return None
    contents.sort(key=len, reverse=True)
    return re.compile("|".join(re.escape(c) for c in contents))
