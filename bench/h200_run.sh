#!/usr/bin/env bash
# H200 calls for issue #6 (kernel). Run on the GPU host from the repo root (device tool, carry
# [".gpu"]); everything lands under $OUT/kernel. Each mode keeps to a hard wall budget (timeout
# per step) and prints compact tables.
#   bash bench/h200_run.sh k2      # <= 225 s (170 s in session 2): conformance of the next kernel
#                                  # (serving + bf16, every launch-config candidate) first, then the
#                                  # proven candidates vs flashinfer vs v3 on the whole grid
#   bash bench/h200_run.sh k1      # exploration call planned in session 2 (never run: cancelled)
#   bash bench/h200_run.sh k3      # <= 200 s (session 3): Nsight Compute of ours vs flashinfer, the
#                                  # conformance suite without the hi/lo split, and the timing of
#                                  # nosplit / a fold-free (verify-only) build next to flashinfer
#   bash bench/h200_run.sh k4      # <= 300 s (sessions 4, 7, 8; v8 from session 10): conformance of
#                                  # kernels/gdn_ucache_flush_next.py (suite + own cases, serving +
#                                  # bf16; #3's suite also with next's new path forced: K4_FORCED,
#                                  # default late5), then next vs the shipped file
#                                  # (label K4_SHIPPED_NAME, default v5b; K4_VARIANTS and
#                                  # K4_BF16_VARIANTS replace the sweeps' variant lists)
#                                  # vs flashinfer on the grid with launch-config candidates, both
#                                  # arms, and a short ncu of next; one archive kernel-k4.tar.gz
#   bash bench/h200_run.sh k6      # <= 560 s (sessions 5-6, 12-13): the shipped kernel's final (or
#                                  # K6_MODULE's, the file about to ship; K6_STEPS="conf" or
#                                  # "bench" runs one half, "final" only the final benchmark of
#                                  # the file as it is): conformance
#                                  # (suite + every launch-config candidate + own cases, both arms),
#                                  # then launch candidates vs the table (K6_CANDIDATES) and B=1 on
#                                  # a warm L2 (K6_B1_VARIANTS), the table they choose written into
#                                  # a copy of the file (knockout.py propose --write: proposed-k6.py),
#                                  # and that copy's bench/bench_ucache.py (ours vs flashinfer vs
#                                  # the Triton baseline vs the floor, whole grid, both arms) and
#                                  # short knock-out sweep (K6_KNOCKOUTS); a file with chain
#                                  # (late13 + persistent CTAs) also gets #3's suite forced onto it;
#                                  # one archive kernel-k6.tar.gz. Runs after `source .gpu/env.sh`
#                                  # or in the e2e host bundle's environment (/tmp/gdn-host/env.sh)
#   bash bench/h200_run.sh k7      # <= 120 s (session 6): the shipped kernel vs another version
#                                  # (K7_OTHER=NAME=PATH, default v5=.gpu/v5.py from `git show
#                                  # d479645:kernels/gdn_ucache_flush_next.py`) vs flashinfer in
#                                  # ONE process (cold L2, serving arm), and B=1 on a warm L2 (fi's
#                                  # 5.3 us in h200-probe.md is warm). Session 6 ran it with
#                                  # K7_SHIPPED=v5 (then shipped) and K7_OTHER=v5b=.gpu/v5b.py
#                                  # (results/kernel/k7/v5-v5b-k7.*); one archive kernel-k7.tar.gz
#   bash bench/h200_run.sh k8      # <= 270 s (planned in session 8): where the shipped kernel's
#                                  # time goes and how close each part streams to HBM speed:
#                                  # knock-outs of the table config incl. `stream` (state loads
#                                  # only) vs flashinfer in one process, then Nsight Compute with
#                                  # DRAM throughput of ours, flashinfer and ours' stream-only
#                                  # build, B=1 on a warm L2; one archive kernel-k8.tar.gz
#   bash bench/h200_run.sh k9      # <= 220 s (session 10 with K9_LATES=6): v9 (next's late6:
#                                  # every state tile through one reused 16 KB shared stage by
#                                  # cp.async; late7, the default: the same by bulk copies;
#                                  # late8: both tiles by bulk copies at entry; late9: tile 0
#                                  # in registers, tile 1 by bulk copies, both at entry) --
#                                  # #3's suite forced onto each of K9_LATES (default "7 9"),
#                                  # then knock-outs of the first vs v5b and
#                                  # flashinfer incl. `alias` (the large smem buffers share one
#                                  # region: 7 CTAs/SM by registers alone; results wrong on
#                                  # purpose) and a short ncu of the occupancy; light `.gpu` carry
#   bash bench/h200_run.sh k10     # ~150 s (session 11): late7's residency curve: CTAs/SM pinned
#                                  # at 4 (driver's carve-out), 5 (`cmax`: the largest carve-out),
#                                  # 6 / 7 / 8 (`alias` plus unused `padN` bytes) vs v5b and
#                                  # flashinfer at HV 32/64, B 256/32; ncu of the pinned points;
#                                  # the SASS stall profile of late7 at 8 CTAs/SM (sass below)
#   bash bench/h200_run.sh k11     # ~180 s (session 11): late10/late11 (late7/late9 with two 2 KB
#                                  # bulk copies per warp-tile instead of 16 row copies): #3's
#                                  # suite forced onto both (in parallel), then their residency
#                                  # points (driver / cmax / alias / alias+mbp8) vs late7, late9,
#                                  # v5b and flashinfer; ncu of the cmax and 8-CTA points and the
#                                  # SASS stall profile of late10 at 8 CTAs/SM
#   bash bench/h200_run.sh k12     # ~150 s (session 11): late12 (late10 in 37.5 KB of shared
#                                  # memory: 6 CTAs/SM) -- #3's suite forced onto it, then it
#                                  # without and with launch bounds 6 vs late10, v5b and
#                                  # flashinfer (HV 32/64, B 8/32/256, 0/20/100 % flush); ncu
#   bash bench/h200_run.sh k13     # ~200 s (session 11): the bulk modes with the 228 KiB carve-out
#                                  # (cu_attrs; late10 -> 5 CTAs/SM at 45.6 KB): late10 and late12
#                                  # vs the shipped v5b and flashinfer on the serving grid (HV
#                                  # 32/48/64, B 1..256, 0/20/100 % flush) and the bf16 arm at
#                                  # B >= 32, ncu of late10's occupancy; K13_SUITES="10 12" runs
#                                  # #3's suite forced onto those modes first
#   bash bench/h200_run.sh k14     # ~220 s (planned in session 11): late10 / late12 / late13 at
#                                  # BV=64 (one tile per warp: no second dependent trip); late13
#                                  # (no fp32 [k; q] tile, no kb copy) at 7 CTAs/SM with the
#                                  # split, late12 at 7 without it -- #3's suite forced onto
#                                  # four forms, ncu, then all vs the BV=128 forms, v5b and
#                                  # flashinfer on the serving grid at B >= 8
#   bash bench/h200_run.sh k15     # ~150 s (session 12, ran in 16): ncu of the shipped table
#                                  # and flashinfer at HV 32/64 x B 256/128/32 (HV=32 B=256 and
#                                  # HV=64 B=128 launch the same 8192 CTAs), the sass mode, two
#                                  # more serving processes; one archive
#   bash bench/h200_run.sh k16     # ~170 s (session 16): next's dsreg / nobar: forced suites,
#                                  # their launch candidates, the sweep vs the table and flashinfer
#   bash bench/h200_run.sh k17     # ~300 s (session 17): chain (late13 with persistent CTAs):
#                                  # #3's suite forced onto it (with dsreg too), its launch
#                                  # candidates, the sweep vs the table, dsreg and flashinfer, ncu
#                                  # (K17_NCU=0: without it; K17_SHORT=1: chain's forced suite
#                                  # and a sweep of the table vs chain only, 45 s on an H100)
#   bash bench/h200_run.sh k18     # ~150 s (session 19): next's tepi (each tile's epilogue right
#                                  # after its projection, while the warp's next tile flies) and
#                                  # nobar (its CTA barrier moved to tile 0's end): #3's suite
#                                  # forced onto both, their launch candidates, then the table vs
#                                  # the table + tepi vs flashinfer (K18_VARIANTS replaces them;
#                                  # K18_CONF=0: the sweep alone, ~20 s)
#   bash bench/h200_run.sh k19     # ~130 s (session 20): next's afe (the affine epilogue: U and
#                                  # the outputs as Z0 + (e^{G*} P) L^T, Z0 and L before the state
#                                  # arrives): #3's suite forced onto it (late13, late10), its
#                                  # launch candidates, then the table vs the table + afe vs tepi
#                                  # vs no_epi vs flashinfer (K19_VARIANTS replaces them;
#                                  # K19_CONF=0: the sweep alone)
#   bash bench/h200_run.sh k20     # ~130 s (session 20): next's ostage (the u / output results
#                                  # staged in shared memory, written as 16-byte rows): #3's suite
#                                  # forced onto it (late13 with afe, late10 without), its launch
#                                  # candidates, then the table vs ostage vs afe + ostage vs no_epi
#                                  # vs flashinfer (K20_VARIANTS replaces them; K20_CONF=0: the
#                                  # sweep alone)
#   bash bench/h200_run.sh k21     # ~170 s (session 20): next's stef (the state's bulk copies
#                                  # evict-first in L2): #3's suite forced onto it (late13; late10
#                                  # with ostage), its launch candidates, then a cold-L2 sweep and
#                                  # a warm one (16 back-to-back calls: each pays the write-backs
#                                  # its predecessor left in L2) vs flashinfer (K21_VARIANTS
#                                  # replaces the cold sweep's; K21_CONF=0: the sweeps alone)
#   bash bench/h200_run.sh k22     # ~150 s (session 20, for an H200): Nsight Compute of the
#                                  # table, the table + dsreg (7 CTAs/SM), no_epi and afe + ostage
#                                  # vs flashinfer at verify-only B 256/128: achieved residency
#                                  # (warps active), DRAM rate and bytes per kernel
#   bash bench/h200_run.sh k23     # ~200 s (session 20, for an H200): is the H200's L2 what
#                                  # binds? The candidates with ostage, then a sweep of the table
#                                  # with ostage (full-sector writes) and without t1l2 (fewer L2
#                                  # requests) vs flashinfer, then Nsight Compute of the same forms
#                                  # with the L2's load and write sectors
#   bash bench/h200_run.sh k24     # ~170 s (session 21): next's tproj (the projection
#                                  # transposed: both operands from 16-byte shared reads): #3's
#                                  # suite forced onto it (late13, late10), its launch candidates,
#                                  # a sweep of the table vs tproj vs flashinfer, then Nsight
#                                  # Compute of both with the instructions executed (K24_VARIANTS
#                                  # replaces the sweep's; K24_CONF=0: sweep and profiles alone)
#   bash bench/h200_run.sh k25     # ~60 s (session 21): B=1 on a warm L2 (the 4 us target): rows
#                                  # per CTA 16/32/64/128 with actfirst vs the table vs flashinfer,
#                                  # two processes (K25_VARIANTS replaces the columns)
#   bash bench/h200_run.sh k26     # ~320 s (session 26-27): the lockstep-tail test (next's stagN:
#                                  # odd CTAs of the first wave start N ns late; K26_VARIANTS
#                                  # replaces the sweep's columns) on the session-19/20 grid vs
#                                  # flashinfer, then bench/pc_probe.py (the producer / consumer
#                                  # structure streaming the state alone, with a serial tail per
#                                  # row, vs one-row-per-CTA, flashinfer and the shipped kernel;
#                                  # K26_PC_CONFIGS replaces its configurations), then one
#                                  # row's on-chip latency (warm L2, chain at nprog1, B 1/4/16)
#   bash bench/h200_run.sh k30     # ~150 s (session 30): the per-card launch tables: the shipped
#                                  # file (`ours`, the card's own table) against a copy held to
#                                  # the H200's table (`h200t`), two processes on the grid where
#                                  # they differ (HV 32/48/64, B 8..256, cold L2), then #3's suite
#                                  # on the shipped file (the card's table)
#   bash bench/h200_run.sh sass    # ~35 s (session 10): Nsight Compute's per-instruction stall
#                                  # sampling (SourceCounters) of the shipped kernel (table config;
#                                  # SASS_MODULE overrides the file) and flashinfer at HV=32 B=256
#                                  # verify, the SASS source page as CSV and bench/ncu_sass.py's
#                                  # summary (where each kernel's warps wait); works with the light
#                                  # `.gpu` carry (cutlass + fi, no vLLM bundle)
#   bash bench/h200_run.sh conformance|bench|sr|all [extra bench args...]   (session-1 modes)
set -euo pipefail
mode=${1:-all}
shift || true
out=${OUT:-/tmp/out}/kernel
mkdir -p "$out"
if [[ -z ${GDN_HOST_SITE:-} ]]; then  # not already in the e2e host bundle's environment
  # shellcheck disable=SC1091
  source .gpu/env.sh
