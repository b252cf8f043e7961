"""What goes into the image's labels: the vLLM base, the series' size, version and digest."""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.series.layout import Layout
from tools.series.patchfile import read_series

# Docker tags: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class BuildInfo:
    vllm_version: str  # the pinned release (vllm.pin VLLM_VERSION)
    upstream_commit: str  # vllm.pin VLLM_UPSTREAM_COMMIT
    patch_names: tuple[str, ...]  # patches/series, in order
    series_digest: str  # sha256 over the series file names and bytes, in order
    series_version: str  # `git describe` of this checkout (or the project version)
    source_revision: str  # commit of this checkout ("unknown" outside git)

    @property
    def patch_count(self) -> int:
        return len(self.patch_names)

    def default_tag(self, kernel: str) -> str:
        """``gdn-ucache:v<vllm>-<series version>[-flashinfer]``, made safe for docker."""
        suffix = "" if kernel == "ours" else f"-{kernel}"
        tag = _TAG_UNSAFE.sub("-", f"v{self.vllm_version}-{self.series_version}{suffix}")
        return f"gdn-ucache:{tag[:128]}"


def series_digest(patches: list[Path]) -> str:
    """sha256 of (name, bytes) of every patch in series order: same series, same digest."""
    digest = hashlib.sha256()
    for patch in patches:
        data = patch.read_bytes()
        digest.update(f"{patch.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _git(root: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def _project_version(root: Path) -> str:
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    return "0"


def build_info(layout: Layout) -> BuildInfo:
    pin = layout.pin()
    patches = read_series(layout.patches_dir)
    root = layout.root
    revision = _git(root, "rev-parse", "--short=12", "HEAD") or "unknown"
    # A dirty tree still builds, but its version says so.
    described = _git(root, "describe", "--tags", "--always", "--dirty")
    version = described or f"{_project_version(root)}-{revision}"
    return BuildInfo(
        vllm_version=pin["VLLM_VERSION"],
        upstream_commit=pin["VLLM_UPSTREAM_COMMIT"],
        patch_names=tuple(p.name for p in patches),
        series_digest=series_digest(patches),
        series_version=version,
        source_revision=revision,
    )
