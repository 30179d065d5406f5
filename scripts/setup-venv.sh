#!/usr/bin/env bash
# Creates the project's Python environment in .venv (or $1) with the packages the
# tests compare against, and only installs what is missing: a second run only
# checks the installed version and returns.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/.venv}"

# Pinned: the accountant tests mirror this version's orders and formulas.
dp_accounting_version="0.6.0"

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi

installed=$("$venv/bin/python" - <<'PY' 2>/dev/null || true
from importlib import metadata
print(metadata.version("dp-accounting"))
PY
)
if [[ "$installed" == "$dp_accounting_version" ]]; then
  exit 0
fi

echo "installing dp-accounting==$dp_accounting_version into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "dp-accounting==$dp_accounting_version"
