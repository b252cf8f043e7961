#!/usr/bin/env bash
# Session 4's e2e GPU command (#10), run on the H200 host after the bundle is unpacked:
#
#   bash bench/h200_e2e_s4.sh [STEP ...]        (default: models reject agree probe)
#
# Steps, in priority order; each starts only with enough of the budget left and is skipped when a
# previous call on the same (warm) host already finished it, so a second call with the same
# command continues where the first stopped:
#   models  $E2E_S4_MODEL-{agree,reject} into /tmp/e2e-models (bench/e2e.py models): only the
#           levels the other requested steps use (reject: -reject; agree, triton, probe: -agree)
#   reject  speed sweep at the reject level: native, ucache_ours, ucache_flashinfer, replay_triton,
#           B 1,8,32,128,256 (E2E_S4_BATCHES overrides the batches of every speed step; a re-run
#           repeats only the backends without an ok result; E2E_S4_REJECT_BACKENDS overrides the
#           list, e.g. native,ucache_flashinfer,replay_triton on a fresh host when ucache_ours was
#           measured in an earlier call)
#   agree   speed sweep at the agree level: $E2E_S4_AGREE_BACKENDS (default nospec,native,
#           ucache_ours,ucache_flashinfer,replay_triton; resumes like reject: a re-run repeats only
#           the backends without an ok result; files e2e-speed-<model>-agree*)
#   triton  replay_triton speed row at the agree level only (cut by the deadline in session 3)
#   probe   bench/e2e_probe.py: why ucache_flashinfer runs at ~0.55x native (results/e2e/README.md);
#           backends $E2E_S4_PROBE_BACKENDS (default ucache_flashinfer,ucache_ours,native;
#           native last: the deadline cuts it first; it shows whether native steps are graphed)
# A speed or probe step whose checkpoint is not in $E2E_MODELS_DIR (no models step in this call or
# an earlier one on the same host) is skipped with a line naming the models step, and the script
# exits 3 at the end (session 8 ran `probe` alone and got FileNotFoundError .../-agree/config.json).
# E2E_S4_MODEL: the model of every step (default geom-35b; geom-35b-deep is the 40-layer one,
# geom-27b-deep the 12-layer 27B geometry; result files carry the name, e.g.
# e2e-speed-geom-35b-deep-reject..., probe-geom-35b-deep-s4...).
# E2E_S4_MAX_TOKENS: output tokens of every timed speed run (bench/e2e.py --speed-max-tokens;
# default: bench/e2e.py's, 128), e.g. 512 for runs long enough to average the host's noise.
# Budget: BUDGET_S seconds of wall time from the script's start (default 540); pass what the call
# has left, e.g. `BUDGET_S=$((560 - SECONDS)) bash bench/h200_e2e_s4.sh` after stage/unpack.
# Results accumulate in $E2E_S4_WORK (default /tmp/e2e-s4); after every step all of them are packed
# into ONE file, $OUT/e2e-s4.tar.xz (the device tool returns few files). On exit the host's JIT
# caches go to $OUT/host-caches.tar.gz, or its .00/.01/.. parts of <= 15 MiB (tools/gpuhost/host.py
# save-caches; E2E_S4_SAVE_CACHES=0 skips it): copy them to .gpu/host-caches/ (and
# ~/.cache/gdn-ucache/host-caches/) and, on the next fresh host, make a call of their own before
# the bundle's first chunk: carry [".gpu/host-caches"], command
# `python3 tools/gpuhost/host.py load-caches .gpu/host-caches`, so that the first engine does not
# recompile every Triton kernel.
# Render on the CPU:
#   tar -xJf e2e-s4.tar.xz && python3 bench/e2e.py report e2e/e2e-speed-reject*.json --out results/e2e --name e2e-h200-session4-reject
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0; fi
cd "$(dirname "$0")/.."
start=$(date +%s)
budget=${BUDGET_S:-540}
reserve=30 # packing, saving the JIT caches, margin before the call's limit
work=${E2E_S4_WORK:-/tmp/e2e-s4}
models=${E2E_MODELS_DIR:-/tmp/e2e-models}
out=${OUT:-$work/out}
model=${E2E_S4_MODEL:-geom-35b}
# File stems: geom-35b keeps the names of sessions 4-7; another model carries its name.
if [[ $model == geom-35b ]]; then tag=""; else tag="-$model"; fi
speed_args=()
[[ -z ${E2E_S4_MAX_TOKENS:-} ]] || speed_args=(--speed-max-tokens "$E2E_S4_MAX_TOKENS")
mkdir -p "$work/e2e" "$work/probe" "$out"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(models reject agree probe)
levels=() # acceptance levels the requested steps run (the models step builds only those)
for step in "${steps[@]}"; do
  case $step in
    reject) levels+=(reject) ;;
    agree | triton | probe) levels+=(agree) ;;
  esac