fi
t_all=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
python3 -c "import cutlass, torch; print('cutlass ok; torch', torch.__version__)"
# v4 = the next version (kernels/gdn_ucache_flush_v4.py until proven here; then it becomes the
# shipped kernels/gdn_ucache_flush.py), v3 = the frozen last GPU-proven version
V4FILE=kernels/gdn_ucache_flush_v4.py
[[ -f $V4FILE ]] || V4FILE=kernels/gdn_ucache_flush.py
V4=v4=$V4FILE
V3=v3=kernels/gdn_ucache_flush_v3.py
# next: the kernel file under work (the k-modes time it against the shipped one)
NEXTF=kernels/gdn_ucache_flush_next.py

conformance() {  # $1 = tag, $2 = seconds, $3 = pytest -k expression ("" = all), env: module
  local t0=$SECONDS
  GDN_CONFORMANCE_OUT=$out/conformance-$1.json timeout "$2" python3 -m pytest \
    tests/kernels/test_ours_conformance_gpu.py -v --tb=line -p no:cacheprovider -rfE \
    ${3:+-k "$3"} 2>&1 | tee "$out/conformance-$1.log" | grep -E "PASS|FAIL|ERROR|Error|passed|failed" |
    sed 's/^tests\/kernels\/test_ours_conformance_gpu.py:://' | cut -c1-150 | tail -45 || true
  echo "# conformance $1: wall $((SECONDS - t0)) s"
}

# Nsight Compute of bench/ncu_profile.py's launches (k4, k8): stall reasons, occupancy, DRAM
# throughput and bytes; $1 = report name under $out, $2 = seconds, then ncu_profile.py's arguments
# (knobs such as GDN_UCACHE_LATE / GDN_UCACHE_SKIP pass through the environment). Writes NAME.log,
# NAME.ncu-rep, NAME-details.txt, NAME-raw.csv and prints ncu_summary's table.
NCU_STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
NCU_DRAM=dram__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
NCU_DRAM=$NCU_DRAM,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_write.sum
# session 21: warp instructions executed (k15: the table issues 14-18 % more than flashinfer)
NCU_DRAM=$NCU_DRAM,smsp__inst_executed.sum
ncu_profile() {
  local name=$1 limit=$2
  shift 2
  local raw="$NCU_STALLS,$NCU_DRAM,gpu__time_duration.sum"
  raw="$raw,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
  raw="$raw,launch__occupancy_limit_registers,smsp__inst_executed.sum,sm__cycles_elapsed.max"
  timeout "$limit" ncu --clock-control none --profile-from-start off --nvtx \
    --print-nvtx-rename kernel --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics "$NCU_STALLS,$NCU_DRAM" -o "$out/$name" -f python3 bench/ncu_profile.py "$@" \
    >"$out/$name.log" 2>&1 || echo "# ncu $name rc=$?"
  if [[ -f $out/$name.ncu-rep ]]; then
    ncu -i "$out/$name.ncu-rep" --page details --print-nvtx-rename kernel \
      >"$out/$name-details.txt" 2>&1 || true
    ncu -i "$out/$name.ncu-rep" --page raw --csv --print-nvtx-rename kernel --metrics "$raw" \
      >"$out/$name-raw.csv" 2>&1 || true
    echo "== $name"
    python3 bench/ncu_summary.py "$out/$name-raw.csv" || true
  else
    tail -5 "$out/$name.log"
  fi
}

# The kernel's own GPU cases (tests/kernels/test_ours_conformance_gpu.py) in parallel pytest
# processes (k2, k4, k6): $1 = timeout per process (s), then one -k expression per process; the
# first two are the launch candidates per arm (conformance-candidate-ARM.{json,log}), the others
# conformance-casesI.*. Each pid is appended to the caller's `pids`.
CONF_PARTS=("candidate and serving" "candidate and bf16"
  "native_t or gate_regimes or predictive or t8_flush or qwen_shape"
  "compact_gqa or vllm_layout or persistent or forced_bv128_t8 or scalar_qk")
conformance_parts() {
  local limit=$1 i part tag
  shift
  local parts=("$@")
  for i in "${!parts[@]}"; do
    part=${parts[$i]}
    tag=$([[ $i -lt 2 ]] && echo "candidate-${part##* }" || echo "cases$i")
    GDN_CONFORMANCE_OUT=$out/conformance-$tag.json timeout "$limit" python3 -m pytest \
      tests/kernels/test_ours_conformance_gpu.py -v --tb=line -p no:cacheprovider -rfE \
      -k "$part" >"$out/conformance-$tag.log" 2>&1 &
    pids+=($!)
  done
}

# Passed / failed counts of every conformance log under $out and its first failures ($1 = the
# width a failure line is cut to).
conformance_summary() {
  local width=$1 f
  for f in "$out"/conformance-*.log; do
    echo "== $(basename "$f"): $(grep -cE ' PASSED' "$f") passed, $(grep -cE ' FAILED| ERROR' "$f") failed"
    grep -E ' FAILED| ERROR' "$f" | sed 's/^tests\/kernels\/test_ours_conformance_gpu.py:://' |
      cut -c1-"$width" | head -12 || true
  done
}

# #3's conformance suite (serving + bf16, ours only) with a launch mode forced, several at once
# (k9-k14 on next; k6 on FORCED_MODULE, the shipped file): $1 tag, $2 BV, $3 deadline (s), $4 jobs
# per suite, then one spec per suite: LATE or LATE/XSPLIT (XSPLIT 0 = no hi/lo split; named
# suite-TAG-lateLATE[-bvBV-splitXSPLIT]). Prints each suite's last two lines.
# One cold-L2 sweep of the session-19/20 grid (HV 32/48/64 x B 256/128/32 x flush 0/20/100, serving
# arm) of next's variants vs flashinfer: $1 = name (sweep-NAME.{json,log}), then the variants
grid_sweep() {
  local name=$1
  shift
  local budget=${SWEEP_BUDGET_S:-135}  # a short call's wall (k26 on a nearly spent lease)
  timeout $((budget + 15)) python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 \
    --batch 256 128 32 --flush 0 20 100 --budget-s "$budget" --json "$out/sweep-$name.json" \
    --backends flashinfer \
    --modules "ours=$NEXTF" --variants "$@" 2>&1 |
    tee "$out/sweep-$name.log" | grep -v '^# v' | tail -n 40 || true
}

# What the mode has written so far as kernel-$mode[-$1].tar.gz, $out kept. With a suffix it is a
# checkpoint beside the final archive: a call cut by its limit never reaches archive_mode, and the
# device tool then returns only the first 8 files of $out (session 23: the k6 conf step lost its
# suite logs that way)
checkpoint_mode() {
  tar -czf "$out/../kernel-$mode${1:+-$1}.tar.gz" -C "$out/.." kernel
}

# The GPU's memory in MiB (GDN_GPU_MEM_MIB overrides; 0 where nvidia-smi gives no number)
gpu_mem_mib() {
  local mib=${GDN_GPU_MEM_MIB:-$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits |
    head -1)}
  [[ $mib =~ ^[0-9]+$ ]] && echo "$mib" || echo 0
}

# The end of a k-mode: everything under $out as one archive, $OUT/kernel-MODE.tar.gz (the device
# tool returns a few files, not a tree), and $out emptied for the next step
archive_mode() {
  checkpoint_mode && rm -rf "$out" && mkdir -p "$out"
}

