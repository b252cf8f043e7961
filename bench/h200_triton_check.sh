#!/usr/bin/env bash
# Issue #4 follow-up on the H200 (one call, <= 120 s): the patch's CUDA kernel test and a short
# triton_vllm conformance run with the committed default launch config, then a launch-config
# sweep around it (informational). Everything lands in ONE file, $OUT/triton-check.tar.gz.
# Run from the repository root after `source .gpu/env.sh` (carry .gpu):
#     bash bench/h200_triton_check.sh
set -euo pipefail

: "${OUT:?set OUT to the output folder}"
work=$(mktemp -d)
out="$work/triton-check"
mkdir -p "$out"
start=$SECONDS
# shellcheck disable=SC1091  # the shared checks (bench/triton_gpu_checks.sh), sourced from the repo root
source bench/triton_gpu_checks.sh
tests_rc=0 conf_rc=0 # set by triton_kernel_tests / triton_conformance

triton_prepare
triton_kernel_tests "$out" 40
triton_conformance "$out" 25 20
tail -3 "$out/conformance.log"

t0=$SECONDS
sweep_rc=0
timeout 45 python3 bench/bench_triton.py --out "$out" --sweep-only --warm-timeout-s 20 \
    --configs 128,32,8,3,128 128,32,8,4,128 128,64,8,3,128 128,32,4,3,128 64,32,8,3,128 \
    128,16,8,4,128 >"$out/sweep.log" 2>&1 || sweep_rc=$?
echo "== sweep rc=$sweep_rc $((SECONDS - t0)) s"
cat "$out/sweep.log"

tar -czf "$OUT/triton-check.tar.gz" -C "$work" triton-check
rm -rf "$work"
echo "== total $((SECONDS - start)) s (tests rc=$tests_rc, conformance rc=$conf_rc, sweep rc=$sweep_rc)"
