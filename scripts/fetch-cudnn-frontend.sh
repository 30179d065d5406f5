#!/usr/bin/env bash
# Puts the cuDNN frontend's headers (NVIDIA's header-only C++ API over cuDNN's
# graph backend, from the PyPI wheel nvidia-cudnn-frontend, pinned) in
# .deps/cudnn-frontend/include, where runtime/cuda/CMakeLists.txt looks for
# them (the CUDA backend's cuDNN attention path). Idempotent: returns at once
# when the pinned version is there. When PyPI cannot be reached it says so
# and exits 0: the CUDA backend then builds without the cuDNN path.
set -euo pipefail

version=1.32.0
# The wheel's sha256 (the headers are the same in every platform's wheel;
# this one is fetched whatever the host).
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.deps/cudnn-frontend"
if [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$version" &&
      -f $dest/include/cudnn_frontend.h ]]; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching nvidia-cudnn-frontend==$version (headers) into $dest"
if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 \
    -d "$tmp" "nvidia-cudnn-frontend==$version"; then
  echo "fetch-cudnn-frontend.sh: could not download nvidia-cudnn-frontend==$version;" \
    "the CUDA backend builds without the cuDNN attention path" >&2
  exit 0
fi
wheels=("$tmp"/nvidia_cudnn_frontend-"$version"-*.whl)
if ! echo "$sha256  ${wheels[0]}" | sha256sum --check --quiet; then
  echo "fetch-cudnn-frontend.sh: ${wheels[0]##*/} does not have the pinned sha256" >&2
  exit 1
fi
python3 - "${wheels[0]}" "$tmp/unpacked" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith("include/"):
            wheel.extract(name, sys.argv[2])
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/unpacked/include" "$dest/include"
echo "$version" >"$dest/VERSION"
