"""dpc-prepare against the tokenizers package it wraps.

Run by ctest with the project's .venv (DPC_PREPARE: the built launcher,
DPC_SOURCE_DIR: the checkout), one test class per ctest test:

    DPC_PREPARE=build/bin/dpc-prepare DPC_SOURCE_DIR=. \
        .venv/bin/python -m unittest test/prepare/test_prepare.py
"""

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

from safetensors import safe_open
from tokenizers import Tokenizer, processors

PREPARE = os.environ.get("DPC_PREPARE", "build/bin/dpc-prepare")
SOURCE = os.environ.get("DPC_SOURCE_DIR", ".")
TOKENIZER_DIR = os.path.join(SOURCE, "test", "fixtures", "tokenizer")
INPUTS = os.path.join(SOURCE, "test", "prepare", "Inputs")
EOS = "<|endoftext|>"


def tokenizer():
    return Tokenizer.from_file(os.path.join(TOKENIZER_DIR, "tokenizer.json"))


def read_token_file(path):
    """(metadata, records) with records a list of (ids, mask, user)."""
    with safe_open(path, "numpy") as f:
        meta = f.metadata()
        keys = set(f.keys())
        offsets = f.get_tensor("offsets")
        ids = f.get_tensor("tokens")
        mask = f.get_tensor("loss_mask")
        users = f.get_tensor("users") if "users" in keys else None
    assert offsets.dtype.name == "int64" and ids.dtype.name == "uint32"
    assert mask.dtype.name == "uint8" and len(mask) == len(ids)
    records = []
    for r in range(len(offsets) - 1):
        b, e = int(offsets[r]), int(offsets[r + 1])
        records.append((ids[b:e].tolist(), mask[b:e].tolist(),
                        None if users is None else int(users[r])))
    return meta, records


class PrepareCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dpc-prepare-test-")
        self.tok = tokenizer()
        self.eos = self.tok.token_to_id(EOS)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, content):
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(self.path(name), mode) as f:
            f.write(content)
        return self.path(name)

    def write_jsonl(self, name, records):
        return self.write(name, "".join(json.dumps(r) + "\n"
                                        for r in records))

    def prepare(self, *inputs, tokenizer_dir=TOKENIZER_DIR, extra=(),
                env=None):
        out = self.path("out.tokens")
        proc = subprocess.run(
            [PREPARE, "--tokenizer", tokenizer_dir, *inputs, "-o", out,
             *extra], capture_output=True, text=True,
            env=dict(os.environ, **(env or {})))
        return proc, out

    def prepare_ok(self, *inputs, **kwargs):
        proc, out = self.prepare(*inputs, **kwargs)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return read_token_file(out)

    def copy_tokenizer(self):
        """A writable copy of the test tokenizer's folder."""
        folder = self.path("model")
        shutil.copytree(TOKENIZER_DIR, folder)
        return folder


