# shellcheck shell=bash
# shellcheck disable=SC2034  # tests_rc, tests_failed and conf_rc are read by the sourcing script
# GPU checks of the series' Triton kernel, shared by bench/h200_triton.sh and
# bench/h200_triton_check.sh (sourced from the repository root, not run).

PATCH1=patches/Kernel-GDN-ReplaySSM-speculative-verify-flush-Triton.patch

# Materialise patch 1's kernel file and its vLLM test into .gpu/series-vllm (the host has no git)
# and point the tests, the conformance adapter and the bench at them.
triton_prepare() {
    python3 bench/triton_prep.py "$PATCH1" .gpu/series-vllm
    export GDN_SERIES_VLLM_ROOT="$PWD/.gpu/series-vllm"
    export GDN_TRITON_BASELINE_MODULE="$PWD/tests/series/triton_baseline_adapter.py"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
}

# The patch's CUDA kernel test in four groups, one process each (each Triton variant compiles on
# one core). $1 = output dir, $2 = timeout per group (s). Sets tests_rc (a non-zero exit status
# of a group, else 0) and tests_failed (1 when a group had failing tests, i.e. pytest exit 1).
triton_kernel_tests() {
    local out=$1 limit=$2 t0=$SECONDS group log pid rc
    local kernel_test=.gpu/series-vllm/tests/kernels/mamba/test_gdn_replayssm_spec_decode.py
    local pids=()
    for group in qwen launch query_lengths "not qwen and not launch and not query_lengths"; do
        log="$out/vllm_kernel_tests.${group// /_}.log"
        timeout "$limit" python3 -m pytest -q -p tests.series.vllm_triton_shim -p no:cacheprovider \
            --noconftest --import-mode=importlib -k "$group" "$kernel_test" >"$log" 2>&1 &
        pids+=($!)
    done
    tests_rc=0
    tests_failed=0
    for pid in "${pids[@]}"; do
        rc=0
        wait "$pid" || rc=$?
        if [[ $rc -ne 0 ]]; then tests_rc=$rc; fi
        if [[ $rc -eq 1 ]]; then tests_failed=1; fi
    done
    echo "== kernel tests rc=$tests_rc $((SECONDS - t0)) s"
    for log in "$out"/vllm_kernel_tests.*.log; do
        echo "   ${log##*/}: $(tail -n 1 "$log")"
    done
}

# A short conformance run of backend triton_vllm, serving arm. $1 = output dir, $2 = timeout (s),
# $3 = the suite's own deadline (s). Writes $1/conformance.log; sets conf_rc.
triton_conformance() {
    local out=$1 limit=$2 deadline=$3 t0=$SECONDS
    conf_rc=0
    timeout "$limit" python3 tests/conformance/run_gpu_suite.py --out "$out/conformance" \
        --backends triton_vllm --arms serving --deadline-s "$deadline" --max-steps 12 \
        --cases t4_random,t4_boundaries,cuda_graph_vs_eager,vllm_layout_block_strided,t8_random \
        >"$out/conformance.log" 2>&1 || conf_rc=$?
    echo "== conformance rc=$conf_rc $((SECONDS - t0)) s"
}
