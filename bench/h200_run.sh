#!/usr/bin/env bash
# One H200 call for issue #6: conformance of our kernel, then timings. Run on the GPU host from the
# repo root (device tool, carry [".gpu"]); everything lands under $OUT.
#   bash bench/h200_run.sh [conformance|bench|sr|all] [extra bench args...]
set -euo pipefail
mode=${1:-all}
shift || true
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck disable=SC1091
source .gpu/env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
python3 -c "import cutlass, torch; print('cutlass ok; torch', torch.__version__)"
if [[ $mode == conformance || $mode == all ]]; then
  t0=$SECONDS
  GDN_CONFORMANCE_OUT=$out/conformance.json python3 -m pytest tests/kernels -q --tb=line \
    -p no:cacheprovider -rfEs 2>&1 | tee "$out/conformance.log" | tail -25 || true
  echo "# conformance wall $((SECONDS - t0)) s"
fi
if [[ $mode == sr || $mode == all ]]; then
  python3 bench/sr_drift.py --out "$out" "$@" 2>&1 | tail -12 || true
fi
if [[ $mode == bench || $mode == all ]]; then
  python3 bench/bench_ucache.py --out "$out" "$@" 2>&1 | tee "$out/bench.log" | grep -v '^#' || true
fi
