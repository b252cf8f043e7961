"""Read and write ``vllm.pin``: KEY=VALUE lines shared by bash (``source``) and Python.

Keys:
  VLLM_VERSION          pinned vLLM release (the base branch in vllm/ is ``vllm-<version>``)
  VLLM_UPSTREAM_COMMIT  upstream vLLM commit of that release (short or full SHA)
  VLLM_SDIST_SHA256     sha256 of the PyPI source release (verified after download)
  VLLM_BASE_SHA         SHA of the deterministic sdist import commit (same on every machine)
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.series.errors import SeriesError

_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
REQUIRED_KEYS = ("VLLM_VERSION", "VLLM_UPSTREAM_COMMIT")


def read_pin(path: Path) -> dict[str, str]:
    """Parse the pin file; comments and blank lines are ignored, values are unquoted."""
    if not path.is_file():
        raise SeriesError(f"pin file {path} not found (it names the vLLM release to build on)")
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise SeriesError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        values[match.group(1)] = match.group(2).strip().strip("'\"")
    missing = [key for key in REQUIRED_KEYS if not values.get(key)]
    if missing:
        raise SeriesError(f"{path}: missing {', '.join(missing)}")
    return values


def write_pin(path: Path, updates: dict[str, str]) -> None:
    """Set keys in the pin file, keeping comments and the order of existing keys."""
    lines = path.read_text().splitlines() if path.is_file() else []
    remaining = dict(updates)
    out: list[str] = []
    for raw in lines:
        match = _LINE.match(raw.strip())
        if match and match.group(1) in remaining:
            out.append(f"{match.group(1)}={remaining.pop(match.group(1))}")
        else:
            out.append(raw)
    out.extend(f"{key}={value}" for key, value in remaining.items())
    path.write_text("\n".join(out) + "\n")
