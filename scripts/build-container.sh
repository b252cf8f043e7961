#!/usr/bin/env bash
# Build the gdn-ucache serving image (Dockerfile: vllm/vllm-openai:v<pin> + the patch series +
# the ucache kernel) and print the docker run command for Qwen3.5 with MTP on the ucache
# backend. Labels (series version/digest, base version, patch count) come from vllm.pin and
# patches/series. --dry-run prints the commands only (no Docker needed). See --help.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CONTAINER_PROG="scripts/build-container.sh" exec "${PYTHON:-python3}" -m tools.container build "$@"
