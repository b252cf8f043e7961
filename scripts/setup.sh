#!/usr/bin/env bash
# The main job: populate vllm/ with the pinned vLLM base, then apply the series onto
# branch gdn-ucache. Safe to run again (both steps are idempotent).
set -euo pipefail

usage() {
    cat <<'USAGE'
usage: scripts/setup.sh [--source auto|git|sdist] [--reset]

Populates vllm/ (scripts/populate-vllm.sh) and applies patches/ (scripts/apply.sh).
  --source S   where the vLLM base comes from: auto (default: git if reachable, else the
               PyPI sdist through pip's configured index), git, or sdist
  --reset      rebuild branch gdn-ucache from the base (the old one is kept as a backup)
Environment: GDN_UCACHE_CACHE (download cache, default ~/.cache/gdn-ucache),
             GDN_UCACHE_OFFLINE=1 (never download), PYTHON (interpreter, default python3).
USAGE
}

populate_args=()
apply_args=()
while (($#)); do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --source) populate_args+=(--source "${2:?--source needs a value}"); shift 2 ;;
        --source=*) populate_args+=("$1"); shift ;;
        --reset) apply_args+=(--reset); shift ;;
        *) echo "setup.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/populate-vllm.sh" "${populate_args[@]}"
"$here/apply.sh" "${apply_args[@]}"
