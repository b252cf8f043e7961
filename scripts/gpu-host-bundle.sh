#!/usr/bin/env bash
# Build the offline GPU-host bundle of the PATCHED vLLM into a git-ignored folder (issue #10).
#
#   scripts/gpu-host-bundle.sh [--out DIR=.gpu/vllm-bundle] [--series-ref REF=gdn-ucache]
#                              [--chunk-mib N (default: fit 64 MiB calls)] [--components vllm,wheels,cutlass,project]
#                              [--vllm-tree DIR] [--vllm-wheel WHL] [--offline] [--fast]
#
# Contents: the series branch's vllm/ tree + the vllm 0.33.0 wheel's compiled extensions and
# dist-info, ~70 dependency wheels (tools/gpuhost/wheels.txt, flashinfer 0.7.2.post1 among them),
# CuTe-DSL 4.8.0, and this project's kernels/ + e2e tools. Each part is an xz tar cached in
# ${GDN_UCACHE_CACHE:-~/.cache/gdn-ucache}/gpu-host-bundle; together they are cut into chunks
# (one per device call). OUT/PLAN.md says which call carries which chunk; on the host:
#   python3 tools/gpuhost/host.py stage OUT && python3 tools/gpuhost/host.py unpack
#   source /tmp/gdn-host/env.sh
# Wheels come through pip's configured index (no host named here); the first build takes
# several minutes (xz -9e with a 192 MiB dictionary), later builds reuse the cached parts.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,17p' "$0"; exit 0; fi
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
exec "${PYTHON:-python3}" -m tools.gpuhost.bundle "$@"