# ... after the mode's wall time
finish_mode() {
  echo "# h200_run $mode: wall $((SECONDS - t_all)) s"
  archive_mode
}

# k26's producer / consumer probe (bench/pc_probe.py; the shipped file as `ours`)
k26_probe() {
  # shellcheck disable=SC2086 # a word list
  timeout 200 python3 -m bench.pc_probe --hv 32 64 --batch 32 256 --reps 20 \
    --json "$out/pc-probe-k26.json" ${K26_PC_CONFIGS:+--configs $K26_PC_CONFIGS} 2>&1 |
    tee "$out/pc-probe-k26.log" | tail -n 20 || true
}

# k26's row latency: one CTA per (head, SM) walking B rows out of a warm L2 (chain: late13 with
# persistent CTAs, nprog1), so the slope of time over B is one row's on-chip latency, the number
# a producer / consumer kernel's consumers must beat (minus `stream`, the same walk without the
# math: one row's math on chip; no_epi: phase 5's share; no_all: the trips alone)
k26_rowlat() {
  # shellcheck disable=SC2086 # a word list
  timeout 70 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 --batch 1 4 16 \
    --flush 0 100 --budget-s 55 --json "$out/rowlat-k26.json" --backends flashinfer \
    --modules "ours=$NEXTF" --variants ${K26_ROWLAT_VARIANTS:-ours:bv128+late13 \
    ours:bv128+late13+persist1+nprog1 ours:bv128+late13+persist1+nprog1+no_epi \
    ours:bv128+late13+persist1+nprog1+stream ours:bv128+late13+persist1+nprog1+no_all} 2>&1 |
    tee "$out/rowlat-k26.log" | grep -v '^# v' | tail -n 16 || true
}

# #3's suite forced onto next with one knob on top of the table's B >= 128 load-order knobs
# (t1early, t1l2, wvearly), through late13 and late10 (BV=128, 60 s, 4 jobs): $1 = the tag,
# $2 = the knob's variable (GDN_UCACHE_TPROJ, ...)
table_knob_suites() {
  local tag=$1
  # exported for this call only (local -x), as `VAR=1 forced_suites ...` would
  local -x GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 GDN_UCACHE_WVEARLY=1 "$2=1" FORCED_MODULE=$NEXTF
  forced_suites "$tag" 128 60 4 13 10
}

forced_suites() {
  local tag=$1 bv=$2 deadline=$3 jobs=$4 spec l split name
  shift 4
  local pids=() names=()
  for spec in "$@"; do
    l=${spec%/*} split=""
    [[ $spec == */* ]] && split=${spec#*/}
    name=suite-$tag-late$l${split:+-bv$bv-split$split}
    GDN_UCACHE_OURS_MODULE=${FORCED_MODULE:-kernels/gdn_ucache_flush_next.py} GDN_UCACHE_LATE=$l \
      GDN_UCACHE_BV=$bv GDN_UCACHE_MBP=0 GDN_UCACHE_XSPLIT=${split:-1} \
      setsid timeout $((deadline + 15)) python3 tests/conformance/run_gpu_suite.py \
      --out "$out/$name" --backends ours --arms serving,bf16 --deadline-s "$deadline" \
      --jobs "$jobs" --max-steps 300 >"$out/$name.log" 2>&1 &
    pids+=("$!") names+=("$name")
  done
  wait "${pids[@]}" || true
  for name in "${names[@]}"; do echo "== $name (bv$bv, no bound):"; tail -2 "$out/$name.log"; done
}

case $mode in
k4)
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  t0=$SECONDS
  setsid timeout 80 python3 tests/conformance/run_gpu_suite.py --out "$out/suite-k4" \
    --backends ours --arms serving,bf16 --deadline-s 60 --jobs 8 --max-steps 300 \
    >"$out/suite-k4.log" 2>&1 &
  suite_pid=$!
  # next with its new path forced (K4_FORCED, default v8's: tile 1 staged in shared memory,
  # BV=128, no launch bound): #3's suite on it, since the table's configs do not use it
  forced=${K4_FORCED:-late5}
  GDN_UCACHE_LATE=${forced#late} GDN_UCACHE_BV=128 GDN_UCACHE_MBP=0 setsid timeout 80 python3 \
    tests/conformance/run_gpu_suite.py --out "$out/suite-k4-$forced" --backends ours \
    --arms serving,bf16 --deadline-s 60 --jobs 4 --max-steps 300 >"$out/suite-k4-$forced.log" 2>&1 &
  forced_pid=$!
  pids=("$suite_pid" "$forced_pid")
  conformance_parts 80 "${CONF_PARTS[@]}"
  if [[ -f .gpu/k4/prev.py ]]; then  # the fallback's table configs, in case next fails here
    GDN_UCACHE_OURS_MODULE=.gpu/k4/prev.py timeout 80 python3 -m pytest \
      tests/kernels/test_ours_conformance_gpu.py -v --tb=line -p no:cacheprovider -rfE \
      -k "candidate and (mbp5 or (late1 and mbp6))" >"$out/conformance-prev-tableconfigs.log" 2>&1 &
    pids+=($!)
  fi
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  kill -- -"$suite_pid" 2>/dev/null || true
  kill -- -"$forced_pid" 2>/dev/null || true
  tail -3 "$out/suite-k4.log"
  echo "== $forced (bv128, no bound):"; tail -2 "$out/suite-k4-$forced.log"
  conformance_summary 160
  echo "# conformance ($NEXTF) wall $((SECONDS - t0)) s"
  unset GDN_UCACHE_OURS_MODULE
  # timing, cold L2, graph replay: flashinfer, the shipped v4 (its table) and next's candidates
  NX=next=$NEXTF
  SHIP=${K4_SHIPPED_NAME:-v5b}  # the label of the shipped file (v4 in session 4)
  V4S=$SHIP=kernels/gdn_ucache_flush.py
  # optional: an earlier state of the next kernel (git show REV:kernels/... > .gpu/k4/prev.py)
  mods=("$V4S" "$NX")
  # v8 (late5) next to the shipped table (next:base is the same code: the noise floor), the
  # one no-bound late3 config (80 registers, 6 CTAs/SM) and B=1's bv32
  # K4_VARIANTS / K4_BF16_VARIANTS replace the two sweeps' lists (session 12: next's table, with
  # late10 at B >= 32, vs the shipped one)
  read -r -a vars <<<"${K4_VARIANTS:-$SHIP:base next:base next:bv128+late5 next:bv128+late5+mbp5 next:bv128+late3+mbp0 next:bv32}"
  if [[ -f .gpu/k4/prev.py ]]; then mods+=(prev=.gpu/k4/prev.py); vars=(prev:base "${vars[@]}"); fi
  timeout 100 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 48 --batch 256 128 32 8 1 \
    --flush 0 20 100 --budget-s 70 --json "$out/sweep-k4-serving.json" --backends flashinfer \
    --modules "${mods[@]}" --variants "${vars[@]}" 2>&1 | tee "$out/sweep-k4-serving.log" |
    grep -v '^# v' || true
  read -r -a bvars <<<"${K4_BF16_VARIANTS:-$SHIP:base next:bv128+late5 next:bv128+late5+mbp5 next:bv128+late3+mbp5}"
  timeout 60 python3 bench/knockout.py --reps 8 --arm bf16 --hv 32 64 48 --batch 256 128 32 8 1 \
    --flush 0 20 100 --budget-s 50 --json "$out/sweep-k4-bf16.json" --backends flashinfer \
    --modules "$V4S" "$NX" --variants "${bvars[@]}" 2>&1 |
    tee "$out/sweep-k4-bf16.log" | grep -v '^# v' || true
  # where next's time goes now (knock-outs: results wrong on purpose), B=256 and 32, HV=32
  timeout 45 python3 bench/knockout.py --reps 8 --arm serving --hv 32 --batch 256 32 --flush 0 100 \
    --budget-s 36 --json "$out/knockout-k4.json" --backends flashinfer --modules "$NX" \
    --variants next:base next:base+stream next:bv128+late5 next:bv128+late5+stream \
    next:bv128+late5+no_epi next:bv128+late5+no_fold next:bv128+late5+no_all 2>&1 |
    tee "$out/knockout-k4.log" || true
  # B=1 on a warm L2 with the back-to-back timing (bench_ucache.WARM_CALLS): the 4 us target
  timeout 30 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 --batch 1 \
    --flush 0 20 100 --budget-s 20 --json "$out/warm-b1-k4.json" --backends flashinfer \
    --modules "$V4S" "$NX" --variants "$SHIP:base" next:bv32 next:bv128+late5 2>&1 |
    tee "$out/warm-b1-k4.log" | grep -v '^# v' | tail -n 13 || true
  echo "# h200_run k4 before ncu: $((SECONDS - t_all)) s"
  if ((SECONDS - t_all < ${K4_NCU_BEFORE_S:-240})); then
    # next at its forced path (v8: late5) and flashinfer
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=${forced#late} ncu_profile ncu-k4 50 \
      --backends ours flashinfer --hv 32 --batch 256 32 --flush 0
  fi
  archive_mode
  ;;
k8)
  # 1. timing decomposition in one process (results wrong on purpose in the knock-outs): next is
  #    the shipped code at late != 4, base = the shipped table's config; stream = the state loads
  #    alone, no_all = everything but the state (cursors, windows, activations, prologue, stores)
  NX=next=kernels/gdn_ucache_flush_next.py
  t0=$SECONDS
  timeout 110 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 32 \
    --flush 0 100 --budget-s 95 --json "$out/knockout-k8.json" --backends flashinfer \
    --modules "$NX" --variants next:base next:base+stream next:base+no_all next:base+no_proj \
    next:base+no_epi next:base+no_fold next:bv128+late3+mbp0+stream next:bv128+late4+stream \
    next:bv64+late4+stream next:bv128+late3+persist5+pf2 next:bv128+late3+persist5+pf2+stream \
    2>&1 | tee "$out/knockout-k8.log" | grep -v '^# v' || true
  echo "# knock-outs wall $((SECONDS - t0)) s"
  # B=1 on a warm L2 (the issue's 4 us target; flashinfer's 5.3 us in h200-probe.md is warm),
  # first since time_graph stopped counting the host's graph launch (k7's warm run did)
  timeout 30 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 --batch 1 \
    --flush 0 20 100 --budget-s 20 --json "$out/warm-b1-k8.json" --backends flashinfer \
    --modules ours=kernels/gdn_ucache_flush.py --variants ours:base 2>&1 |
    tee "$out/warm-b1-k8.log" | grep -v '^# v' | tail -n 12 || true
  # 2. Nsight Compute: ours (shipped, table config) and flashinfer, then ours' stream-only build
  t0=$SECONDS
  for run in main stream; do
    skip=""; backends=(ours flashinfer)
    if [[ $run == stream ]]; then skip=proj,epi,fold,sink; backends=(ours); fi
    GDN_UCACHE_OURS_MODULE=kernels/gdn_ucache_flush_next.py GDN_UCACHE_SKIP=$skip \
      ncu_profile "ncu-k8-$run" 80 --backends "${backends[@]}" --hv 32 --batch 256 32 --flush 0 20
  done
  echo "# ncu wall $((SECONDS - t0)) s; h200_run k8: wall $((SECONDS - t_all)) s"
  archive_mode
  ;;
# k4, k9-k14 force removed late modes: they ran at commits before the cleanup (git checkout <rev>)
k9)
  # the modes whose conformance runs (#3's suite, in parallel); the first is the one profiled
  # (session 10 ran K9_LATES=6; 7 = bulk copies through one stage, 9 = tile 1 by bulk copies)
  read -r -a lates <<<"${K9_LATES:-7 9}"
  late=${lates[0]}
  forced_suites k9 128 55 8 "${lates[@]}"
  # cold L2, graph replay, HV=32: the shipped table config, v9 step 1 at its own residency
  # (smem: 5 CTAs/SM) and with `alias` (registers: 7), v5b's config with alias (registers: 5),
  # and the stream-only builds of both next to flashinfer
  timeout 110 python3 bench/knockout.py --reps 8 --arm serving --hv 32 --batch 256 32 \
    --flush 0 100 --budget-s 90 --json "$out/knockout-k9.json" --backends flashinfer \
    --modules "next=$NEXTF" --variants next:base next:bv128+late6+mbp0 \
    "next:bv128+late$late+mbp0" "next:bv128+late$late+mbp0+alias" next:base+alias \
    "next:bv128+late$late+mbp0+stream" "next:bv128+late$late+mbp0+stream+alias" \
    next:base+stream next:bv128+late8+mbp0 next:bv128+late8+mbp0+alias next:bv128+late9+mbp0 \
    2>&1 |
    tee "$out/knockout-k9.log" | grep -v '^# v' || true
  # occupancy and DRAM of the mode under test with and without alias (one launch each)
  for skip in "" alias; do
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=$late GDN_UCACHE_BV=128 GDN_UCACHE_MBP=0 \
      GDN_UCACHE_SKIP=$skip ncu_profile "ncu-k9-late$late${skip:+-$skip}" 30 --backends ours \
      --hv 32 --batch 256 --flush 0
  done
  finish_mode
  ;;
