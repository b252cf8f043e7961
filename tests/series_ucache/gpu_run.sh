#!/usr/bin/env bash
# One H200 call for issue #5 (device tool, carry [".gpu"], from the repo root; results in $OUT):
# the import-order check, the conformance suite through vLLM's ucache adapter with flashinfer's
# kernel in the serving arm (lazy-flush cases: the adapter always uses flush_min = 17 - T), and
# the Triton issue's bench script (ucache fused kernel vs Triton baseline per layer-step).
# Needs .gpu/series-ucache/gdn_ucache_spec.py (the series' adapter) and .gpu/series-vllm (the
# series' Triton op) next to the bundle.
set -euo pipefail
out=${OUT:-/tmp/out}/ucache
mkdir -p "$out"
# shellcheck disable=SC1091
source .gpu/env.sh
export GDN_UCACHE_ADAPTER_FILE=$PWD/.gpu/series-ucache/gdn_ucache_spec.py
export GDN_UCACHE_ADAPTER_KERNEL=flashinfer
export GDN_SERIES_VLLM_ROOT=$PWD/.gpu/series-vllm
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
python3 tests/series_ucache/gpu_import_order.py | tee "$out/import_order.json" || true
cases=t4_random,t4_boundaries,degenerate_gates,cuda_graph_vs_eager,misaligned_cursors
cases=$cases,t8_random,t8_boundaries,gqa_ratio4,vllm_layout_block_strided
t0=$SECONDS
timeout 140 python3 tests/conformance/run_gpu_suite.py --out "$out/conformance" \
  --backends ucache_adapter --arms serving --cases "$cases" --deadline-s 120 \
  2>&1 | tail -30 || echo "# conformance exit $?"
echo "# conformance wall $((SECONDS - t0)) s"
t0=$SECONDS
timeout "${BENCH_S:-60}" python3 bench/bench_triton.py --out "$out/bench" --hv 32 64 \
  --batch 8 64 256 --flush 0 20 100 --reps 30 2>&1 | tail -30 || echo "# bench exit $?"
echo "# bench wall $((SECONDS - t0)) s"
