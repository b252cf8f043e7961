#!/usr/bin/env bash
# Run the project's tests (CPU only): create/refresh the venv .venv with the `test` extra of
# pyproject.toml, then run pytest. Extra arguments go to pytest, e.g. -m 'not slow' or -k apply.
set -euo pipefail

usage() {
    cat <<'USAGE'
usage: scripts/test.sh [pytest arguments...]

Creates .venv (python3 -m venv) if needed, installs -e '.[test]' when pyproject.toml changed
since the last install, and runs pytest from the repository root. CPU only: GPU tests skip
with a reason. Exit status is pytest's, except that "no tests collected" (5) counts as success.
Environment: PYTHON (interpreter for the venv, default python3), VENV (default .venv).
USAGE
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="${VENV:-.venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv"
    "${PYTHON:-python3}" -m venv "$venv"
fi
# Reinstall only when the dependency list changed (the stamp is pyproject.toml's sha256).
stamp="$venv/.gdn-ucache-test-deps"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "installing the test extra into $venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e '.[test]'
    echo "$wanted" > "$stamp"
fi

# The venv's bin/ goes first on PATH: the test extra's tools (shellcheck, hadolint) live there,
# and tests look them up by name (without it their checks were skipped in CI).
status=0
PATH="$(cd "$venv/bin" && pwd):$PATH" PYTHON="$venv/bin/python" "$venv/bin/python" -m pytest "$@" || status=$?
if [[ $status -eq 5 ]]; then
    echo "pytest collected no tests (exit 5): nothing to run, counted as success"
    status=0
fi
exit "$status"