k10)
  l7=next:bv128+late7+mbp0
  # shared memory per CTA: late7 45.6 KB, with alias 22.4 KB (ncu, results/kernel/v9s2-k9);
  # with the 228 KiB carve-out and 1 KiB reserved per CTA, +15000 B allows 6, +9800 B 7
  timeout 200 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 32 \
    --flush 0 100 --budget-s 170 --json "$out/knockout-k10.json" --backends flashinfer \
    --modules "next=$NEXTF" --variants next:base "$l7" "$l7+cmax" "$l7+alias+cmax+pad15000" \
    "$l7+alias+cmax+pad9800" "$l7+alias+cmax" "$l7+stream+alias+cmax" 2>&1 |
    tee "$out/knockout-k10.log" | grep -v '^# v' || true
  for pad in 15000 9800; do
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=7 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=0 \
      GDN_UCACHE_SKIP=alias,pad$pad GDN_UCACHE_CARVEOUT=100 ncu_profile "ncu-k10-pad$pad" 30 \
      --backends ours --hv 32 --batch 256 --flush 0
  done
  SASS_MODULE=$NEXTF GDN_UCACHE_LATE=7 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=0 GDN_UCACHE_SKIP=alias \
    GDN_UCACHE_CARVEOUT=100 bash "$0" sass || true
  finish_mode
  ;;
k11)
  forced_suites k11 128 55 8 10 11
  l7=next:bv128+late7+mbp0 l10=next:bv128+late10
  timeout 200 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 32 \
    --flush 0 100 --budget-s 170 --json "$out/knockout-k11.json" --backends flashinfer \
    --modules "next=$NEXTF" --variants next:base "$l7+alias+cmax" "$l10+mbp0" "$l10+mbp0+cmax" \
    "$l10+mbp0+alias+cmax" "$l10+mbp8+alias" "$l10+mbp0+stream+alias+cmax" \
    next:bv128+late9+mbp0 next:bv128+late11+mbp0 2>&1 |
    tee "$out/knockout-k11.log" | grep -v '^# v' || true
  for v in "0 cmax" "8 alias"; do
    read -r mbp knob <<<"$v"
    skip=$([[ $knob == alias ]] && echo alias || true)
    carve=$([[ $knob == cmax ]] && echo 100 || true)
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=10 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=$mbp \
      GDN_UCACHE_SKIP=$skip GDN_UCACHE_CARVEOUT=$carve ncu_profile "ncu-k11-late10-$knob" 30 \
      --backends ours --hv 32 --batch 256 --flush 0
  done
  SASS_MODULE=$NEXTF GDN_UCACHE_LATE=10 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=8 GDN_UCACHE_SKIP=alias \
    bash "$0" sass || true
  finish_mode
  ;;
k12)
  forced_suites k12 128 55 8 12
  timeout 200 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 32 8 \
    --flush 0 20 100 --budget-s 170 --json "$out/knockout-k12.json" --backends flashinfer \
    --modules "next=$NEXTF" --variants next:base next:bv128+late10+mbp0 next:bv128+late10+mbp5 \
    next:bv128+late12+mbp0 next:bv128+late12+mbp6 next:bv128+late10+mbp0+alias+cmax 2>&1 |
    tee "$out/knockout-k12.log" | grep -v '^# v' || true
  for mbp in 0 6; do
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=12 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=$mbp \
      ncu_profile "ncu-k12-late12-mbp$mbp" 30 --backends ours --hv 32 --batch 256 --flush 0
  done
  finish_mode
  ;;
k13)
  if [[ -n ${K13_SUITES:-} ]]; then  # e.g. "10 12": #3's suite forced onto these modes first
    read -r -a lates <<<"$K13_SUITES"
    forced_suites k13 128 55 8 "${lates[@]}"
  fi
  GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=10 GDN_UCACHE_BV=128 GDN_UCACHE_MBP=0 \
    ncu_profile ncu-k13-late10 30 --backends ours --hv 32 --batch 256 --flush 0
  timeout 150 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 48 \
    --batch 256 128 32 8 1 --flush 0 20 100 --budget-s 130 --json "$out/sweep-k13-serving.json" \
    --backends flashinfer --modules v5b=kernels/gdn_ucache_flush.py "next=$NEXTF" \
    --variants v5b:base next:bv128+late10+mbp0 next:bv128+late12+mbp0 next:bv128+late7+mbp0 \
    2>&1 | tee "$out/sweep-k13-serving.log" | grep -v '^# v' || true
  timeout 80 python3 bench/knockout.py --reps 8 --arm bf16 --hv 32 64 --batch 256 32 \
    --flush 0 20 100 --budget-s 65 --json "$out/sweep-k13-bf16.json" --backends flashinfer \
    --modules v5b=kernels/gdn_ucache_flush.py "next=$NEXTF" \
    --variants v5b:base next:bv128+late10+mbp0 next:bv128+late12+mbp0 2>&1 |
    tee "$out/sweep-k13-bf16.log" | grep -v '^# v' || true
  finish_mode
  ;;
k14)
  # #3's suite forced onto the BV=64 forms (one tile per warp) and late12 without the hi/lo
  # split (31.3 KB: 7 CTAs/SM; results/kernel/ptxas/regs-s11-next-bv64-nosplit.md)
  forced_suites k14 64 60 4 13/1 10/1 12/1 12/0
  for spec in "13 1" "12 0"; do
    read -r l split <<<"$spec"
    GDN_UCACHE_OURS_MODULE=$NEXTF GDN_UCACHE_LATE=$l GDN_UCACHE_BV=64 GDN_UCACHE_MBP=0 \
      GDN_UCACHE_XSPLIT=$split ncu_profile "ncu-k14-late$l-bv64-split$split" 30 --backends ours \
      --hv 32 --batch 256 --flush 0
  done
  timeout 170 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 48 --batch 256 128 32 8 \
    --flush 0 20 100 --budget-s 150 --json "$out/sweep-k14-serving.json" --backends flashinfer \
    --modules v5b=kernels/gdn_ucache_flush.py "next=$NEXTF" --variants v5b:base \
    next:bv128+late10+mbp0 next:bv128+late12+mbp0 next:bv64+late10+mbp0 next:bv64+late12+mbp0 \
    next:bv64+late10+mbp0+nosplit next:bv64+late12+mbp0+nosplit next:bv64+late13+mbp0 \
    next:bv128+late13+mbp0 2>&1 |
    tee "$out/sweep-k14-serving.log" | grep -v '^# v' || true
  finish_mode
  ;;