done
[[ ${#levels[@]} -gt 0 ]] || levels=(agree reject)
if [[ -z ${GDN_HOST_SITE:-} && -f /tmp/gdn-host/env.sh ]]; then
  # shellcheck source=/dev/null
  source /tmp/gdn-host/env.sh
fi

left() { echo $((budget - ($(date +%s) - start))); }
log() { echo "[s4 $(($(date +%s) - start))s, $(left)s left] $*"; }

unbuilt=0 # steps skipped for a checkpoint that is not built: exit 3 at the end
# built CHECKPOINT STEP: true when the models step built CHECKPOINT (construction.json is written
# last); otherwise says which step builds it.
built() {
  [[ ! -f $models/$1/construction.json ]] || return 0
  log "$2: skipped ($models/$1 not built: run the models step first, e.g. steps 'models $2')"
  unbuilt=1
  return 1
}

pack() { # Python's tarfile: no reliance on an xz binary on the host
  python3 - "$work" "$out/e2e-s4.tar.xz" <<'PY' || echo "pack failed" >&2
import os, sys, tarfile
work, dest = sys.argv[1], sys.argv[2]
with tarfile.open(dest + ".tmp", "w:xz") as tar:
    for name in ("e2e", "probe"):
        tar.add(os.path.join(work, name), arcname=name)
os.replace(dest + ".tmp", dest)
PY
}

# Backends of $3 (comma list) without an "ok" result for model $2 in the JSON files $1*.json
# (e2e or probe).
missing() {
  python3 - "$1" "$2" "$3" <<'PY'
import glob, json, sys
stem, model, wanted = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
ok = set()
for path in glob.glob(stem + "*.json"):
    try:
        for res in json.load(open(path))["results"]:
            if res.get("status") == "ok" and res["job"]["model"] == model:
                ok.add(res["job"]["backend"])
    except (OSError, ValueError, KeyError):
        pass
print(",".join(b for b in wanted if b not in ok))
PY
}

# speed NAME CHECKPOINT BACKENDS STEP: one bench/e2e.py speed run for the backends still missing.
speed() {
  local name=$1 checkpoint=$2 todo n
  todo=$(missing "$work/e2e/$name" "$checkpoint" "$3")
  if [[ -z $todo ]]; then log "$name: done in an earlier call"; return; fi
  if (($(left) < reserve + 90)); then log "$name: skipped ($todo; no time left)"; return; fi
  built "$checkpoint" "$4" || return 0
  n=$(find "$work/e2e" -maxdepth 1 -name "$name*.json" | wc -l)
  [[ $n -eq 0 ]] || name=$name-$((n + 1))
  log "$name: $todo"
  python3 bench/e2e.py run --suite speed --speed-models "$checkpoint" --backends "$todo" \
    --batches "${E2E_S4_BATCHES:-1,8,32,128,256}" --models-dir "$models" --out "$work/e2e" \
    "${speed_args[@]}" \
    --deadline-s $(($(left) - reserve)) --name "$name" || log "$name: exit $?"
}

save_caches() {
  if [[ ${E2E_S4_SAVE_CACHES:-1} == 1 ]]; then
    python3 tools/gpuhost/host.py save-caches "$out/host-caches.tar.gz" || true
  fi
}
trap 'pack; save_caches' EXIT
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
for step in "${steps[@]}"; do
  case $step in
    models)
      todo="" # construction.json is written last: a checkpoint cut short has none
      for level in "${levels[@]}"; do
        [[ -f $models/$model-$level/construction.json || ,$todo, == *,$level,* ]] ||
          todo=${todo:+$todo,}$level
      done
      if [[ -z $todo ]]; then
        log "models: present"
      else
        log "models: $model ($todo)"
        python3 bench/e2e.py models "$models" --models "$model" --acceptance "$todo" ||
          { log "models: exit $?"; exit 1; }
      fi
      ;;
    reject)
      speed "e2e-speed$tag-reject" "$model-reject" \
        "${E2E_S4_REJECT_BACKENDS:-native,ucache_ours,ucache_flashinfer,replay_triton}" reject
      ;;
    agree)
      speed "e2e-speed$tag-agree" "$model-agree" \
        "${E2E_S4_AGREE_BACKENDS:-nospec,native,ucache_ours,ucache_flashinfer,replay_triton}" agree
      ;;
    triton) speed "e2e-speed$tag-agree-triton" "$model-agree" replay_triton triton ;;
    probe)
      todo=$(missing "$work/probe/probe$tag-s4" "$model-agree" \
        "${E2E_S4_PROBE_BACKENDS:-ucache_flashinfer,ucache_ours,native}")
      if [[ -z $todo ]]; then
        log "probe: done in an earlier call"
      elif (($(left) < reserve + 90)); then
        log "probe: skipped ($todo; no time left)"
      elif built "$model-agree" probe; then
        n=$(find "$work/probe" -maxdepth 1 -name "probe$tag-s4*.json" | wc -l)
        name=probe$tag-s4
        [[ $n -eq 0 ]] || name=probe$tag-s4-$((n + 1))
        log "$name: $todo"
        python3 bench/e2e_probe.py run --models-dir "$models" --out "$work/probe" \
          --model "$model-agree" --backends "$todo" --batches 1,32,256 \
          --deadline-s $(($(left) - reserve)) --name "$name" || log "probe: exit $?"
      fi
      ;;
    *) echo "unknown step $step (models reject agree triton probe)" >&2; exit 2 ;;
  esac
  pack
done
log "packed: $(ls -l "$out/e2e-s4.tar.xz")"
((unbuilt == 0)) || exit 3
