"""Writes DPC token files: safetensors files of tokenized training records.

The format (docs/data.md): a safetensors file with the tensors
  offsets    I64 [R+1]  record r is tokens[offsets[r]:offsets[r+1]]
  users      I64 [R]    dense user index of each record (only with users)
  tokens     U32 [N]    token ids
  loss_mask  U8  [N]    1 where the token is a loss target, else 0
and string metadata (format, format_version, vocab_size, eos_id, ...,
content_sha256: the SHA-256 of every byte after the header).

The writer streams: records go to temporary files next to the output, so
that memory does not grow with the data; finish() writes the header, copies
the tensors after it in the order above (largest alignment first, so every
tensor starts aligned to its element size) and renames the result into
place. A failed run leaves no output file behind.
"""

import hashlib
import json
import os
import shutil
import struct
import tempfile
from array import array

FORMAT = "dpc-tokens"
FORMAT_VERSION = 1

# Records are buffered in memory up to this many tokens, then appended to the
# temporary files.
_FLUSH_TOKENS = 1 << 20

assert array("I").itemsize == 4 and array("q").itemsize == 8


class TokenFileWriter:
    """Collects records and writes them as one token file."""

    def __init__(self, path):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        self._tmp = tempfile.TemporaryDirectory(prefix=".dpc-prepare-",
                                                dir=directory)
        names = ("tokens", "loss_mask", "offsets", "users")
        self._files = {name: open(os.path.join(self._tmp.name, name), "wb")
                       for name in names}
        self._tokens = array("I")
        self._mask = bytearray()
        self._offsets = array("q", [0])
        self._users = array("q")
        self.records = 0
        self.tokens = 0
        self.loss_tokens = 0
        self.with_users = None

    def add(self, ids, mask, user=None):
        """Appends a record: token ids, a 0/1 byte per token, the user index
        (None for a file without users)."""
        if len(ids) != len(mask):
            raise ValueError("a record needs one mask byte per token")
        has_user = user is not None
        if self.with_users is None:
            self.with_users = has_user
        elif self.with_users != has_user:
            raise ValueError("either every record has a user or none has")
        self._tokens.extend(ids)
        self._mask += mask
        self.tokens += len(ids)
        self.loss_tokens += mask.count(1)
        self._offsets.append(self.tokens)
        if has_user:
            self._users.append(user)
        self.records += 1
        if len(self._tokens) >= _FLUSH_TOKENS:
            self._flush()

    def _flush(self):
        for name, buffer in (("tokens", self._tokens),
                             ("loss_mask", self._mask),
                             ("offsets", self._offsets),
                             ("users", self._users)):
            if buffer:
                if isinstance(buffer, array) and buffer.itemsize > 1:
                    _to_little_endian(buffer)
                self._files[name].write(buffer)
                del buffer[:]

    def finish(self, metadata):
        """Writes the token file with `metadata` (string values) added to the
        format's own keys; returns its size in bytes."""
        self._flush()
        for f in self._files.values():
            f.close()
        records = self.records
        meta = {
            "format": FORMAT,
            "format_version": str(FORMAT_VERSION),
            "records": str(records),
            "tokens": str(self.tokens),
            "loss_tokens": str(self.loss_tokens),
        }
        meta.update({k: str(v) for k, v in metadata.items()})
        tensors = [("offsets", "I64", records + 1, 8)]
        if self.with_users:
            tensors.append(("users", "I64", records, 8))
        tensors += [("tokens", "U32", self.tokens, 4),
                    ("loss_mask", "U8", self.tokens, 1)]
        # The header carries a digest of the data, so that the header alone
        # identifies the content (a resumed run checks it trains on the same
        # data without reading the file).
        digest = hashlib.sha256()
        for name, _, _, _ in tensors:
            with open(os.path.join(self._tmp.name, name), "rb") as f:
                while chunk := f.read(16 << 20):
                    digest.update(chunk)
        meta["content_sha256"] = digest.hexdigest()
        header = {"__metadata__": meta}
        begin = 0
        for name, dtype, count, size in tensors:
            header[name] = {"dtype": dtype, "shape": [count],
                            "data_offsets": [begin, begin + count * size]}
            begin += count * size
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        # Spaces after the JSON make the data start at a multiple of 8, as
        # the safetensors package pads its own headers.
        text += b" " * (-(8 + len(text)) % 8)

        partial = self.path + ".partial"
        try:
            with open(partial, "wb") as out:
                out.write(struct.pack("<Q", len(text)))
                out.write(text)
                for name, _, _, _ in tensors:
                    with open(os.path.join(self._tmp.name, name), "rb") as f:
                        shutil.copyfileobj(f, out, 16 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, self.path)
        except BaseException:
            if os.path.exists(partial):
                os.unlink(partial)
            raise
        finally:
            self._tmp.cleanup()
        return 8 + len(text) + begin

    def abort(self):
        """Removes the temporary files; writes nothing."""
        for f in self._files.values():
            f.close()
        self._tmp.cleanup()


def _to_little_endian(buffer):
    """The format is little-endian; swap in place on a big-endian host."""
    if struct.pack("=H", 1) != struct.pack("<H", 1):
        buffer.byteswap()
