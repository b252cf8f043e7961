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
patch1=patches/Kernel-GDN-ReplaySSM-speculative-verify-flush-Triton.patch
python3 bench/triton_prep.py "$patch1" .gpu/series-vllm
export GDN_SERIES_VLLM_ROOT="$PWD/.gpu/series-vllm"
export GDN_TRITON_BASELINE_MODULE="$PWD/tests/series/triton_baseline_adapter.py"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

t0=$SECONDS
kernel_test=.gpu/series-vllm/tests/kernels/mamba/test_gdn_replayssm_spec_decode.py
pids=()
for group in qwen launch query_lengths "not qwen and not launch and not query_lengths"; do
    log="$out/vllm_kernel_tests.${group// /_}.log"
    timeout 40 python3 -m pytest -q -p tests.series.vllm_triton_shim -p no:cacheprovider \
        --noconftest --import-mode=importlib -k "$group" "$kernel_test" >"$log" 2>&1 &
    pids+=($!)
done
tests_rc=0
for pid in "${pids[@]}"; do
    rc=0
    wait "$pid" || rc=$?
    if [[ $rc -ne 0 ]]; then tests_rc=$rc; fi
done
echo "== kernel tests rc=$tests_rc $((SECONDS - t0)) s"
for log in "$out"/vllm_kernel_tests.*.log; do
    echo "   ${log##*/}: $(tail -n 1 "$log")"
done

t0=$SECONDS
conf_rc=0
timeout 25 python3 tests/conformance/run_gpu_suite.py --out "$out/conformance" \
    --backends triton_vllm --arms serving --deadline-s 20 --max-steps 12 \
    --cases t4_random,t4_boundaries,cuda_graph_vs_eager,vllm_layout_block_strided,t8_random \
    >"$out/conformance.log" 2>&1 || conf_rc=$?
echo "== conformance rc=$conf_rc $((SECONDS - t0)) s"
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
