#!/usr/bin/env bash
# Build the git-ignored .gpu/ folder that GPU-host runs carry (device tool: carry [".gpu"]).
#
#   scripts/gpu-bundle.sh [OUT_DIR=.gpu]
#
# Contents:
#   OUT/cutlass/        CuTe-DSL 4.8.0 (the version vLLM 0.33.0 pins) for CPython 3.12, xz parts + MANIFEST
#   OUT/fi/flashinfer/gdn_kernels/{device_target,gdn_decode_bf16_wy_ucache_flush}.py
#                       flashinfer-python 0.7.2.post1's fused ucache kernel (the anchor), loadable by path
#   OUT/unpack.sh       copy of ../shared/gpu/unpack.sh (shared/ does not travel)
#   OUT/env.sh          host side: `source .gpu/env.sh` unpacks cutlass into /tmp/site (once per machine)
#                       and exports PYTHONPATH and GDN_FLASHINFER_UCACHE_MODULE.
# Wheels are fetched through pip's configured index (no host named here) and cached in
# ${GDN_UCACHE_CACHE:-$HOME/.cache/gdn-ucache}/gpu-wheels.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,14p' "$0"; exit 0; fi
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/.gpu}
cache=${GDN_UCACHE_CACHE:-$HOME/.cache/gdn-ucache}/gpu-wheels
shared_gpu=${GDN_SHARED_GPU:-$top/../shared/gpu}
[[ -f $shared_gpu/unpack.sh ]] || { echo "error: $shared_gpu/unpack.sh not found; set GDN_SHARED_GPU" >&2; exit 1; }
mkdir -p "$out" "$cache"
cutlass_specs=(nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0
  nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  -d "$cache" "${cutlass_specs[@]}" flashinfer-python==0.7.2.post1
# Packed like ../shared/gpu/bundle.sh (same MANIFEST, so its unpack.sh applies), but smaller, so that
# the bundle and the work tree fit one 64 MiB transfer: stubs, the static runtime and the IKET tracing
# package are not needed to compile or run, and a 192 MiB xz dictionary spans the 190 MB MLIR library.
pack=$(mktemp -d); trap 'rm -rf "$pack"' EXIT
for w in "$cache"/nvidia_cutlass_dsl*4.8.0*.whl; do python3 -m zipfile -e "$w" "$pack"; done
rm -rf "$pack/nvidia_cutlass_dsl/cu13/lib/stubs" "$pack/nvidia_cutlass_dsl/cu13/lib/libcuda_dialect_runtime_static.a" \
  "$pack/nvidia_cutlass_dsl/dsl_packages/iket"
rm -rf "$out/cutlass"; mkdir -p "$out/cutlass"
echo "packing CuTe-DSL with xz (several minutes)"
# 20 MiB parts: each of the first two travels alone beside the work tree (~33 MB by session 30,
# most of it committed results), the last with the bundle's other files; 40 MiB (session 22),
# 36 MiB (session 24: tree + part-00 = 67.2 MB) and 30 MiB (session 30: ~65 MiB) left too little
tar -C "$pack" --sort=name -cf - . | xz --lzma2=preset=9e,dict=192MiB -T1 | split -b 20M -d -a 2 - "$out/cutlass/part-"
{ echo "specs:"; printf '%s\n' "${cutlass_specs[@]}" "drop=stubs static-runtime iket"; echo "parts:"
  (cd "$out/cutlass" && sha256sum part-*); } > "$out/cutlass/MANIFEST"
fi_dir=$out/fi/flashinfer/gdn_kernels
mkdir -p "$fi_dir"
: > "$out/fi/flashinfer/__init__.py"
: > "$fi_dir/__init__.py"
python3 - "$cache" "$fi_dir" <<'PY'
import glob, sys, zipfile
cache, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(f"{cache}/flashinfer_python-0.7.2.post1-*.whl")
with zipfile.ZipFile(wheel) as z:
    for name in ("device_target.py", "gdn_decode_bf16_wy_ucache_flush.py"):
        with open(f"{dest}/{name}", "wb") as f:
            f.write(z.read(f"flashinfer/gdn_kernels/{name}"))
PY
cp "$shared_gpu/unpack.sh" "$out/unpack.sh"
cat > "$out/env.sh" <<'SH'
# Source on the GPU host from the repo root: unpacks CuTe-DSL once per machine, exports the environment.
_gpu=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -d /tmp/site/cutlass && ! -d /tmp/site/nvidia_cutlass_dsl ]]; then bash "$_gpu/unpack.sh" "$_gpu/cutlass" /tmp/site >/dev/null; fi
eval "$(bash "$_gpu/unpack.sh" --env /tmp/site)"
export GDN_FLASHINFER_UCACHE_MODULE=$_gpu/fi/flashinfer/gdn_kernels/gdn_decode_bf16_wy_ucache_flush.py
export PYTHONPATH=$_gpu/fi:$PYTHONPATH
export PYTHONUNBUFFERED=1
SH
cat > "$out/README" <<'TXT'
Built by scripts/gpu-bundle.sh (not committed). On the GPU host, from the repo root:
  source .gpu/env.sh            # unpack CuTe-DSL into /tmp/site, set PYTHONPATH, GDN_FLASHINFER_UCACHE_MODULE
Then `import cutlass` works and flashinfer's kernel loads by path from $GDN_FLASHINFER_UCACHE_MODULE
(its `flashinfer.gdn_kernels.device_target` import resolves through .gpu/fi on PYTHONPATH).
Call the device tool with carry [".gpu"]. Size: see `du -sh .gpu` (must stay under ~60 MiB with the tree).
TXT
du -sh "$out"