class TokenIds(PrepareCase):
    """The ids are the tokenizers package's own for the same text."""

    def test_text_lines_are_encoded_with_the_post_processor_then_eos(self):
        path = os.path.join(INPUTS, "lines.txt")
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\r\n") for line in f]
        lines = [line for line in lines if line]
        meta, records = self.prepare_ok(path)
        self.assertEqual(len(records), len(lines))
        for line, (ids, mask, user) in zip(lines, records):
            expected = self.tok.encode(line, add_special_tokens=True).ids
            self.assertEqual(ids, expected + [self.eos], line)
            self.assertEqual(mask, [1] * len(ids))
            self.assertIsNone(user)
        self.assertEqual(meta["format"], "dpc-tokens")
        self.assertEqual(meta["format_version"], "1")
        self.assertEqual(meta["vocab_size"], "512")
        self.assertEqual(meta["eos_id"], str(self.eos))
        self.assertEqual(meta["records"], str(len(lines)))
        self.assertEqual(meta["tokens"], str(sum(len(r[0]) for r in records)))
        self.assertEqual(meta["users"], "0")

    def test_content_digest_covers_the_data(self):
        path = os.path.join(INPUTS, "records.jsonl")
        proc, out = self.prepare(path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out, "rb") as f:
            header = int.from_bytes(f.read(8), "little")
            f.seek(8 + header)
            data = f.read()
        with safe_open(out, "numpy") as f:
            meta = f.metadata()
        self.assertEqual(meta["content_sha256"],
                         hashlib.sha256(data).hexdigest())
        # offsets, users, tokens, mask and nothing else.
        records, tokens = int(meta["records"]), int(meta["tokens"])
        self.assertEqual(len(data), 8 * (records + 1) + 8 * records +
                         5 * tokens)

    def test_many_batches_in_order(self):
        # More than one batch (1 MiB) of varied lines, with the end-of-text
        # token once inside a line (the tokenizer reads it as the special
        # token, as transformers does by default).
        rng = random.Random(7)
        words = ["the", "café", "privacy", "東京", "gradient", "42", "x"]
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 60)))
                 for _ in range(16000)]
        lines[5] += EOS + " more"
        path = self.write("many.txt", "\n".join(lines) + "\n")
        self.assertGreater(os.path.getsize(path), 1 << 20)
        _, records = self.prepare_ok(path)
        expected = self.tok.encode_batch(lines, add_special_tokens=True)
        self.assertEqual(len(records), len(lines))
        for e, (ids, _, _) in zip(expected, records):
            self.assertEqual(ids, e.ids + [self.eos])

    def test_jsonl_text_records(self):
        texts = ["One document.", " Two, with a space.", "Trois: café"]
        path = self.write_jsonl("t.jsonl", [{"text": t} for t in texts])
        _, records = self.prepare_ok(path)
        for t, (ids, mask, _) in zip(texts, records):
            self.assertEqual(ids, self.tok.encode(t).ids + [self.eos])
            self.assertEqual(mask, [1] * len(ids))

    def test_a_bos_adding_post_processor_is_followed(self):
        # A Llama-like post-processor puts a BOS before every document; one
        # that also ends documents with the end-of-text token gets no
        # second one.
        for template, bos, eos_added in (("<|im_start|> $A", True, False),
                                         ("<|im_start|> $A <|endoftext|>",
                                          True, True)):
            folder = self.copy_tokenizer()
            tok = tokenizer()
            tok.post_processor = processors.TemplateProcessing(
                single=template, special_tokens=[
                    ("<|im_start|>", tok.token_to_id("<|im_start|>")),
                    (EOS, self.eos)])
            tok.save(os.path.join(folder, "tokenizer.json"))
            _, records = self.prepare_ok(self.write("d.txt", "Hello world\n"),
                                         tokenizer_dir=folder)
            ids = records[0][0]
            body = self.tok.encode("Hello world").ids
            self.assertEqual(ids, [tok.token_to_id("<|im_start|>")] * bos +
                             body + [self.eos], template)
            shutil.rmtree(folder)

    def test_vocabulary_size_from_config_json_and_option(self):
        folder = self.copy_tokenizer()
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"vocab_size": 640}, f)
        path = self.write("d.txt", "Hello\n")
        meta, _ = self.prepare_ok(path, tokenizer_dir=folder)
        self.assertEqual(meta["vocab_size"], "640")
        meta, _ = self.prepare_ok(path, extra=["--vocab-size", "600"])
        self.assertEqual(meta["vocab_size"], "600")

    def test_several_inputs_are_concatenated(self):
        a = self.write("a.txt", "first\nsecond\n")
        b = self.write_jsonl("b.jsonl", [{"text": "third"}])
        _, records = self.prepare_ok(a, b)
        self.assertEqual([self.tok.decode(r[0][:-1]) for r in records],
                         ["first", "second", "third"])


