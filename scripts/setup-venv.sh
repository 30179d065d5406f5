#!/usr/bin/env bash
# Creates the project's Python environment in .venv (or DIR) with the packages
# dpc-prepare runs on and the tests compare against, and only installs what is
# missing: a second run only checks the installed versions and returns.
#
#   scripts/setup-venv.sh [--accounting] [DIR]
#
# --accounting adds Google's dp-accounting (and its scipy), which only the
# slow suite's accountant comparison needs (`make test-slow`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
accounting=0
if [[ ${1:-} == --accounting ]]; then
  accounting=1
  shift
fi
venv="${1:-$root/.venv}"

# Pinned: the committed test tokenizer and the token-id tests were made with
# this tokenizers version; safetensors reads dpc-prepare's files in the tests
# (through numpy); jinja2 renders chat templates; tiktoken is dpc-prepare's
# fast engine for byte-level BPE tokenizers (checked against tokenizers); the
# accountant tests mirror dp-accounting's orders and formulas.
packages=(
  "tokenizers==0.23.3"
  "tiktoken==0.14.0"
  "safetensors==0.8.0"
  "jinja2==3.1.6"
  "numpy==2.4.6"
)
if ((accounting)); then
  packages+=("dp-accounting==0.6.0")
fi

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi

# The pins that are not installed at their version, one a line.
missing=$("$venv/bin/python" - "${packages[@]}" <<'PY' 2>/dev/null || true
import sys
from importlib import metadata
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        installed = None
    if installed != version:
        print(pin)
PY
)
if [[ -z "$missing" ]]; then
  exit 0
fi

echo "installing into $venv:" $missing
# shellcheck disable=SC2086 # one pin a word
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $missing