k16)
  # session 16: next's dsreg (the projections kept in registers: late13 in 31.8 KB, 7 CTAs/SM
  # where it had 6; k15 found residency to be the verify-only gap) and nobar (a warp barrier
  # before the epilogue), against the shipped table and flashinfer. Conformance first: #3's suite
  # forced onto late13 / late10 with the table's knobs + dsreg and late13 with nobar, and the
  # launch candidates that carry either knob, both arms
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  table_knob_suites k16-dsreg GDN_UCACHE_DSREG &
  GDN_UCACHE_NOBAR=1 FORCED_MODULE=$NEXTF forced_suites k16-nobar 128 60 4 13 &
  conformance candidate-k16 100 "candidate and (dsreg or nobar)"
  wait
  # one process: the table (base) and base+dsreg / base+nobar (the table's entry plus the knob;
  # at B 32..127 the entry is late10, where dsreg keeps 5 CTAs/SM) vs flashinfer
  timeout 110 python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 --batch 256 128 32 \
    --flush 0 20 100 --budget-s 95 --json "$out/sweep-k16.json" --backends flashinfer \
    --modules "ours=$NEXTF" --variants ours:base ours:base+dsreg ours:base+nobar 2>&1 |
    tee "$out/sweep-k16.log" | grep -v '^# v' | tail -n 30 || true
  # does dsreg get its 7 CTAs/SM, and what do they buy (occupancy, DRAM rate) at HV=32 B=256
  for d in 0 1; do
    GDN_UCACHE_DSREG=$d ncu_profile "ncu-k16-dsreg$d" 60 --backends ours --hv 32 --batch 256 \
      --flush 0
  done
  finish_mode
  ;;
k17)
  # session 17: chain (late13 with persistent CTAs: each CTA walks rows z, z + nprog, ... and
  # copies the next row's first state tile during this row's epilogue). Conformance first: #3's
  # suite forced onto chain with the table's B >= 128 knobs and with dsreg + nextl2 (the next
  # row's first bytes asked into L2) (2 and 3 programs: every CTA walks several rows, pad rows
  # among them), the chain launch candidates in both arms; then one sweep of the table, the
  # table + dsreg and the chain forms vs flashinfer (k16's dsreg question on this card too), and
  # ncu of chain at HV=32 B=256 verify
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  chain=ours:bv128+late13+persist6+t1early+t1l2+wvearly
  # K17_SHORT=1 (a device budget too short for the rest; 45 s on an H100): chain's forced suite
  # alone (8 jobs), then the table vs chain (with and without nextl2) vs flashinfer at B >= 32;
  # K17_SUITE=0 leaves chain's forced suite out, K17_VARIANTS replaces the short sweep's variants
  short=${K17_SHORT:-0}
  if [[ ${K17_SUITE:-1} == 1 ]]; then
    GDN_UCACHE_PERSIST=6 GDN_UCACHE_NPROG=2 GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 \
      GDN_UCACHE_WVEARLY=1 FORCED_MODULE=$NEXTF \
      forced_suites k17-chain 128 60 "$((short == 1 ? 8 : 4))" 13 &
  fi
  if [[ $short == 1 ]]; then
    wait
    # shellcheck disable=SC2086 # a word list
    timeout 90 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 128 32 \
      --flush 0 20 100 --budget-s 75 --json "$out/sweep-k17.json" --backends flashinfer \
      --modules "ours=$NEXTF" --variants ${K17_VARIANTS:-ours:base $chain $chain+nextl2} 2>&1 |
      tee "$out/sweep-k17.log" | grep -v '^# v' | tail -n 40 || true
  else
    GDN_UCACHE_PERSIST=7 GDN_UCACHE_NPROG=3 GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 \
      GDN_UCACHE_DSREG=1 GDN_UCACHE_NEXTL2=1 FORCED_MODULE=$NEXTF \
      forced_suites k17-chain-dsreg-nextl2 128 60 4 13 &
    conformance candidate-k17 100 "candidate and (persist6 or persist7 or bv64+actfirst)"
    wait
    timeout 150 python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 \
      --batch 256 128 32 --flush 0 20 100 --budget-s 130 --json "$out/sweep-k17.json" \
      --backends flashinfer --modules "ours=$NEXTF" --variants ours:base ours:base+dsreg \
      "$chain" "$chain+nextl2" ours:bv128+late13+persist7+t1early+t1l2+wvearly+dsreg 2>&1 |
      tee "$out/sweep-k17.log" | grep -v '^# v' | tail -n 30 || true
    # B=1 on a warm L2 (the 4 us target: HV 48/64 take bv128 there, 48-64 CTAs, 4.3-4.4 us in
    # v10-k6): more, smaller CTAs per head
    timeout 40 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 \
      --batch 1 --flush 0 20 100 --budget-s 30 --json "$out/warm-b1-k17.json" \
      --backends flashinfer --modules "ours=$NEXTF" --variants ours:base ours:bv32+actfirst \
      ours:bv64+actfirst ours:bv128+actfirst 2>&1 | tee "$out/warm-b1-k17.log" |
      grep -v '^# v' | tail -n 12 || true
    # K17_NCU=0 leaves the profile out (~60 s) where the device budget is short
    if [[ ${K17_NCU:-1} == 1 ]]; then
      GDN_UCACHE_LATE=13 GDN_UCACHE_BV=128 GDN_UCACHE_PERSIST=6 GDN_UCACHE_T1EARLY=1 \
        GDN_UCACHE_T1L2=1 GDN_UCACHE_WVEARLY=1 ncu_profile ncu-k17-chain 60 --backends ours \
        --hv 32 --batch 256 --flush 0
    fi
  fi
  finish_mode
  ;;
k18)
  # session 19: tepi (bulk modes at BV=128 with t1early: tile ti's epilogue right after its
  # projection and fold, while the warp's tile ti + 1 is in flight, instead of both after the
  # last tile; the CTA barrier that orders phase 3's operands moves to the end of tile 0's turn,
  # nobar's too). Conformance first: #3's suite forced onto tepi (late13 with the table's B >= 128
  # knobs; late10 with t1early) and onto nobar, the launch candidates with tepi / nobar / dsreg
  # (both arms); then one sweep of the table, the table + tepi and flashinfer
  # (K18_CONF=0: the sweep alone, for a second card once conformance has passed on one). nobar's
  # suite runs after tepi's two: three suites at once ran the 80 GB H100 out of memory in the
  # huge-pool case (results/kernel/k18-h100)
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K18_CONF:-1} == 1 ]]; then
    table_knob_suites k18-tepi GDN_UCACHE_TEPI &
    conformance candidate-k18 100 "candidate and (tepi or nobar or dsreg)"
    wait
    GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 GDN_UCACHE_NOBAR=1 FORCED_MODULE=$NEXTF \
      forced_suites k18-nobar 128 60 8 13
  fi
  # base+t1early+tepi: at B 32..127 the table's late10 entry has no t1early (tepi needs it)
  # shellcheck disable=SC2086 # a word list
  timeout 130 python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 --batch 256 128 32 \
    --flush 0 20 100 --budget-s 115 --json "$out/sweep-k18.json" --backends flashinfer \
    --modules "ours=$NEXTF" --variants ${K18_VARIANTS:-ours:base ours:base+tepi \
    ours:base+t1early ours:base+t1early+tepi ours:base+nobar} 2>&1 |
    tee "$out/sweep-k18.log" | grep -v '^# v' | tail -n 40 || true
  finish_mode
  ;;
k19)
  # session 20: afe (bulk modes at BV=128, T <= 4: phase 5 is affine in the projections,
  # [U | O] = Z0 + (e^{G*} P) L^T; Z0 and L are computed before the state tiles arrive and each
  # tile's projection is followed by two MMAs and its stores). Conformance first: #3's suite
  # forced onto afe (late13 with the table's B >= 128 knobs; late10), the launch candidates with
  # afe (both arms); then one sweep of the table, the table + afe (with t1early too: the late10
  # entries at B 32..127 lack it), tepi (k18's sweep leaked GDN_UCACHE_TEPI into its later
  # columns: this is its first clean sweep past the first point), no_epi and flashinfer
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K19_CONF:-1} == 1 ]]; then
    table_knob_suites k19-afe GDN_UCACHE_AFE &
    conformance candidate-k19 100 "candidate and afe"
    wait
  fi
  # shellcheck disable=SC2086 # a word list
  grid_sweep k19 ${K19_VARIANTS:-ours:base ours:base+afe ours:base+t1early+afe ours:base+tepi \
    ours:base+no_epi}
  finish_mode
  ;;
k20)
  # session 20: ostage (phase 5's u / output results staged in each tile's own ds rows and
  # written as 16-byte rows, two lanes per 32-byte sector, instead of 16-bit stores; k19 on the
  # H100: the 16-bit stores are phase 5's whole cost). Conformance first: #3's suite forced onto
  # ostage through afe (late13 with the B >= 128 knobs) and through phase 5 (late10), the launch
  # candidates with ostage (both arms); then one sweep
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K20_CONF:-1} == 1 ]]; then
    GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 GDN_UCACHE_WVEARLY=1 GDN_UCACHE_AFE=1 \
      GDN_UCACHE_OSTAGE=1 FORCED_MODULE=$NEXTF forced_suites k20-afe-ostage 128 60 4 13 &
    GDN_UCACHE_OSTAGE=1 FORCED_MODULE=$NEXTF forced_suites k20-ostage 128 60 4 10 &
    conformance candidate-k20 100 "candidate and ostage"
    wait
  fi
  # shellcheck disable=SC2086 # a word list
  grid_sweep k20 ${K20_VARIANTS:-ours:base ours:base+ostage ours:base+afe+ostage \
    ours:base+t1early+ostage ours:base+no_epi}
  finish_mode
  ;;
k21)
  # session 20: stef (the state's bulk copies carry an L2 evict-first policy, so the u / output
  # rows written meanwhile stay in L2; k19/k20 on the H100: phase 5's writes, not their math or
  # their shape, are what no_epi saves). Conformance first: #3's suite forced onto stef (late13
  # with the B >= 128 knobs; late10 with ostage), the launch candidates with stef (both arms).
  # Then a cold-L2 sweep (the scrub between replays pays the write-backs left in L2) and a warm
  # one (each call pays its predecessor's): the warm sweep is the honest steady state
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K21_CONF:-1} == 1 ]]; then
    GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 GDN_UCACHE_WVEARLY=1 GDN_UCACHE_STEF=1 \
      FORCED_MODULE=$NEXTF forced_suites k21-stef 128 75 4 13 &
    GDN_UCACHE_STEF=1 GDN_UCACHE_OSTAGE=1 FORCED_MODULE=$NEXTF forced_suites k21-stef-ostage \
      128 75 4 10 &
    conformance candidate-k21 100 "candidate and stef"
    wait
  fi
  # shellcheck disable=SC2086 # a word list
  grid_sweep k21 ${K21_VARIANTS:-ours:base ours:base+stef ours:base+stef+ostage \
    ours:base+stef+afe+ostage ours:base+no_epi}
  timeout 150 python3 bench/knockout.py --warm --reps 8 --arm serving --hv 32 64 \
    --batch 256 128 32 --flush 0 20 100 --budget-s 135 --json "$out/sweep-k21-warm.json" \
    --backends flashinfer --modules "ours=$NEXTF" \
    --variants ours:base ours:base+stef ours:base+stef+ostage 2>&1 |
    tee "$out/sweep-k21-warm.log" | grep -v '^# v' | tail -n 30 || true
  finish_mode
  ;;
