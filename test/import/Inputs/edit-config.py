#!/usr/bin/env python3
"""edit-config.py SRC DST [KEY=JSON | -KEY]...: DST/config.json is SRC's
config.json with KEY set to the JSON value (or removed with -KEY)."""
import json
import os
import sys

src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(os.path.join(src, "config.json")) as f:
    config = json.load(f)
for edit in edits:
    if edit.startswith("-"):
        del config[edit[1:]]
    else:
        key, value = edit.split("=", 1)
        config[key] = json.loads(value)
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
