"""dpc-prepare: tokenizes training records into a DPC token file.

    dpc-prepare --tokenizer MODEL_DIR INPUT... -o OUT.tokens

MODEL_DIR is a Hugging Face model folder (tokenizer.json, and
tokenizer_config.json for the end-of-text token and the chat template).
Inputs are text files (one record per line) or JSON lines files (.jsonl,
.json, .ndjson) whose records have `text`, `prompt` and `completion`, or
`messages`, and optionally `user`. docs/data.md describes the inputs, the
loss mask and the output format.

Exit status: 0 done, 1 an I/O failure, 2 bad arguments or input (one line
on stderr naming the file and line).
"""

import argparse
import hashlib
import json
import os
import sys
import time

from tokenizers import Tokenizer

import tiktoken_engine
from tokenfile import TokenFileWriter

PROG = "dpc-prepare"
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")

# A batch handed to the tokenizer at once: large enough that its threads
# share the work, small enough that progress and memory stay fine-grained.
BATCH_BYTES = 1 << 20
BATCH_RECORDS = 8192

# The tiktoken engine's texts are also encoded by tokenizers until this many
# texts and bytes have agreed (tiktoken_engine.py says why).
CHECK_TEXTS = 1000
CHECK_BYTES = 256 << 10


class InputError(Exception):
    """Bad arguments or input: reported on one line, exit status 2."""


class Record:
    """One training record before tokenization."""

    __slots__ = ("where", "kind", "text", "prompt", "completion", "messages",
                 "user")

    def __init__(self, where, kind, user=None):
        self.where = where
        self.kind = kind
        self.user = user
        self.text = self.prompt = self.completion = self.messages = None


# --- The tokenizer -------------------------------------------------------


