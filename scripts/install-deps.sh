#!/usr/bin/env bash
# Installs what DPC needs from Debian's archive, and only what is missing.
# Idempotent: a second run installs nothing and touches no package list.
set -euo pipefail

packages=(
  cmake ninja-build g++ make python3 python3-venv
  llvm-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev libopenblas-dev
  libxxhash-dev
  openmpi-bin libopenmpi-dev
  fortunes fortunes-min
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "installing: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when an install from the current lists fails.
if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
