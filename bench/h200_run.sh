#!/usr/bin/env bash
# H200 calls for issue #6 (kernel). Run on the GPU host from the repo root (device tool, carry
# [".gpu"]); everything lands under $OUT/kernel. Each mode keeps to a hard wall budget (timeout
# per step) and prints compact tables.
#   bash bench/h200_run.sh k1      # ~235 s: v4 conformance subset, config sweep v4 vs v3, knock-outs
#   bash bench/h200_run.sh k2      # ~235 s: conformance (serving+bf16) first, then the bench grid
#   bash bench/h200_run.sh conformance|bench|sr|all [extra bench args...]   (session-1 modes)
set -euo pipefail
mode=${1:-all}
shift || true
out=${OUT:-/tmp/out}/kernel
mkdir -p "$out"
# shellcheck disable=SC1091
source .gpu/env.sh
t_all=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
python3 -c "import cutlass, torch; print('cutlass ok; torch', torch.__version__)"
V4=v4=kernels/gdn_ucache_flush.py
V3=v3=kernels/gdn_ucache_flush_v3.py

conformance() {  # $1 = tag, $2 = seconds, $3 = pytest -k expression ("" = all), env: module
  local t0=$SECONDS
  GDN_CONFORMANCE_OUT=$out/conformance-$1.json timeout "$2" python3 -m pytest \
    tests/kernels/test_ours_conformance_gpu.py -v --tb=line -p no:cacheprovider -rfE \
    ${3:+-k "$3"} 2>&1 | tee "$out/conformance-$1.log" | grep -E "PASS|FAIL|ERROR|Error|passed|failed" |
    sed 's/^tests\/kernels\/test_ours_conformance_gpu.py:://' | cut -c1-150 | tail -45 || true
  echo "# conformance $1: wall $((SECONDS - t0)) s"
}

case $mode in
k1)
  conformance k1 85 "forced or persistent or compact_gqa or vllm_layout"
  # config sweep, cold L2, serving arm: v4 knobs vs v3 as run in session 1
  timeout 76 python3 bench/knockout.py --arm serving --hv 32 64 --batch 256 128 32 8 1 \
    --flush 0 20 100 --reps 10 --budget-s 62 --json "$out/sweep-k1.json" --modules "$V4" "$V3" \
    --variants v3:base v4:base v4:bv128+late3+mbp7 v4:bv128+late1+mbp5 v4:bv128+late1+mbp6 \
    v4:bv128+late1+mbp7 v4:bv128+late3+mbp6 v4:bv64 v4:bv64+mbp7 v4:bv32 v4:bv16 2>&1 |
    tee "$out/sweep-k1.log" | grep -v '^# v' || true
  # persistent CTAs in their own process (a fault there cannot take the sweep above with it)
  timeout 32 python3 bench/knockout.py --arm serving --hv 32 --batch 256 128 32 --flush 0 20 100 \
    --reps 10 --budget-s 22 --json "$out/persist-k1.json" --modules "$V4" \
    --variants bv128+late1+persist4 bv128+persist4 bv128+persist4+pf bv128+persist4+pf2 \
    bv128+late1+persist4+pf2 bv128+late1+persist5+pf2 bv128+late1+mbp6 2>&1 |
    tee "$out/persist-k1.log" | grep -v '^# v' || true
  # where the time goes in the smallest-register BV=128 config (knock-outs: wrong results)
  X=bv128+late1+mbp6
  timeout 20 python3 bench/knockout.py --arm serving --hv 32 --batch 256 --flush 0 100 --reps 10 \
    --json "$out/knockout-k1.json" --modules "$V4" \
    --variants "$X" "$X+no_proj" "$X+no_epi" "$X+no_fold" "$X+no_all" 2>&1 |
    tee "$out/knockout-k1.log" || true
  # B=1 on a warm L2 (the 4 us target is a graph-replay number)
  timeout 15 python3 bench/knockout.py --arm serving --hv 32 64 --batch 1 --flush 0 100 --warm \
    --reps 20 --json "$out/warm-b1-k1.json" --modules "$V4" "$V3" \
    --variants v3:base v4:base v4:bv32 v4:bv64 2>&1 | tee "$out/warm-b1-k1.log" || true
  ;;
k2)
  # conformance of the shipped defaults FIRST: #3's suite (serving + bf16, one process per unit, in
  # the background) and the kernel's own cases (forced BV / launch bounds / late / persistent)
  t0=$SECONDS
  timeout 90 python3 tests/conformance/run_gpu_suite.py --out "$out/suite-k2" --backends ours \
    --arms serving,bf16 --deadline-s 80 --jobs 10 >"$out/suite-k2.log" 2>&1 &
  suite_pid=$!
  conformance k2 88 "not long_run and not 64bit"
  wait "$suite_pid" || true
  tail -5 "$out/suite-k2.log"
  echo "# conformance (both) wall $((SECONDS - t0)) s"
  # the bench grid: ours (shipped defaults) vs flashinfer vs the frozen v3, one process
  timeout 125 python3 bench/bench_ucache.py --out "$out" --reps 8 --tag bench-k2 \
    --backends ours flashinfer --extra "ours_v3=kernels/gdn_ucache_flush_v3.py" "$@" 2>&1 |
    tee "$out/bench-k2.log" | grep -v '^#' || true
  ;;
conformance | all)
  conformance all 200 ""
  ;;&
sr | all)
  python3 bench/sr_drift.py --out "$out" "$@" 2>&1 | tail -12 || true
  ;;&
bench | all)
  python3 bench/bench_ucache.py --out "$out" "$@" 2>&1 | tee "$out/bench.log" | grep -v '^#' || true
  ;;
esac
echo "# h200_run $mode: wall $((SECONDS - t_all)) s"
