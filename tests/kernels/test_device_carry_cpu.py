"""The light carry fits the device tool's 64 MiB transfer. Every device call of a session sends
the work tree (tracked and untracked-not-ignored files); the first ones each add one part of
CuTe-DSL (scripts/gpu-bundle.sh), no part larger than `split -b`. Sessions 22, 24 and 30 found
that limit only at a call, after committed results had grown the tree. Here CI finds it first,
and says what to change."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRANSFER_LIMIT = 64 << 20  # the device tool's limit per call (tree + carry)
MARGIN = 2 << 20  # files a session adds before its first call (logs, a results folder)


def _part_bytes() -> int:
    """The part size gpu-bundle.sh splits CuTe-DSL into (`split -b NNM`)."""
    text = (ROOT / "scripts" / "gpu-bundle.sh").read_text()
    (mib,) = re.findall(r"split -b (\d+)M", text)
    return int(mib) << 20


def _tree_bytes() -> int:
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    paths = (ROOT / n.decode() for n in names if n)
    return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())


def test_tree_plus_part_00_fits_one_transfer() -> None:
    tree, part = _tree_bytes(), _part_bytes()
    assert tree + part + MARGIN <= TRANSFER_LIMIT, (
        f"work tree {tree / 2**20:.1f} MiB + CuTe-DSL part-00 {part / 2**20:.0f} MiB + "
        f"{MARGIN >> 20} MiB margin > the device tool's 64 MiB per call: lower `split -b` in "
        "scripts/gpu-bundle.sh (then rebuild .gpu/ and send one more part per session), or keep "
        "large result files (PNGs, raw JSON) out of the tree"
    )