class ModelTokenizer:
    """A model folder's tokenizer: ids, end-of-text token, chat template."""

    def __init__(self, directory, eos=None, vocab_size=None,
                 engine="tokenizers"):
        self.directory = directory
        path = directory
        if os.path.isdir(directory):
            path = os.path.join(directory, "tokenizer.json")
        else:
            directory = os.path.dirname(directory) or "."
        if not os.path.isfile(path):
            raise InputError(
                f"{self.directory}: no tokenizer.json (a model folder saved "
                "with a fast tokenizer has one; convert a sentencepiece-only "
                "tokenizer with transformers' AutoTokenizer.save_pretrained)")
        with open(path, "rb") as f:
            data = f.read()
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            self.tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as e:  # tokenizers raises plain Exceptions
            raise InputError(f"{path}: not a tokenizers file: {e}") from None
        ids = self.tokenizer.get_vocab(with_added_tokens=True).values()
        self.tokenizer_vocab = max(ids) + 1 if ids else 0

        config = _read_json_file(os.path.join(directory,
                                              "tokenizer_config.json"))
        model_config = _read_json_file(os.path.join(directory, "config.json"))
        self.eos_token = eos or _token_content(config.get("eos_token"))
        if not self.eos_token:
            raise InputError(
                f"{directory}: no eos_token in tokenizer_config.json; name "
                "the end-of-text token with --eos")
        self.eos_id = self.tokenizer.token_to_id(self.eos_token)
        if self.eos_id is None:
            raise InputError(f"{path}: the end-of-text token "
                             f"{self.eos_token!r} is not in the vocabulary")
        self.bos_token = _token_content(config.get("bos_token"))

        # The model's vocabulary (its embedding rows) is config.json's
        # vocab_size when the folder has one; ids must stay below it.
        if vocab_size is not None:
            self.vocab_size = vocab_size
        elif isinstance(model_config.get("vocab_size"), int):
            self.vocab_size = model_config["vocab_size"]
        else:
            self.vocab_size = self.tokenizer_vocab
        if self.eos_id >= self.vocab_size:
            raise InputError(f"{directory}: the end-of-text token's id "
                             f"{self.eos_id} is not below the vocabulary "
                             f"size {self.vocab_size}")

        self._init_engine(path, data.decode("utf-8"), engine)

        self.chat_template = None
        template_file = os.path.join(directory, "chat_template.jinja")
        if os.path.isfile(template_file):
            with open(template_file, encoding="utf-8") as f:
                self.chat_template = f.read()
        else:
            self.chat_template = _default_template(config.get("chat_template"))
        self._compiled_template = None

    def _init_engine(self, path, text, engine):
        """The tiktoken engine (self.fast) where asked and possible."""
        self.fast = None
        self.engine_note = "tokenizers"
        self.checked_texts = self.checked_bytes = 0
        if engine == "tokenizers":
            return
        data = json.loads(text)
        fast, why = tiktoken_engine.convert(data)
        if fast is not None:
            # What the post-processor puts around a text (a BOS for Llama):
            # the ids with special tokens hold those without once.
            bare = self.tokenizer.encode("a", add_special_tokens=False).ids
            full = self.tokenizer.encode("a", add_special_tokens=True).ids
            at = next((i for i in range(len(full) - len(bare) + 1)
                       if full[i:i + len(bare)] == bare), None)
            if at is None:
                fast, why = None, "its post-processor changes the text's ids"
            else:
                self.prefix, self.suffix = full[:at], full[at + len(bare):]
        if fast is None:
            if engine == "tiktoken":
                raise InputError(f"{path}: --engine tiktoken: {why}")
            self.engine_note = f"tokenizers (not tiktoken: {why})"
            return
        self.fast = fast
        self.added = tiktoken_engine.added_token_pattern(data)
        self.engine_note = "tiktoken"

    def encode(self, texts, special_tokens, wheres=None):
        """Token ids of each text (a list of lists); wheres(i) names text i
        in a warning."""
        if self.fast is None:
            encodings = self.tokenizer.encode_batch_fast(
                texts, add_special_tokens=special_tokens)
            return [e.ids for e in encodings]
        out = [None] * len(texts)
        # A text holding an added token's text goes to tokenizers, which
        # matches added tokens before the BPE.
        slow = [i for i, t in enumerate(texts)
                if self.added is not None and self.added.search(t)]
        if slow:
            encodings = self.tokenizer.encode_batch_fast(
                [texts[i] for i in slow], add_special_tokens=special_tokens)
            for i, e in zip(slow, encodings):
                out[i] = e.ids
        # The Rust encoder itself: Encoding.encode_ordinary only adds a
        # retry for lone surrogates, which text decoded from UTF-8 has none.
        encode = self.fast._core_bpe.encode_ordinary
        for i, t in enumerate(texts):
            if out[i] is None:
                ids = encode(t)
                out[i] = self.prefix + ids + self.suffix if special_tokens \
                    else ids
        if self.checked_texts < CHECK_TEXTS or \
                self.checked_bytes < CHECK_BYTES:
            self._check(texts, special_tokens, out, wheres)
        return out

    def _check(self, texts, special_tokens, out, wheres):
        """tiktoken's ids against tokenizers'; the first difference turns
        the tiktoken engine off and the batch is encoded by tokenizers."""
        # Only as many texts as the check still needs: the first ones.
        n = 0
        texts_left = CHECK_TEXTS - self.checked_texts
        bytes_left = CHECK_BYTES - self.checked_bytes
        while n < len(texts) and (n < texts_left or bytes_left > 0):
            bytes_left -= len(texts[n])
            n += 1
        want = [e.ids for e in self.tokenizer.encode_batch_fast(
            texts[:n], add_special_tokens=special_tokens)]
        for i, (got, ids) in enumerate(zip(out, want)):
            if got != ids:
                where = wheres(i) if wheres else f"text {texts[i][:40]!r}"
                print(f"{PROG}: warning: tiktoken and tokenizers give "
                      f"different ids for {where}; tokenizing everything "
                      "with tokenizers", file=sys.stderr)
                self.fast = None
                self.engine_note = f"tokenizers (tiktoken differed on {where})"
                out[:] = [e.ids for e in self.tokenizer.encode_batch_fast(
                    texts, add_special_tokens=special_tokens)]
                return
        self.checked_texts += n
        self.checked_bytes += sum(len(t) for t in texts[:n])

    def check_ids(self, ids, where):
        """Ids at or above the model's vocabulary are an error."""
        if self.vocab_size < self.tokenizer_vocab and ids and \
                max(ids) >= self.vocab_size:
            raise InputError(f"{where}: token id {max(ids)} is not below the "
                             f"vocabulary size {self.vocab_size}")

    def render_chat(self, messages, add_generation_prompt):
        if self._compiled_template is None:
            self._compiled_template = _compile_template(self.chat_template)
        return self._compiled_template.render(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "", eos_token=self.eos_token)


