#!/usr/bin/env bash
# Issues #4/#5 on the H200, one call: check the series' Triton kernel on the GPU, then time it.
#
# Run from the repository root on the GPU host after `source .gpu/env.sh` (carry .gpu):
#     bash bench/h200_triton.sh
# Steps (each under its own timeout; hard wall budget 200 s in all):
#   1. materialise patch 1's kernel file and vLLM test from patches/ into .gpu/series-vllm/
#      (and, if .gpu/triton-v1.patch exists, the session-1 kernel into .gpu/series-vllm-v1/);
#   2. the patch's vLLM kernel test on CUDA, 4 groups in parallel               (<= 45 s)
#   3. a short conformance run of backend triton_vllm, serving arm                (<= 30 s)
#   4. bench/bench_triton.py: parallel warm compile, launch-config sweep, then the full grid
#      with the chosen configs vs flashinfer, ours and the HBM floor (the session-1 kernel
#      stands in if the series' kernel fails everywhere)                           (<= 115 s)
# Outputs: $OUT/triton/{vllm_kernel_tests.log,conformance/,bench.log,bench_triton.*,sweep_triton.*}
set -euo pipefail

: "${OUT:?set OUT to the output folder}"
out="$OUT/triton"
mkdir -p "$out"
start=$SECONDS
# shellcheck disable=SC1091  # the shared checks (bench/triton_gpu_checks.sh), sourced from the repo root
source bench/triton_gpu_checks.sh
tests_rc=0 tests_failed=0 conf_rc=0 # set by triton_kernel_tests / triton_conformance

triton_prepare
v1_args=()
if [[ -f .gpu/triton-v1.patch ]]; then
    python3 bench/triton_prep.py .gpu/triton-v1.patch .gpu/series-vllm-v1
    v1_args=(--v1-root .gpu/series-vllm-v1)
fi

triton_kernel_tests "$out" 45
cat "$out"/vllm_kernel_tests.*.log >"$out/vllm_kernel_tests.log"
triton_conformance "$out" 30 25
tail -12 "$out/conformance.log"
bench_args=(--out "$out" --deadline-s 95 --warm-timeout-s 40 "${v1_args[@]}")
if [[ $tests_failed -eq 1 || $conf_rc -eq 1 ]]; then
    # A failing kernel may fault and poison the CUDA context for the other columns.
    if [[ ${#v1_args[@]} -gt 0 ]]; then
        echo "== WARNING: the series' kernel failed a GPU check: timing the session-1 kernel instead"
        bench_args+=(--only-v1)
    else
        echo "== WARNING: the series' kernel failed a GPU check; its timings are of a kernel to fix"
    fi
fi

t0=$SECONDS
bench_rc=0
timeout 115 python3 bench/bench_triton.py "${bench_args[@]}" >"$out/bench.log" 2>&1 || bench_rc=$?
echo "== bench rc=$bench_rc $((SECONDS - t0)) s"
cat "$out/bench.log"
echo "== total $((SECONDS - start)) s (tests rc=$tests_rc, conformance rc=$conf_rc, bench rc=$bench_rc)"
