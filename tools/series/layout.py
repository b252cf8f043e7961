"""Where things live: the project root, its pin, patches/, vllm/ and the download cache."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tools.series.pin import read_pin

SERIES_BRANCH = "gdn-ucache"
# Ref inside vllm/ recording the commit the series branch is built on (moved by rebase).
BASE_REF = "refs/gdn-ucache/base"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def base_branch_for(version: str) -> str:
    return f"vllm-{version}"


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def pin_path(self) -> Path:
        return self.root / "vllm.pin"

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    @property
    def series_file(self) -> Path:
        return self.patches_dir / "series"

    @property
    def vllm_dir(self) -> Path:
        return self.root / "vllm"

    @property
    def cache_dir(self) -> Path:
        """Download cache shared by every clone on this machine (outside the repo)."""
        configured = os.environ.get("GDN_UCACHE_CACHE")
        return Path(configured) if configured else Path.home() / ".cache" / "gdn-ucache"

    def pin(self) -> dict[str, str]:
        return read_pin(self.pin_path)

    def pinned_version(self) -> str:
        return self.pin()["VLLM_VERSION"]


def default_layout(root: str | None = None) -> Layout:
    """Layout for --root, else $GDN_UCACHE_ROOT, else the repository holding this file."""
    chosen = root or os.environ.get("GDN_UCACHE_ROOT") or str(PROJECT_ROOT)
    return Layout(Path(chosen).resolve())