def _read_json_file(path):
    """The JSON object in `path`, or {} when there is no such file."""
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not JSON: {e}") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: not a JSON object")
    return value


def _token_content(token):
    """A special token of tokenizer_config.json: a string or an AddedToken
    object {"content": ...}."""
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) else None


def _default_template(template):
    """tokenizer_config.json's chat_template: a string, or a list of named
    templates of which "default" is the chat one."""
    if isinstance(template, list):
        for item in template:
            if isinstance(item, dict) and item.get("name") == "default":
                return item.get("template")
        return None
    return template if isinstance(template, str) else None


def _compile_template(source):
    """Compiles a chat template the way transformers does: a sandboxed
    Jinja environment with trim_blocks and lstrip_blocks, loop controls and
    raise_exception()."""
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise InputError("'messages' records need the jinja2 package: "
                         "pip install jinja2 (scripts/setup-venv.sh installs "
                         "it into .venv)") from None

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, indent=None):
        return json.dumps(value, indent=indent, ensure_ascii=False)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        raise InputError(f"the tokenizer's chat template: {e}") from None


# --- Reading records ------------------------------------------------------


def read_records(path, fmt):
    """Yields (batch of Records, bytes read so far) from one input file."""
    if fmt == "auto":
        fmt = "jsonl" if path.endswith(JSONL_SUFFIXES) else "text"
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    parse = _text_record if fmt == "text" else _jsonl_record
    with f:
        batch, batch_bytes, offset = [], 0, 0
        for number, line in enumerate(f, 1):
            offset += len(line)
            record = parse(path, number, line, offset - len(line))
            if record is None:
                continue
            batch.append(record)
            batch_bytes += len(line)
            if batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_RECORDS:
                yield batch, offset
                batch, batch_bytes = [], 0
        if batch:
            yield batch, offset


def _decode(path, number, line, offset):
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}:{number}: not UTF-8 (byte offset "
                         f"{offset + e.start} of the file)") from None


def _text_record(path, number, line, offset):
    """A line of text is one record; blank lines are skipped."""
    text = _decode(path, number, line, offset).rstrip("\r\n")
    if not text:
        return None
    record = Record((path, number), "text")
    record.text = text
    return record


def _jsonl_record(path, number, line, offset):
    text = _decode(path, number, line, offset)
    if not text.strip():
        return None
    where = f"{path}:{number}"
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InputError(f"{where}: not JSON: {e}") from None
    if not isinstance(value, dict):
        raise InputError(f"{where}: a record must be a JSON object")

    user = value.get("user")
    if user is not None:
        # An integer key and its decimal string name the same user: merging
        # them can only make the privacy unit coarser, never finer.
        if isinstance(user, bool) or not isinstance(user, (int, str)):
            raise InputError(f"{where}: 'user' must be a string or an "
                             "integer")
        user = str(user)

    kinds = [k for k in ("text", "prompt", "messages") if k in value]
    if "completion" in value and "prompt" not in value:
        kinds.append("completion")
    if len(kinds) != 1:
        found = ", ".join(sorted(value)) or "none"
        raise InputError(f"{where}: a record needs 'text', 'prompt' and "
                         f"'completion', or 'messages' (found keys: {found})")
    kind = kinds[0]
    record = Record((path, number), kind, user)
    if kind == "text":
        record.text = _string_field(value, "text", where)
    elif kind == "prompt":
        record.kind = "completion"
        record.prompt = _string_field(value, "prompt", where)
        record.completion = _string_field(value, "completion", where)
    elif kind == "messages":
        record.messages = _messages_field(value["messages"], where)
    else:
        raise InputError(f"{where}: 'completion' without 'prompt'")
    return record