class Engines(PrepareCase):
    """--engine tiktoken (the default where it applies) writes the token
    file --engine tokenizers writes, byte for byte; tokenizers tiktoken
    cannot reproduce, and a difference found at run time, fall back to
    tokenizers (docs/data.md, "Engines")."""

    # Unicode, digits, whitespace runs, contractions, emoji, an added
    # token's text inside a line, code.
    VARIED = [
        "Hello, world! It's 2026 and we're tokenizing.",
        "  leading spaces\tand\ttabs   and trailing   ",
        "caf\u00e9 na\u00efve \u00fcber \u0441\u043b\u043e\u0432\u043e "
        "\u4e2d\u6587 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
        "emoji \U0001f600\U0001f680 and \u2764\ufe0f in text",
        "numbers 3.14159 1,000,000 0x1F 42nd",
        "she'll they've I'd you're it's O'Neil's",
        "def f(x):\n    return x ** 2  # comment",
        "an <|endoftext|> inside a line",
        "!!!??? ... --- ***",
        "",
        "x" * 3000,
    ]

    def run_engines(self, *inputs, tokenizer_dir=TOKENIZER_DIR):
        outs = {}
        for engine in ("tokenizers", "tiktoken"):
            out = self.path(f"{engine}.tokens")
            proc = subprocess.run(
                [PREPARE, "--tokenizer", tokenizer_dir, *inputs, "-o", out,
                 "--engine", engine, "--skip-empty"],
                capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn(f"engine {engine}", proc.stderr)
            with open(out, "rb") as f:
                outs[engine] = f.read()
        return outs

    def test_text_lines_give_the_same_file(self):
        rng = random.Random(7)
        words = [w for line in self.VARIED for w in line.split(" ") if w]
        lines = self.VARIED + [" ".join(rng.choice(words) for _ in
                                        range(rng.randrange(1, 40)))
                               for _ in range(3000)]
        path = self.write("varied.txt", "\n".join(lines) + "\n")
        outs = self.run_engines(path)
        self.assertEqual(outs["tokenizers"], outs["tiktoken"])

    def test_prompt_completion_and_text_jsonl_give_the_same_file(self):
        records = [{"prompt": p, "completion": c}
                   for p, c in zip(self.VARIED, reversed(self.VARIED)) if c]
        records += [{"text": t} for t in self.VARIED if t]
        path = self.write_jsonl("varied.jsonl", records)
        outs = self.run_engines(path)
        self.assertEqual(outs["tokenizers"], outs["tiktoken"])

    def test_a_tokenizer_tiktoken_cannot_reproduce_falls_back(self):
        folder = self.copy_tokenizer()
        path = os.path.join(folder, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        data["normalizer"] = {"type": "NFC"}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        text = self.write("a.txt", "one line\n")
        proc, _ = self.prepare(text, tokenizer_dir=folder)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("engine tokenizers (not tiktoken: it has a normalizer)",
                      proc.stderr)
        proc, _ = self.prepare(text, tokenizer_dir=folder,
                               extra=["--engine", "tiktoken"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--engine tiktoken: it has a normalizer", proc.stderr)

    def test_a_difference_at_run_time_falls_back_to_tokenizers(self):
        # Without its first merge tokenizers never joins that pair, while
        # tiktoken joins any pair whose bytes are a token: the static checks
        # pass and only the run-time comparison can see it.
        folder = self.copy_tokenizer()
        path = os.path.join(folder, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        first = data["model"]["merges"].pop(0)
        left, right = first.split(" ", 1) if isinstance(first, str) \
            else first
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        # The pair in plain text (GPT-2's stand-in characters of ASCII are
        # the characters themselves).
        pair = (left + right).replace("\u0120", " ")
        lines = ["12345"] * 5 + [f"x{pair}y {pair}"]
        self.assertNotIn(pair, "12345")
        text = self.write("pair.txt", "\n".join(lines) + "\n")
        proc, out = self.prepare(text, tokenizer_dir=folder)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("warning: tiktoken and tokenizers give different ids "
                      f"for {text}:6", proc.stderr)
        self.assertIn(f"engine tokenizers (tiktoken differed on {text}:6)",
                      proc.stderr)
        tok = Tokenizer.from_file(path)
        eos = tok.token_to_id(EOS)
        _, records = read_token_file(out)
        for line, (ids, _, _) in zip(lines, records):
            self.assertEqual(ids, tok.encode(line).ids + [eos])


class LossMask(PrepareCase):
    """The loss mask covers exactly what the model is trained to write."""

    def test_prompt_completion_masks_completion_and_eos(self):
        path = os.path.join(INPUTS, "records.jsonl")
        with open(path) as f:
            raw = [json.loads(line) for line in f if line.strip()]
        _, records = self.prepare_ok(path)
        self.assertEqual(len(records), len(raw))
        checked = 0
        for value, (ids, mask, _) in zip(raw, records):
            if "prompt" not in value:
                continue
            p = self.tok.encode(value["prompt"], add_special_tokens=False).ids
            c = self.tok.encode(value["completion"],
                                add_special_tokens=False).ids
            self.assertEqual(ids, p + c + [self.eos])
            self.assertEqual(mask, [0] * len(p) + [1] * (len(c) + 1))
            checked += 1
        self.assertEqual(checked, 4)

    def test_chat_masks_the_assistant_turns(self):
        messages = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello there"},
                    {"role": "user", "content": "Bye"},
                    {"role": "assistant", "content": "Goodbye"}]
        path = self.write_jsonl("chat.jsonl", [{"messages": messages}])
        _, [(ids, mask, _)] = self.prepare_ok(path)
        rendered = "".join(f"<|im_start|>{m['role']}\n{m['content']}"
                           "<|im_end|>\n" for m in messages)
        self.assertEqual(ids, self.tok.encode(rendered).ids + [self.eos])
        in_loss = [i for i, m in zip(ids, mask) if m]
        self.assertEqual(
            self.tok.decode(in_loss, skip_special_tokens=False),
            "Hello there<|im_end|>\nGoodbye<|im_end|>\n" + EOS)

    def test_chat_ending_with_a_user_turn_leaves_eos_out(self):
        messages = [{"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                    {"role": "user", "content": "Bye"}]
        path = self.write_jsonl("chat.jsonl", [{"messages": messages}])
        _, [(ids, mask, _)] = self.prepare_ok(path)
        self.assertEqual(ids[-1], self.eos)
        self.assertEqual(mask[-1], 0)
        self.assertEqual(self.tok.decode([i for i, m in zip(ids, mask) if m],
                                         skip_special_tokens=False),
                         "Hello<|im_end|>\n")

    def test_chat_template_jinja_file_comes_first(self):
        # Newer transformers save the template as chat_template.jinja.
        folder = self.copy_tokenizer()
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write("{% for m in messages %}[{{ m['role'] }}] "
                    "{{ m['content'] }}\n{% endfor %}"
                    "{% if add_generation_prompt %}[assistant] {% endif %}")
        messages = [{"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"}]
        path = self.write_jsonl("chat.jsonl", [{"messages": messages}])
        _, [(ids, mask, _)] = self.prepare_ok(path, tokenizer_dir=folder)
        self.assertEqual(ids, self.tok.encode(
            "[user] Hi\n[assistant] Hello\n").ids + [self.eos])
        # The generation prompt's space and "Hello" are one token: in the
        # loss, since the model writes it.
        self.assertEqual(self.tok.decode([i for i, m in zip(ids, mask) if m],
                                         skip_special_tokens=False),
                         " Hello\n" + EOS)

    def test_chat_template_that_is_not_prefix_stable(self):
        # A template that writes the number of turns first cannot say where
        # an assistant turn lies in the whole conversation.
        folder = self.copy_tokenizer()
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write("{{ messages | length }}{% for m in messages %}"
                    "{{ m['content'] }}{% endfor %}")
        path = self.write_jsonl("chat.jsonl", [{"messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}]}])
        proc, out = self.prepare(path, tokenizer_dir=folder)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn(f"{path}:1: the chat template does not render the "
                      "conversation up to messages[1] as a prefix",
                      proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_empty_completion_is_an_error_or_skipped_and_counted(self):
        path = self.write_jsonl("pc.jsonl", [
            {"prompt": "Q1", "completion": " A1"},
            {"prompt": "Q2", "completion": ""},
            {"prompt": "Q3", "completion": " A3"}])
        proc, out = self.prepare(path)
        self.assertEqual(proc.returncode, 2)
        self.assertIn(f"{path}:2: the completion is empty", proc.stderr)
        self.assertFalse(os.path.exists(out))
        meta, records = self.prepare_ok(path, extra=["--skip-empty"])
        self.assertEqual(len(records), 2)
        self.assertEqual(meta["skipped_records"], "1")


class Users(PrepareCase):
    def test_users_are_dense_in_order_of_first_appearance(self):
        path = self.write_jsonl("u.jsonl", [
            {"text": "a", "user": "zoe"}, {"text": "b", "user": 12},
            {"text": "c", "user": "zoe"}, {"text": "d", "user": "12"},
            {"text": "e", "user": "adam"}])
        meta, records = self.prepare_ok(path)
        # 12 and "12" name the same user: merging can only make the privacy
        # unit coarser.
        self.assertEqual([r[2] for r in records], [0, 1, 0, 1, 2])
        self.assertEqual(meta["users"], "3")

    def test_no_users_no_tensor(self):
        path = self.write_jsonl("u.jsonl", [{"text": "a"}, {"text": "b"}])
        out = self.prepare(path)[1]
        with safe_open(out, "numpy") as f:
            self.assertNotIn("users", f.keys())


class Errors(PrepareCase):
    """Bad input: one line naming the file (and line), exit status 2, no
    traceback, no output file."""

    def assert_error(self, proc_out, *needles, status=2):
        proc, out = proc_out
        self.assertEqual(proc.returncode, status, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertTrue(proc.stderr.startswith("dpc-prepare: error: "),
                        proc.stderr)
        for needle in needles:
            self.assertIn(needle, proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(self.tmp)
                          if n.startswith(".dpc-prepare-") or
                          n.endswith(".partial")], [])

    def test_tokenizer_folder_without_tokenizer_json(self):
        folder = self.path("empty-model")
        os.mkdir(folder)
        self.assert_error(self.prepare(self.write("a.txt", "x\n"),
                                       tokenizer_dir=folder),
                          f"{folder}: no tokenizer.json")

    def test_tokenizer_json_that_is_not_one(self):
        folder = self.copy_tokenizer()
        self.write("model/tokenizer.json", "{\"version\": 1}")
        self.assert_error(self.prepare(self.write("a.txt", "x\n"),
                                       tokenizer_dir=folder),
                          "tokenizer.json: not a tokenizers file")

    def test_no_eos_token(self):
        folder = self.copy_tokenizer()
        os.unlink(os.path.join(folder, "tokenizer_config.json"))
        path = self.write("a.txt", "x\n")
        self.assert_error(self.prepare(path, tokenizer_dir=folder),
                          "no eos_token", "--eos")
        meta, _ = self.prepare_ok(path, tokenizer_dir=folder,
                                  extra=["--eos", "<|im_end|>"])
        self.assertEqual(meta["eos_id"], str(self.tok.token_to_id(
            "<|im_end|>")))

    def test_line_that_is_not_json(self):
        path = self.write("a.jsonl", '{"text": "ok"}\n{"text": oops}\n')
        self.assert_error(self.prepare(path), f"{path}:2: not JSON")

    def test_record_without_the_fields(self):
        path = self.write("a.jsonl", '{"text": "ok"}\n\n{"body": "x"}\n')
        self.assert_error(self.prepare(path), f"{path}:3: a record needs",
                          "found keys: body")
        path = self.write("b.jsonl", '{"prompt": "only a prompt"}\n')
        self.assert_error(self.prepare(path), f"{path}:1: missing "
                          "'completion'")
        path = self.write("c.jsonl", '{"text": 5}\n')
        self.assert_error(self.prepare(path), f"{path}:1: 'text' must be a "
                          "string")
        path = self.write("d.jsonl", '[1, 2]\n')
        self.assert_error(self.prepare(path), f"{path}:1: a record must be "
                          "a JSON object")

    def test_empty_inputs(self):
        path = self.write("empty.txt", "")
        self.assert_error(self.prepare(path), f"{path}: no records")
        path = self.write("blank.jsonl", "\n  \n")
        self.assert_error(self.prepare(path), f"{path}: no records")
        good = self.write("good.txt", "x\n")
        self.assert_error(self.prepare(good, path), f"{path}: no records")

    def test_missing_input(self):
        path = self.path("missing.txt")
        self.assert_error(self.prepare(path), f"{path}: cannot read")

    def test_record_with_no_loss_target(self):
        path = self.write_jsonl("a.jsonl", [{"text": ""}])
        self.assert_error(self.prepare(path), f"{path}:1: no token to train "
                          "on")

    def test_ids_outside_the_vocabulary(self):
        path = self.write("a.txt", "a\nthe privacy\n")
        top = max(self.tok.encode("the privacy").ids)
        self.assertLess(max(self.tok.encode("a").ids + [self.eos]), top)
        self.assert_error(self.prepare(path,
                                       extra=["--vocab-size", str(top)]),
                          f"{path}:2: token id {top} is not below the "
                          f"vocabulary size {top}")

    def test_some_records_with_a_user_and_some_without(self):
        path = self.write_jsonl("u.jsonl", [
            {"text": "a", "user": "x"}, {"text": "b", "user": "y"},
            {"text": "c"}])
        self.assert_error(self.prepare(path), f"{path}:3: has no 'user'",
                          f"{path}:1 (the first record) has one")
        text = self.write("t.txt", "plain\n")
        self.assert_error(self.prepare(text, path), f"{path}:1: has a 'user'")

    def test_user_of_the_wrong_type(self):
        path = self.write_jsonl("u.jsonl", [{"text": "a", "user": 1.5}])
        self.assert_error(self.prepare(path), f"{path}:1: 'user' must be")

    def test_invalid_utf8(self):
        path = self.write("a.txt", b"fine\nbad \xff byte\n")
        self.assert_error(self.prepare(path), f"{path}:2: not UTF-8 (byte "
                          "offset 9 of the file)")

    def test_messages_without_a_chat_template(self):
        folder = self.copy_tokenizer()
        config = os.path.join(folder, "tokenizer_config.json")
        with open(config) as f:
            value = json.load(f)
        del value["chat_template"]
        with open(config, "w") as f:
            json.dump(value, f)
        path = self.write_jsonl("c.jsonl", [{"messages": [
            {"role": "user", "content": "Hi"}]}])
        self.assert_error(self.prepare(path, tokenizer_dir=folder),
                          f"{path}:1: 'messages' needs a chat template")

    def test_bad_messages(self):
        path = self.write_jsonl("c.jsonl", [{"messages": [{"role": "user"}]}])
        self.assert_error(self.prepare(path), f"{path}:1: messages[0] needs")

    def test_no_python_with_tokenizers(self):
        # The launcher says how to install when the Python it is told to use
        # lacks tokenizers.
        proc, out = self.prepare(self.write("a.txt", "x\n"),
                                 env={"DPC_PYTHON": "/bin/false"})
        self.assertEqual(proc.returncode, 1)
        self.assertIn("no Python with the 'tokenizers' package", proc.stderr)
        self.assertIn("setup-venv.sh", proc.stderr)
        self.assertFalse(os.path.exists(out))


class Progress(unittest.TestCase):
    """Long runs report records and MB/s on stderr; short ones stay quiet."""

    def setUp(self):
        sys.path.insert(0, os.path.join(SOURCE, "tools", "dpc-prepare"))
        import dpc_prepare
        self.module = dpc_prepare

    def tearDown(self):
        sys.path.pop(0)

    def report(self, progress, elapsed, records, bytes_read):
        progress.start -= elapsed
        progress.last -= elapsed
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            progress.tty = False
            progress.update(records, bytes_read)
        return stderr.getvalue()

    def test_a_line_after_the_first_seconds(self):
        progress = self.module.Progress(quiet=False)
        self.assertEqual(self.report(progress, 1.0, 10, 10_000_000), "")
        line = self.report(progress, 11.0, 5000, 24_000_000)
        self.assertRegex(line, r"^dpc-prepare: 5000 records, 24\.0 MB, "
                         r"2\.0 MB/s\n$")
        # Not again within the interval.
        self.assertEqual(self.report(progress, 1.0, 6000, 26_000_000), "")

    def test_quiet_reports_nothing(self):
        progress = self.module.Progress(quiet=True)
        self.assertEqual(self.report(progress, 30.0, 10, 10_000_000), "")


if __name__ == "__main__":
    unittest.main()