k22)
  # session 20: the H200-only verify-only gap. k15 (H200) found the same DRAM bytes for ours and
  # flashinfer (331.8 vs 332.3 MB at HV=32 B=256) but 35.7 vs 40.3 % warps active and 77.5 vs
  # 83.1 % DRAM rate: flashinfer keeps more CTAs (bytes) in flight. dsreg allows 7 CTAs/SM and
  # timed no faster: does it reach them, and what does the DRAM do then? The same profile for
  # no_epi (no writes) and afe + ostage. Each profile is one process (the knobs are its env).
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  k22_points=(--hv 32 64 --batch 256 128 --flush 0)
  ncu_profile ncu-k22-table 100 --backends ours flashinfer "${k22_points[@]}"
  GDN_UCACHE_DSREG=1 ncu_profile ncu-k22-dsreg 70 --backends ours "${k22_points[@]}"
  GDN_UCACHE_SKIP=epi ncu_profile ncu-k22-noepi 70 --backends ours "${k22_points[@]}"
  GDN_UCACHE_AFE=1 GDN_UCACHE_OSTAGE=1 ncu_profile ncu-k22-afe-ostage 70 --backends ours \
    "${k22_points[@]}"
  rm -f "$out"/*.ncu-rep
  finish_mode
  ;;
k23)
  # session 20: the H200-only verify-only gap as an L2 limit. On the H200 (k15) the L2 ran at
  # ~90 % for both kernels while the table's DRAM ran at 77.5 % and flashinfer's at 83.1 %: the
  # table asks the L2 more per DRAM byte. Two sources, both measured on the H100 (k22): its
  # 16-bit u / output stores write half-sectors (1.11 M write sectors at HV=32 B=256 vs
  # flashinfer's 0.67 M; ostage's 16-byte rows: 0.67 M), and t1l2's L2 prefetch of tile 1 (a
  # second L2 request for 16 KB per CTA). First the candidates with ostage (both arms; ostage
  # without t1l2 is new), then the sweep, then ncu of the same forms (L2% and write sectors)
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K23_CONF:-1} == 1 ]]; then
    conformance candidate-k23 100 "candidate and ostage"
  fi
  k23_no_t1l2=bv128+late13+mbp0+t1early+wvearly
  # shellcheck disable=SC2086 # a word list
  grid_sweep k23 ${K23_VARIANTS:-ours:base ours:base+ostage ours:base+afe+ostage ours:$k23_no_t1l2 \
    ours:$k23_no_t1l2+ostage ours:$k23_no_t1l2+afe+ostage}
  k23_points=(--hv 32 64 --batch 256 128 --flush 0)
  ncu_profile ncu-k23-table 100 --backends ours flashinfer "${k23_points[@]}"
  GDN_UCACHE_OSTAGE=1 ncu_profile ncu-k23-ostage 70 --backends ours "${k23_points[@]}"
  GDN_UCACHE_BV=128 GDN_UCACHE_LATE=13 GDN_UCACHE_MBP=0 GDN_UCACHE_T1EARLY=1 GDN_UCACHE_WVEARLY=1 \
    GDN_UCACHE_OSTAGE=1 ncu_profile ncu-k23-no-t1l2-ostage 70 --backends ours "${k23_points[@]}"
  rm -f "$out"/*.ncu-rep
  finish_mode
  ;;
k24)
  # session 21: tproj (the projection transposed, [X hi; X lo] S0^T: both operands from 16-byte
  # shared reads, no register moves assembling A fragments; ~100 fewer SASS instructions). k15's
  # H200 profile: the table issues 14-18 % more warp instructions than flashinfer and waits
  # more for issue slots (not_selected + math_pipe_throttle), a cost that grows with the H200's
  # bytes per cycle. Conformance first: #3's suite forced onto tproj (late13 with the B >= 128
  # knobs; late10), the launch candidates with tproj (both arms); then one sweep; then ncu of the
  # table and tproj (instructions issued: the summary's Minst column). Session 21: tproj has
  # flashinfer's instruction count and the table's time on both cards (results/kernel/s21-h200)
  export GDN_UCACHE_OURS_MODULE=$NEXTF
  if [[ ${K24_CONF:-1} == 1 ]]; then
    table_knob_suites k24-tproj GDN_UCACHE_TPROJ &
    conformance candidate-k24 100 "candidate and tproj"
    wait
  fi
  # shellcheck disable=SC2086 # a word list
  grid_sweep k24 ${K24_VARIANTS:-ours:base ours:base+tproj ours:base+tproj+ostage ours:base+no_epi}
  k24_points=(--hv 32 64 --batch 256 128 --flush 0)
  ncu_profile ncu-k24-table 100 --backends ours flashinfer "${k24_points[@]}"
  GDN_UCACHE_TPROJ=1 ncu_profile ncu-k24-tproj 70 --backends ours "${k24_points[@]}"
  rm -f "$out"/*.ncu-rep
  finish_mode
  ;;
k25)
  # session 21: B=1, the issue's 4 us target (graph replay, warm L2: 16 back-to-back calls per
  # graph). v10's table runs bv32 at HV=32 and bv128 at HV 48/64, from heuristics before
  # actfirst; the warm sweep of session 16 timed only base and base+actfirst. Rows per CTA
  # 16 / 32 / 64 / 128 with actfirst, against the table and flashinfer, in one process, twice
  # (B=1 spreads ~0.1-0.3 us between processes)
  for rep in 1 2; do
    # shellcheck disable=SC2086 # a word list
    timeout 70 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 --batch 1 \
      --flush 0 20 100 --budget-s 60 --json "$out/warm-b1-k25-$rep.json" --backends flashinfer \
      --modules "ours=$NEXTF" --variants ${K25_VARIANTS:-ours:base ours:bv16+actfirst \
      ours:bv32+actfirst ours:bv64+actfirst ours:bv128+actfirst} 2>&1 |
      tee "$out/warm-b1-k25-$rep.log" | grep -v '^# v' | tail -n 16 || true
  done
  finish_mode
  ;;
k30)
  # session 30: two launch tables (kernels/gdn_ucache_flush.py _launch_table: H100 / H800 take
  # _TUNED_T4_H100). GDN_UCACHE_TABLE cannot differ between the columns of one process, so the
  # H200's table is timed through a copy whose H100 class is empty (on an H200 the two columns
  # run the same table: the spread of one config between columns)
  ship=kernels/gdn_ucache_flush.py
  export GDN_UCACHE_OURS_MODULE=$ship
  one=$out/one-table-k30.py  # archived: the exact file the h200t column timed
  sed 's/^_H100_CLASS = .*/_H100_CLASS = ()/' "$ship" >"$one"
  if ! grep -q '^_H100_CLASS = ()$' "$one"; then
    echo "# $ship has no _H100_CLASS line: nothing to compare" >&2
    exit 1
  fi
  for rep in 1 2; do
    timeout 150 python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 \
      --batch 256 128 32 8 --flush 0 20 100 --budget-s 120 --json "$out/tables-k30-$rep.json" \
      --backends flashinfer --modules "ours=$ship" "h200t=$one" --variants ours:base h200t:base \
      2>&1 | tee "$out/tables-k30-$rep.log" | grep -v '^# v' | tail -n 40 || true
  done
  setsid timeout 85 python3 tests/conformance/run_gpu_suite.py --out "$out/suite-k30" \
    --backends ours --arms serving,bf16 --deadline-s 65 --jobs 8 --max-steps 300 \
    >"$out/suite-k30.log" 2>&1 || echo "# suite rc=$?"
  tail -3 "$out/suite-k30.log"
  finish_mode
  ;;
k26)
  # session 26. (1) Lockstep tails: an SM's six first-wave CTAs start together, do the same work
  # and may reach phase 5 together, idling the DRAM; stagN starts every odd one N ns late
  # (kernels/NOTES.md "Session 25" has the prediction). (2) The producer / consumer structure
  # alone (bench/pc_probe.py): does one producer warp per CTA keep the state stream at
  # flashinfer's rate while the consumers spend a serial tail on every row?
  # (K26_PROBE_FIRST=1: the probe before the sweep, for a call that may be cut short)
  if [[ ${K26_PROBE_FIRST:-0} == 1 ]]; then k26_probe && k26_rowlat && checkpoint_mode probe; fi
  # (grid_sweep names next as `ours` itself: --modules ours=$NEXTF; K26_SWEEP=0: no sweep, for
  # a lease with ~2 minutes left)
  if [[ ${K26_SWEEP:-1} != 0 ]]; then
    # shellcheck disable=SC2086 # a word list
    grid_sweep k26 ${K26_VARIANTS:-ours:base ours:base+stag500 ours:base+stag1000 \
      ours:base+stag2000 ours:base+stag4000}
    checkpoint_mode sweep
  fi
  if [[ ${K26_PROBE_FIRST:-0} != 1 ]]; then k26_probe && k26_rowlat; fi
  finish_mode
  ;;