def _string_field(value, key, where):
    if key not in value:
        raise InputError(f"{where}: missing '{key}'")
    if not isinstance(value[key], str):
        raise InputError(f"{where}: '{key}' must be a string")
    return value[key]


def _messages_field(messages, where):
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: 'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) \
                or not isinstance(m.get("content"), str):
            raise InputError(f"{where}: messages[{i}] needs a string 'role' "
                             "and a string 'content'")
    return messages


# --- Tokenizing -----------------------------------------------------------


def _where(record):
    return f"{record.where[0]}:{record.where[1]}"


def tokenize(tokenizer, batch):
    """(ids, mask) of each record of the batch, in order."""
    out = [None] * len(batch)
    eos = tokenizer.eos_id

    text = [i for i, r in enumerate(batch) if r.kind == "text"]
    if text:
        # The post-processor adds what the model saw in pretraining around a
        # document (a BOS for Llama, nothing for GPT-2); the end-of-text
        # token then ends the record unless the post-processor added it.
        ids_of = tokenizer.encode([batch[i].text for i in text], True,
                                  lambda k: _where(batch[text[k]]))
        for i, ids in zip(text, ids_of):
            if not ids or ids[-1] != eos:
                ids.append(eos)
            out[i] = (ids, b"\x01" * len(ids))

    completion = [i for i, r in enumerate(batch) if r.kind == "completion"]
    if completion:
        def wheres(k):
            return _where(batch[completion[k]])
        prompts = tokenizer.encode([batch[i].prompt for i in completion],
                                   False, wheres)
        completions = tokenizer.encode(
            [batch[i].completion for i in completion], False, wheres)
        for i, p, c in zip(completion, prompts, completions):
            if not c:
                out[i] = "the completion is empty: the record would train " \
                    "only the end-of-text token"
                continue
            out[i] = (p + c + [eos],
                      b"\x00" * len(p) + b"\x01" * (len(c) + 1))

    for i, r in enumerate(batch):
        if r.kind == "messages":
            out[i] = _tokenize_chat(tokenizer, r)
    return out


def _tokenize_chat(tokenizer, record):
    """Renders a conversation with the chat template; the loss mask covers
    the assistant turns: the text each assistant message adds after the
    generation prompt that precedes it."""
    where = _where(record)
    if not tokenizer.chat_template:
        raise InputError(f"{where}: 'messages' needs a chat template, and "
                         f"{tokenizer.directory} has none")
    import jinja2

    messages = record.messages
    try:
        full = tokenizer.render_chat(messages, False)
        spans = []
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            before = tokenizer.render_chat(messages[:i], True)
            through = tokenizer.render_chat(messages[:i + 1], False)
            if not through.startswith(before) or not full.startswith(through):
                raise InputError(
                    f"{where}: the chat template does not render the "
                    f"conversation up to messages[{i}] as a prefix of the "
                    "whole, so the assistant turn cannot be located")
            spans.append((len(before), len(through)))
    except jinja2.exceptions.TemplateError as e:
        raise InputError(f"{where}: the chat template failed: {e}") from None
    # The template writes the special tokens itself.
    encoding = tokenizer.tokenizer.encode(full, add_special_tokens=False)
    ids = encoding.ids
    mask = bytearray(len(ids))
    # A token with any character in an assistant span is one the model must
    # write: the template's trailing space merged with the answer's first
    # word (" Hello" after "[assistant] ") is produced as one token.
    for t, (start, end) in enumerate(encoding.offsets):
        if any(start < e and end > b for b, e in spans):
            mask[t] = 1
    if not ids or ids[-1] != tokenizer.eos_id:
        ids.append(tokenizer.eos_id)
        mask.append(1 if messages[-1]["role"] == "assistant" else 0)
    return ids, bytes(mask)


