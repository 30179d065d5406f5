#!/usr/bin/env bash
# Puts CUTLASS's headers (cute/ and cutlass/, from the PyPI wheel
# nvidia-cutlass, pinned) in .deps/cutlass/include, where
# runtime/cuda/CMakeLists.txt looks for them: the sm_90a product whose
# epilogue sums the squares of the per-sample gradients it writes
# (runtime/cuda/PerSampleGradGemm.cu). Idempotent: returns at once when the
# pinned version is there. When PyPI cannot be reached it says so and exits
# 0: the CUDA backend then builds without that kernel (the per-sample
# gradients' norms are a second pass over them, as on sm_80).
set -euo pipefail

version=4.2.0.0
sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.deps/cutlass"
if [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$version" &&
      -f $dest/include/cutlass/cutlass.h ]]; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching nvidia-cutlass==$version (headers) into $dest"
if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$tmp" "nvidia-cutlass==$version"; then
  echo "fetch-cutlass.sh: could not download nvidia-cutlass==$version;" \
    "the CUDA backend builds without the fused per-sample gradient product" >&2
  exit 0
fi
wheels=("$tmp"/nvidia_cutlass-"$version"-*.whl)
if ! echo "$sha256  ${wheels[0]}" | sha256sum --check --quiet; then
  echo "fetch-cutlass.sh: ${wheels[0]##*/} does not have the pinned sha256" >&2
  exit 1
fi
python3 - "${wheels[0]}" "$tmp/unpacked" <<'PY'
import os, sys, zipfile
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = sys.argv[2] + "/include/" + name[len(prefix):]
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with wheel.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/unpacked/include" "$dest/include"
echo "$version" >"$dest/VERSION"
