# Sourced (bash) on a GPU machine: puts the folders of libnccl.so.2 and
# libcublasLt.so.13 from the nvidia-* pip wheels (PyTorch's) on
# LD_LIBRARY_PATH, so that programs built here with the CUDA backend run
# there, and that of libcudnn.so.9 (nvidia-cudnn-cu13), which the CUDA
# backend opens at run time for its cuDNN attention (without it attention
# runs the fused kernels); and keeps NVLink multicast off. PYTHON names the interpreter whose
# site-packages hold the wheels (default python3).
# Site-packages folders of the interpreter (and of sys.path).
python=${PYTHON:-python3}
mapfile -t roots < <("$python" - <<'EOF' 2>/dev/null || true
import os, site, sys
roots = list(site.getsitepackages())
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
seen = set()
for r in roots:
    if os.path.isdir(r) and r not in seen:
        seen.add(r)
        print(r)
EOF
)

# The folder holding `lib`, searched under <root>/nvidia first (nvidia/nccl/lib,
# nvidia/cu13/lib, ...), then anywhere under the roots.
find_lib() {
  local lib=$1 root hit
  for root in "${roots[@]}"; do
    if [[ -d $root/nvidia ]]; then
      hit=$(find "$root/nvidia" -name "$lib" -print -quit 2>/dev/null || true)
      [[ -n $hit ]] && { dirname "$hit"; return; }
    fi
  done
  for root in "${roots[@]}"; do
    hit=$(find "$root" -name "$lib" -print -quit 2>/dev/null || true)
    [[ -n $hit ]] && { dirname "$hit"; return; }
  done
  return 0
}

libpath=
for lib in libnccl.so.2 libcublasLt.so.13; do
  dir=$(find_lib "$lib")
  if [[ -z $dir ]]; then
    if ldconfig -p 2>/dev/null | grep -q "$lib"; then
      continue
    fi
    echo "gpu-env.sh: $lib not found under ${roots[*]:-no site-packages}" >&2
    return 2 2>/dev/null || exit 2
  fi
  echo "gpu-env.sh: $lib from $dir"
  case ":$libpath:" in
  *":$dir:"*) ;;
  *) libpath=${libpath:+$libpath:}$dir ;;
  esac
done
# Optional: the backend opens libcudnn.so.9 itself and falls back without it.
dir=$(find_lib libcudnn.so.9)
if [[ -n $dir ]]; then
  echo "gpu-env.sh: libcudnn.so.9 from $dir"
  case ":$libpath:" in
  *":$dir:"*) ;;
  *) libpath=${libpath:+$libpath:}$dir ;;
  esac
elif ! ldconfig -p 2>/dev/null | grep -q libcudnn.so.9; then
  echo "gpu-env.sh: libcudnn.so.9 not found; attention runs the fused kernels" >&2
fi
export LD_LIBRARY_PATH=${libpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVLink multicast stays off on these machines.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