k15)
  # why verify-only at HV=32 is 1.08x flashinfer and HV=64 is not: the same CTA count (8192) at
  # HV=32 B=256 and HV=64 B=128, shipped table (late13) vs flashinfer; then the SASS stall profile
  # (and B=32, where ours is 1.06-1.13x flashinfer at 2-3 waves: latency, not bytes)
  ncu_profile ncu-k15 120 --backends ours flashinfer --hv 32 64 --batch 256 128 32 --flush 0
  bash "$0" sass
  rm -f "$out"/*.ncu-rep
  # the run-to-run spread of absolute times: K15_REPEATS more serving processes (ratios to
  # flashinfer are taken within each)
  for ((i = 1; i <= ${K15_REPEATS:-2}; i++)); do
    timeout 100 python3 bench/bench_ucache.py --arms serving --reps 10 --out "$out" \
      --tag "repeat$i-serving" --backends ours flashinfer >"$out/repeat$i-serving.log" 2>&1 ||
      echo "# repeat $i rc=$?"
  done
  echo "# h200_run k15: wall $((SECONDS - t_all)) s"
  # one archive: the device tool returns a handful of files per call (session 16 lost the SASS
  # files of a bare $OUT/kernel to that limit)
  archive_mode
  ;;
sass)
  GDN_UCACHE_OURS_MODULE=${SASS_MODULE:-kernels/gdn_ucache_flush.py} timeout 170 ncu \
    --clock-control none --profile-from-start off --nvtx --print-nvtx-rename kernel \
    --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy \
    -o "$out/sass" -f python3 bench/ncu_profile.py --backends ours flashinfer --hv 32 \
    --batch 256 --flush 0 >"$out/sass-ncu.log" 2>&1 || echo "# ncu sass rc=$?"
  if [[ -f $out/sass.ncu-rep ]]; then
    timeout 60 ncu -i "$out/sass.ncu-rep" --page source --csv --print-source=sass \
      >"$out/sass.csv" 2>"$out/sass-export.err" || echo "# ncu source page rc=$?"
    timeout 30 ncu -i "$out/sass.ncu-rep" --page details --print-nvtx-rename kernel \
      >"$out/sass-details.txt" 2>&1 || true
    python3 bench/ncu_sass.py "$out/sass.csv" --map --out "$out/sass-summary.md" | head -n 12 || true
    xz -9 "$out/sass.csv"
  else
    tail -n 5 "$out/sass-ncu.log"
  fi
  echo "# h200_run sass: wall $((SECONDS - t_all)) s"
  ;;
k6)
  t0=$SECONDS
  # the kernel file to ship (default the shipped one): K6_MODULE=kernels/gdn_ucache_flush_next.py
  # measures next as it would ship, before it is copied over the shipped file
  ship=${K6_MODULE:-kernels/gdn_ucache_flush.py}
  export GDN_UCACHE_OURS_MODULE=$ship
  # K6_STEPS="conf" / "bench" splits the call in two (~170 s + ~300 s on one warm host): a host
  # lost mid-call then costs one half
  steps=" ${K6_STEPS:-conf bench} "
  conf_keep=${K6_CONF_KEEP:-/tmp/gdn-k6-conformance}
  if [[ $steps == *" conf "* ]]; then
    setsid timeout 85 python3 tests/conformance/run_gpu_suite.py --out "$out/suite-k6" \
      --backends ours --arms serving,bf16 --deadline-s 65 --jobs 8 --max-steps 300 \
      >"$out/suite-k6.log" 2>&1 &
    suite_pid=$!
    pids=("$suite_pid")
    # 37 launch candidates per arm (session 23's list) at ~1.7-3.2 s each: up to ~120 s
    conformance_parts 150 "${CONF_PARTS[@]}"
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    kill -- -"$suite_pid" 2>/dev/null || true
    tail -3 "$out/suite-k6.log"
    conformance_summary 160
    # kept on this host for the bench half (the next call): its table is chosen among what passed
    rm -rf "$conf_keep" && mkdir -p "$conf_keep"
    cp "$out"/conformance-candidate-*.log "$conf_keep/" 2>/dev/null || true
    echo "# conformance (shipped kernel) wall $((SECONDS - t0)) s"
    checkpoint_mode conf  # the forced suites below take ~150 s more
    # #3's suite forced onto the table's bulk modes (its own shapes are small batches, where the
    # table picks the register modes)
    # shellcheck disable=SC2086 # a word list
    FORCED_MODULE=$ship forced_suites k6 128 60 4 ${K6_FORCED:-13 10} &
    # four suites of four jobs at once need more than an 80 GB card (sessions 22-24 on H100s:
    # drift / pool_beyond_2pow31 / gqa_ratio1 died of allocation failures): there the knob
    # suites wait for these
    if (($(gpu_mem_mib) < 100000)); then wait; fi
    # and with session 12's knobs on (t1early: the next tile copied as soon as the stage is free;
    # t1l2: prefetched into L2 at entry; wvearly: the window weights before phase 1's barrier)
    # and session 13's xpf (row z + 2's bytes prefetched into L2: the suite's batches are small)
    # and actfirst (the activation loads leave with the cursor loads)
    # shellcheck disable=SC2086
    # then, in a file that has it, chain (late13 with persistent CTAs; 2 programs: every CTA
    # walks several rows, pad rows among them) with the same knobs (xpf and actfirst do not
    # apply to persistent CTAs); after the other two: three suites at once need ~90 GB
    (export GDN_UCACHE_T1EARLY=1 GDN_UCACHE_T1L2=1 GDN_UCACHE_WVEARLY=1 GDN_UCACHE_XPF=2 \
      GDN_UCACHE_ACTFIRST=1 &&
      FORCED_MODULE=$ship forced_suites k6-knobs 128 60 4 ${K6_FORCED:-13 10} &&
      if grep -q 'self.chain = ' "$ship"; then
        GDN_UCACHE_PERSIST=6 GDN_UCACHE_NPROG=2 FORCED_MODULE=$ship \
          forced_suites k6-chain 128 60 4 13
      fi) &
    wait
  fi
  # K6_STEPS="final" (session 22): the final benchmark of $ship alone, without the candidate
  # sweeps, propose or the knock-outs (~200 s): for a table already chosen on the CPU from an
  # earlier host's sweeps, on a host with too little device time left for the bench half
  if [[ $steps == *" bench "* || $steps == *" final "* ]]; then
    # the Triton baseline is the series' op, loaded by path from the patched tree (tests/series/
    # triton_baseline_adapter.py): the host bundle's site, else patch 1's files materialised from
    # patches/ (the light carry has no vLLM tree)
    if [[ -n ${GDN_SERIES_VLLM_ROOT:-} ]]; then
      :  # the caller's tree
    elif [[ -n ${GDN_HOST_SITE:-} ]]; then
      export GDN_SERIES_VLLM_ROOT=$GDN_HOST_SITE
    else
      # shellcheck disable=SC1091
      source bench/triton_gpu_checks.sh
      # a failure costs the Triton column only, not the archive of what ran before
      triton_prepare || echo "# triton_prepare failed: the Triton baseline will be missing"
  fi
  final=$ship
  fi
  if [[ $steps == *" bench "* ]]; then
  # launch-config candidates of the shipped file next to its table's choice (each one passed
  # conformance above: the "candidate" parts); session 21: ostage on every entry that has a
  # candidate with it (the H200 gave it -1.3-1.7 % at B >= 128 verify-only), the load-order
  # knobs, and the bulk forms named whole, so that B=32 may take late13 (6 CTAs/SM, with or
  # without ostage) or dsreg (7) where late10's 5 cost it a wave (xpf left: it lost everywhere
  # in session 16); session 22: late10 + t1early + afe for B=32 (phase 5 is its loss on an H100)
  # in late3's place (the B=8 entries are late3 already)
  # shellcheck disable=SC2086
  timeout 85 python3 bench/knockout.py --reps 8 --arm serving --hv 32 48 64 --batch 256 128 32 8 \
    --flush 0 20 100 --budget-s 75 --json "$out/candidates-k6.json" --backends flashinfer \
    --modules "ours=$ship" \
    --variants ${K6_CANDIDATES:-ours:base ours:base+ostage ours:base+t1early ours:base+t1early+t1l2 \
    ours:base+t1early+t1l2+wvearly ours:base+actfirst ours:bv128+late10+mbp0 \
    ours:bv128+late13+mbp0+t1early+t1l2+wvearly ours:bv128+late13+mbp0+t1early+t1l2+wvearly+ostage \
    ours:bv128+late13+mbp0+t1early+t1l2+wvearly+dsreg ours:bv128+late10+mbp0+t1early+afe} 2>&1 |
    tee "$out/candidates-k6.log" | grep -v '^# v' | tail -n 40 || true
  # B=1 on a warm L2 (16 back-to-back calls per graph; the issue's 4 us target), with actfirst:
  # the activation loads leaving with the cursor loads should shorten the one-CTA latency chain;
  # and 64 rows per CTA (session 21, k25 on an H100: at HV 48/64 0.1-0.5 us under the table's
  # bv128, most with flush rows; propose takes it where the H200 agrees)
  # shellcheck disable=SC2086
  timeout 40 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 --batch 1 \
    --flush 0 20 100 --budget-s 30 --json "$out/warm-b1-k6.json" --backends flashinfer \
    --modules "ours=$ship" --variants ${K6_B1_VARIANTS:-ours:base ours:base+actfirst \
    ours:bv64+actfirst} 2>&1 |
    tee "$out/warm-b1-k6.log" | grep -v '^# v' | tail -n 12 || true
  # the launch table these two sweeps choose (knockout.py propose: conformance candidates only,
  # and of those only the ones that passed in both arms of the conf half when it ran on this
  # host; `base+X` = the table's entry plus X) written into a copy of the file: the final
  # benchmark and the knock-outs below then time the file that ships (the same command run on
  # the returned sweeps writes it in place); without a proposal (a sweep lost) they time $ship
  sweeps=()
  for f in "$out/candidates-k6.json" "$out/warm-b1-k6.json"; do [[ -s $f ]] && sweeps+=("$f"); done
  conf_logs=("$conf_keep"/conformance-candidate-*.log)
  conf_args=()
  if [[ -e ${conf_logs[0]} ]]; then
    conf_args=(--conformance "${conf_logs[@]}")
  else
    echo "# no conformance logs in $conf_keep: the table is chosen among all candidates"
  fi
  if ((${#sweeps[@]})) && python3 bench/knockout.py propose "${sweeps[@]}" --kernel "$ship" \
    "${conf_args[@]}" --write "$out/proposed-k6.py" >"$out/propose-k6.log" 2>&1 &&
    [[ -s $out/proposed-k6.py ]]; then
    final=$out/proposed-k6.py
  fi
  cat "$out/propose-k6.log" 2>/dev/null || true
  fi
  if [[ $steps == *" bench "* || $steps == *" final "* ]]; then
  echo "# final benchmark of $final"
  # the issue's benchmark: ours vs flashinfer vs the Triton baseline vs the floor, one process
  # per arm (the JSON is rewritten after every HV block, so a timeout keeps what was timed);
  # K6_REPEATS > 1 adds processes per arm (ours and flashinfer: ~40 s each), which
  # bench/targets.py merges (median per-run ratio; the points whose runs disagree)
  for arm in serving bf16; do
    GDN_UCACHE_OURS_MODULE=$final timeout "${K6_BENCH_S:-95}" python3 bench/bench_ucache.py \
      --arms "$arm" --reps 10 --out "$out" --tag "final-${K6_TAG:-v10}-$arm" \
      --backends ours flashinfer triton_vllm 2>&1 |
      tee "$out/bench-$arm.log" | grep -vE '^# (v|compil)' || true
    for ((r = 2; r <= ${K6_REPEATS:-1}; r++)); do
      GDN_UCACHE_OURS_MODULE=$final timeout 60 python3 bench/bench_ucache.py --arms "$arm" \
        --reps 10 --out "$out" --tag "final-${K6_TAG:-v10}-$arm-r$r" \
        --backends ours flashinfer >"$out/bench-$arm-r$r.log" 2>&1 || echo "# repeat $r rc=$?"
    done
  done
  fi
  if [[ $steps == *" bench "* ]]; then
  # what the hi/lo split costs now (nosplit: flashinfer-level precision), verify and 20 %, and
  # where the verify time goes (knock-outs, wrong results on purpose: no epilogue / no fold code)
  # shellcheck disable=SC2086 # the variant lists are word lists
  timeout 45 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 128 32 \
    --flush 0 20 --budget-s 36 --json "$out/nosplit-k6.json" --backends flashinfer \
    --modules "ours=$final" \
    --variants ${K6_KNOCKOUTS:-ours:base ours:base+nosplit ours:base+no_fold ours:base+no_epi} 2>&1 |
    tee "$out/nosplit-k6.log" | grep -v '^# v' || true
  fi
  echo "# h200_run k6: $((SECONDS - t_all)) s"
  archive_mode
  ;;
k7)
  other=${K7_OTHER:-v5=.gpu/v5.py}
  shipped=${K7_SHIPPED:-ours}
  timeout 75 python3 bench/knockout.py --reps 10 --arm serving --hv 32 64 --batch 256 128 32 8 \
    --flush 0 20 100 --budget-s 60 --json "$out/compare-k7.json" --backends flashinfer \
    --modules "$shipped=kernels/gdn_ucache_flush.py" "$other" \
    --variants "$shipped:base" "${other%%=*}:base" 2>&1 |
    tee "$out/compare-k7.log" | grep -v '^# v' | tail -n 26 || true
  timeout 30 python3 bench/knockout.py --warm --reps 20 --arm serving --hv 32 48 64 --batch 1 \
    --flush 0 20 100 --budget-s 20 --json "$out/warm-b1-k7.json" --backends flashinfer \
    --modules "$shipped=kernels/gdn_ucache_flush.py" --variants "$shipped:base" 2>&1 |
    tee "$out/warm-b1-k7.log" | grep -v '^# v' | tail -n 12 || true
  echo "# h200_run k7: $((SECONDS - t_all)) s"
  archive_mode
  ;;
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
  # B=1 on a warm L2 (the issue's 4 us target is a graph-replay number)
  timeout 15 python3 bench/knockout.py --arm serving --hv 32 64 --batch 1 --flush 0 100 --warm \
    --reps 20 --json "$out/warm-b1-k1.json" --modules "$V4" "$V3" \
    --variants v3:base v4:base v4:bv32 v4:bv64 2>&1 | tee "$out/warm-b1-k1.log" || true
  ;;
k3)
  # 1. Nsight Compute: where a CTA's time goes, ours vs flashinfer (one launch per point)
  t0=$SECONDS
  ncu_profile ncu-k3 100 --backends ours flashinfer --hv 32 --batch 256 32 1 --flush 0 100
  echo "# ncu wall $((SECONDS - t0)) s"
  # 2. conformance without the hi/lo split (#3's suite, serving + bf16), so that nosplit could ship
  t0=$SECONDS
  GDN_UCACHE_XSPLIT=0 setsid timeout 70 python3 tests/conformance/run_gpu_suite.py \
    --out "$out/suite-nosplit" --backends ours --arms serving,bf16 --deadline-s 52 --jobs 8 \
    --max-steps 300 >"$out/suite-nosplit.log" 2>&1 || true
  tail -4 "$out/suite-nosplit.log"
  echo "# conformance nosplit wall $((SECONDS - t0)) s"
  # 3. timing: base, nosplit, and the fold-free build (no_fold: exact on verify-only steps, which
  #    never fold; it is what a separate verify-only kernel would cost), next to flashinfer
  timeout 75 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 128 32 8 1 \
    --flush 0 --budget-s 60 --json "$out/sweep-k3-verify.json" --backends flashinfer \
    --modules "$V4" --variants v4:base v4:nosplit v4:no_fold v4:nosplit+no_fold \
    v4:bv128+late1+mbp7+no_fold v4:bv128+mbp6+no_fold 2>&1 |
    tee "$out/sweep-k3-verify.log" | grep -v '^# v' || true
  timeout 40 python3 bench/knockout.py --reps 8 --arm serving --hv 32 64 --batch 256 32 1 \
    --flush 20 100 --budget-s 30 --json "$out/sweep-k3-flush.json" --backends flashinfer \
    --modules "$V4" --variants v4:base v4:nosplit 2>&1 |
    tee "$out/sweep-k3-flush.log" | grep -v '^# v' || true
  # the device tool returns at most 8 files: everything as one archive
  archive_mode
  ;;
k2)
  # 1. conformance FIRST, five processes at once (GPU-light, CPU-heavy compiles) of the v4 file:
  #    #3's suite on its defaults (serving + bf16), every launch-config candidate in both arms, and
  #    the rest of the kernel's own cases
  export GDN_UCACHE_OURS_MODULE=$V4FILE
  t0=$SECONDS
  # (own process group: its unit processes are ended with it, never left running into the timing)
  setsid timeout 70 python3 tests/conformance/run_gpu_suite.py --out "$out/suite-k2" \
    --backends ours --arms serving,bf16 --deadline-s 52 --jobs 8 --max-steps 300 \
    >"$out/suite-k2.log" 2>&1 &
  suite_pid=$!
  pids=("$suite_pid")
  # (k2 predates the scalar_qk cases)
  conformance_parts 70 "${CONF_PARTS[@]:0:3}" \
    "compact_gqa or vllm_layout or persistent or forced_bv128_t8"
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  kill -- -"$suite_pid" 2>/dev/null || true
  tail -3 "$out/suite-k2.log"
  conformance_summary 120
  echo "# conformance ($V4FILE) wall $((SECONDS - t0)) s"
  unset GDN_UCACHE_OURS_MODULE
  # 2. candidates that passed in BOTH arms (a candidate that failed or never ran is not timed);
  #    read from the -v logs, which survive a timeout
  mapfile -t passed < <(python3 - "$out/conformance-candidate-serving.log" \
    "$out/conformance-candidate-bf16.log" <<'PY'
import re, sys
ok = None
for path in sys.argv[1:]:
    try:
        text = open(path).read()
    except OSError:
        text = ""
    good = set(re.findall(r"::test_candidate\[\w+-(\S+)\] PASSED", text))
    ok = good if ok is None else ok & good
for name in sorted(ok or ()):
    print(name)
PY
  )
  echo "# candidates proven in both arms: ${passed[*]:-none}"
  # 3. timing (cold L2, CUDA-graph replay): flashinfer, the frozen v3 and every proven candidate,
  #    one process per arm; persistent candidates in processes of their own (a fault there
  #    cannot take the other columns with it). Budgets follow the time left.
  plain=(v3:base)
  pers=()
  for c in ${passed[@]+"${passed[@]}"}; do
    if [[ $c == *persist* ]]; then pers+=("v4:$c"); else plain+=("v4:$c"); fi
  done
  sweep() { # $1 = tag, $2 = share of the time left (percent), $3 = end reserve (s), rest = args
    local tag=$1 share=$2 reserve=$3
    shift 3
    local left=$((224 - (SECONDS - t_all)))
    local lim=$((left * share / 100))
    if ((lim < 20)); then
      echo "# $tag: skipped (${left} s left)"
      return 0
    fi
    timeout "$lim" python3 bench/knockout.py --reps 8 --flush 0 20 100 --budget-s $((lim - reserve)) \
      --json "$out/sweep-$tag.json" "$@" 2>&1 | tee "$out/sweep-$tag.log" | grep -v '^# v' || true
  }
  sweep serving 52 20 --arm serving --hv 32 64 48 --batch 256 128 32 8 1 \
    --backends flashinfer --modules "$V4" "$V3" --variants "${plain[@]}"
  if ((${#pers[@]})); then
    sweep serving-persistent 40 12 --arm serving --hv 32 64 48 --batch 256 128 32 \
      --modules "$V4" --variants "${pers[@]}"
  fi
  # bf16 arm: the serving winners only (the configuration is chosen per (HV, B) on serving)
  bfp=()
  bfx=()
  while read -r c; do
    [[ -n $c ]] || continue
    if [[ $c == *persist* ]]; then bfx+=("v4:$c"); else bfp+=("v4:$c"); fi
  done < <(python3 bench/knockout.py chosen "$out/sweep-serving.json" \
    "$out/sweep-serving-persistent.json" 2>/dev/null || true)
  echo "# bf16 arm times the serving winners: ${bfp[*]:-} ${bfx[*]:-}"
  if ((${#bfp[@]})); then
    sweep bf16 72 15 --arm bf16 --hv 32 64 48 --batch 256 128 32 8 1 \
      --backends flashinfer --modules "$V4" --variants "${bfp[@]}"
  fi
  if ((${#bfx[@]})); then
    sweep bf16-persistent 100 8 --arm bf16 --hv 32 64 48 --batch 256 128 32 \
      --modules "$V4" --variants "${bfx[@]}"
  fi
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
