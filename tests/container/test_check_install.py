"""The offline container install check, end to end (scripts/check-container-install.sh).

Installs the real vllm wheel of vllm.pin into a cached venv (first run: ~4.3 GB download and
~10 GB on disk under $GDN_UCACHE_CACHE; later runs reuse it), applies the series with the
image's install step, imports what it touches, parses the served command with the patched
`vllm serve` and runs the series' tests on CPU. Deselect with -m 'not container'.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.container.check import module_name
from tools.container.install import touched_package_files
from tools.series.layout import Layout
from tools.series.patchfile import read_series

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/check-container-install.sh"
# Cold cache: ~10 min on 2 cores (download + install); warm: ~1-2 min.
TIMEOUT_S = 3600


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    print(result.stdout[-6000:])  # shown with -rA or on failure: the step timings
    return result


def test_series_installs_into_the_real_vllm_wheel() -> None:
    layout = Layout(ROOT)
    count = len(read_series(layout.patches_dir))
    result = _check(dict(os.environ))
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    noun = "patch" if count == 1 else "patches"
    assert f"OK: {count} {noun} applied to vllm {layout.pinned_version()}" in result.stdout
    for rel in touched_package_files(layout):
        name = module_name(rel)
        if name:
            assert f"ok    {name} " in result.stdout, f"{name} was not imported"


def test_empty_series_passes_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "patches").mkdir(parents=True)
    (root / "patches/series").write_text("# no patches yet\n")
    shutil.copy(ROOT / "vllm.pin", root / "vllm.pin")
    result = _check({**os.environ, "GDN_UCACHE_ROOT": str(root)})
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert "0 patches, 0 vllm file(s)" in result.stdout
    assert "OK: 0 patches applied" in result.stdout
