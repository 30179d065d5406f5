#!/usr/bin/env bash
# Unpacks the headers of one pinned PyPI wheel into a folder of .deps, for
# the fetch-*.sh scripts (make deps):
#
#   scripts/fetch-wheel-headers.sh PACKAGE VERSION SHA256 PREFIX DEST MARKER \
#       WITHOUT [PIP-DOWNLOAD-ARGS...]
#
# PACKAGE==VERSION is downloaded with `pip download --no-deps
# --only-binary=:all:` and the extra arguments, its sha256 checked, and the
# wheel's files under PREFIX (a folder inside the wheel, ending in "/") put
# under DEST/include, with VERSION in DEST/VERSION. Idempotent: returns at
# once when DEST has that version and DEST/include/MARKER. When PyPI cannot
# be reached it says so, with WITHOUT (what the build then goes without),
# and exits 0; a wheel with another sha256 is an error (exit 1).
set -euo pipefail

package=$1 version=$2 sha256=$3 prefix=$4 dest=$5 marker=$6 without=$7
shift 7

if [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$version" &&
      -f $dest/include/$marker ]]; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching $package==$version (headers) into $dest"
if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "$@" -d "$tmp" "$package==$version"; then
  echo "fetch-wheel-headers.sh: could not download $package==$version; $without" >&2
  exit 0
fi
wheels=("$tmp"/*.whl)
if ! echo "$sha256  ${wheels[0]}" | sha256sum --check --quiet; then
  echo "fetch-wheel-headers.sh: ${wheels[0]##*/} does not have the pinned sha256" >&2
  exit 1
fi
python3 - "${wheels[0]}" "$prefix" "$tmp/unpacked/include" <<'PY'
import os, sys, zipfile
wheel_path, prefix, target_root = sys.argv[1:4]
with zipfile.ZipFile(wheel_path) as wheel:
    for name in wheel.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(target_root, name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with wheel.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/unpacked/include" "$dest/include"
echo "$version" >"$dest/VERSION"
