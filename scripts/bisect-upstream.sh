#!/usr/bin/env bash
# scripts/bisect-upstream.sh GOOD BAD: find the first upstream vLLM commit in GOOD..BAD at which
# the series stops applying (or, with --test-cmd, its tests stop passing); prints the commit,
# its subject and the files it touched that the series also touches. vllm/ is not touched.
# Needs upstream git history in vllm/ (a git-populated vllm/); see docs/rebase-ci.md.
set -euo pipefail
caller="$PWD"  # relative paths in arguments are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GDN_CALLER_CWD="$caller" SERIES_PROG="scripts/bisect-upstream.sh" exec "${PYTHON:-python3}" -m tools.rebase_ci bisect "$@"