# --- Progress -------------------------------------------------------------


class Progress:
    """Records and MB/s on stderr: redrawn in place on a terminal, a line
    every 10 s otherwise; nothing for inputs done within 2 s."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.last = self.start
        self.drawn = False

    def update(self, records, bytes_read):
        now = time.monotonic()
        interval = 0.5 if self.tty else 10.0
        if self.quiet or now - self.start < 2.0 or now - self.last < interval:
            return
        self.last = now
        line = (f"{PROG}: {records} records, {bytes_read / 1e6:.1f} MB, "
                f"{bytes_read / 1e6 / (now - self.start):.1f} MB/s")
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K")
            self.drawn = True
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self, line):
        if self.quiet:
            return
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(f"{PROG}: {line}\n")


# --- The command ----------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Tokenizes training records into a DPC token file "
        "(docs/data.md).")
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="text file (one record per line) or JSON lines "
                        "file (.jsonl, .json, .ndjson)")
    parser.add_argument("--tokenizer", required=True, metavar="DIR",
                        help="model folder with tokenizer.json (and "
                        "tokenizer_config.json)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the token file to write")
    parser.add_argument("--format", choices=("auto", "text", "jsonl"),
                        default="auto",
                        help="input format (default: by extension)")
    parser.add_argument("--eos", metavar="TOKEN",
                        help="end-of-text token (default: tokenizer_config."
                        "json's eos_token)")
    parser.add_argument("--vocab-size", type=int, metavar="N",
                        help="ids must be below N (default: config.json's "
                        "vocab_size, else the tokenizer's)")
    parser.add_argument("--skip-empty", action="store_true",
                        help="skip records with no loss target (an empty "
                        "completion) and count them, instead of an error")
    parser.add_argument("--engine", choices=("auto", "tokenizers",
                                             "tiktoken"), default="auto",
                        help="auto (default): tiktoken for byte-level BPE "
                        "tokenizers it reproduces (checked against "
                        "tokenizers on the first records), else tokenizers")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress and summary on stderr")
    args = parser.parse_args(argv)
    if args.vocab_size is not None and args.vocab_size <= 0:
        parser.error("--vocab-size must be positive")
    return args


def prepare(args):
    tokenizer = ModelTokenizer(args.tokenizer, args.eos, args.vocab_size,
                               args.engine)
    writer = TokenFileWriter(args.output)
    progress = Progress(args.quiet)
    users = {}
    first_user_state = None  # (has a user, where) of the first record
    skipped = 0
    bytes_done = 0
    try:
        for path in args.inputs:
            records_before = writer.records + skipped
            bytes_read = 0
            for batch, bytes_read in read_records(path, args.format):
                for record, result in zip(batch, tokenize(tokenizer, batch)):
                    where = _where(record)
                    if isinstance(result, str):
                        reason = result
                    else:
                        ids, mask = result
                        # Position 0 is never a target: it has no context.
                        reason = None if mask.count(1, 1) else \
                            "no token to train on (the loss mask is empty)"
                    if reason:
                        if not args.skip_empty:
                            raise InputError(f"{where}: {reason} (skip such "
                                             "records with --skip-empty)")
                        skipped += 1
                        continue
                    tokenizer.check_ids(ids, where)
                    has_user = record.user is not None
                    if first_user_state is None:
                        first_user_state = (has_user, where)
                    elif first_user_state[0] != has_user:
                        first = f"{first_user_state[1]} (the first record)"
                        if has_user:
                            what = f"has a 'user' but {first} has none"
                        else:
                            what = f"has no 'user' but {first} has one"
                        raise InputError(f"{where}: {what}: either every "
                                         "record names its user or none does")
                    user = users.setdefault(record.user, len(users)) \
                        if has_user else None
                    writer.add(ids, mask, user)
                progress.update(writer.records, bytes_done + bytes_read)
            bytes_done += bytes_read
            if writer.records + skipped == records_before:
                raise InputError(f"{path}: no records (the file is empty or "
                                 "blank)")
        meta = {
            "vocab_size": tokenizer.vocab_size,
            "eos_id": tokenizer.eos_id,
            "tokenizer": os.path.abspath(args.tokenizer),
            "tokenizer_sha256": tokenizer.sha256,
            "users": len(users),
            "skipped_records": skipped,
        }
        size = writer.finish(meta)
    except BaseException:
        writer.abort()
        raise
    seconds = time.monotonic() - progress.start
    summary = (f"wrote {args.output}: {writer.records} records, "
               f"{writer.tokens} tokens ({writer.loss_tokens} in the loss), "
               f"{len(users)} users, {size / 1e6:.1f} MB; read "
               f"{bytes_done / 1e6:.1f} MB in {seconds:.1f} s "
               f"({bytes_done / 1e6 / max(seconds, 1e-9):.1f} MB/s)")
    if skipped:
        summary += f"; skipped {skipped} records with no loss target"
    summary += f"; engine {tokenizer.engine_note}"
    progress.done(summary)


# --- Encoding and decoding for the training program ----------------------


def parse_codec_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Encodes a prompt or decodes generated ids with a "
        "model's tokenizer, for the training program's --generate "
        "(docs/training-program.md).")
    parser.add_argument("--tokenizer", required=True, metavar="DIR",
                        help="model folder with tokenizer.json")
    parser.add_argument("--eos", metavar="TOKEN",
                        help="end-of-text token (default: tokenizer_config."
                        "json's eos_token)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--encode", metavar="FILE",
                      help="print {\"ids\": [...], \"eos_id\": E}: FILE's "
                      "UTF-8 text encoded as a text record's start (with "
                      "the tokenizer's special tokens, without the "
                      "end-of-text token)")
    mode.add_argument("--decode", metavar="FILE",
                      help="for each line of FILE, a JSON list of ids, print "
                      "the text as a JSON string (special tokens skipped)")
    return parser.parse_args(argv)


def codec(args):
    tokenizer = ModelTokenizer(args.tokenizer, args.eos)
    if args.encode is not None:
        try:
            with open(args.encode, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"{args.encode}: cannot read: {e.strerror}") \
                from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{args.encode}: not UTF-8 (byte offset "
                             f"{e.start})") from None
        ids = tokenizer.encode([text], True)[0] if text else []
        print(json.dumps({"ids": ids, "eos_id": tokenizer.eos_id}))
        return
    try:
        f = open(args.decode, "rb")
    except OSError as e:
        raise InputError(f"{args.decode}: cannot read: {e.strerror}") \
            from None
    with f:
        for number, line in enumerate(f, 1):
            try:
                ids = json.loads(line)
            except ValueError as e:
                raise InputError(f"{args.decode}:{number}: not JSON: {e}") \
                    from None
            if not isinstance(ids, list) or not all(
                    isinstance(i, int) and i >= 0 for i in ids):
                raise InputError(f"{args.decode}:{number}: not a list of "
                                 "token ids")
            text = tokenizer.tokenizer.decode(ids, skip_special_tokens=True)
            print(json.dumps(text))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--encode" in argv or "--decode" in argv:
        try:
            codec(parse_codec_args(argv))
        except InputError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        return 0
    args = parse_args(argv)
    try:
        prepare(args)
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        name = f"{e.filename}: " if e.filename else ""
        print(f"{PROG}: error: {name}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
