"""The image's install step: apply the series onto the installed vllm package.

Run as ``python3 -m tools.container install`` by the Dockerfile (inside the vllm-openai image,
which has neither git nor patch) and, unchanged, by the offline check against a virtualenv with
the real vllm wheel. It
1. finds the site dir that holds ``vllm`` for *this* interpreter (without importing vllm),
2. runs ``scripts/apply.sh --target <site>`` (the series applier: all-or-nothing, refuses a
   vllm version other than the pin unless forced, prints each file it writes),
3. byte-compiles the changed modules (the image ships .pyc files; stale ones would cost a
   recompile at every start of a read-only container), and
4. writes a manifest of exactly which files changed (kept in the image) and prints it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.series.errors import SeriesError
from tools.series.layout import PROJECT_ROOT, Layout
from tools.series.patchfile import parse_patch, read_series
from tools.series.target import PACKAGE_PREFIX, installed_version

MANIFEST_NAME = "series-manifest.txt"


@dataclass(frozen=True)
class FileChange:
    action: str  # "create", "modify", "delete", "unchanged" (already applied)
    path: str  # relative to the site dir, e.g. vllm/envs.py
    sha256: str | None  # after the step; None when deleted


def find_vllm_site() -> Path:
    """The directory holding the vllm package importable by this interpreter."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise SeriesError(
            f"no vllm package is importable by {sys.executable}; install vllm first or pass --site"
        )
    return Path(spec.origin).resolve().parent.parent


def touched_package_files(layout: Layout) -> list[str]:
    """Every ``vllm/…`` path the series changes, in first-touched order."""
    paths: list[str] = []
    for patch in read_series(layout.patches_dir):
        for path in parse_patch(patch).changed_paths():
            if path.startswith(PACKAGE_PREFIX) and path not in paths:
                paths.append(path)
    return paths


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _compile(path: Path) -> None:
    try:
        py_compile.compile(str(path), doraise=True)
    except py_compile.PyCompileError as exc:
        raise SeriesError(f"{path} does not compile after applying the series:\n{exc.msg}") from exc


def install_series(
    layout: Layout, site: Path | None = None, force: bool = False
) -> tuple[Path, list[FileChange]]:
    """Apply the series to ``site`` (default: this interpreter's vllm) and list what changed."""
    site = (site or find_vllm_site()).resolve()
    touched = touched_package_files(layout)
    before = {rel: _sha256(site / rel) for rel in touched}
    count = len(read_series(layout.patches_dir))
    print(
        f"gdn-ucache: applying {count} patch(es) ({len(touched)} vllm file(s)) onto vllm "
        f"{installed_version(site) or 'unknown'} in {site}",
        flush=True,
    )
    # The tooling's own wrapper (in the image: the bind-mounted context, which is also the root).
    command = ["bash", str(PROJECT_ROOT / "scripts" / "apply.sh"), "--target", str(site)]
    if force:
        command.append("--force")
    # apply.sh resolves the project root from its own location; GDN_UCACHE_ROOT makes the
    # layout explicit, and PYTHON keeps the applier on this interpreter.
    environment = {**os.environ, "GDN_UCACHE_ROOT": str(layout.root), "PYTHON": sys.executable}
    result = subprocess.run(command, env=environment, check=False)
    if result.returncode != 0:
        raise SeriesError(
            f"scripts/apply.sh --target {site} failed (exit {result.returncode}); "
            "see its output above. Nothing was installed."
        )
    changes: list[FileChange] = []
    for rel in touched:
        path = site / rel
        after = _sha256(path)
        if after is None:
            action = "unchanged" if before[rel] is None else "delete"
        elif before[rel] is None:
            action = "create"
        else:
            action = "unchanged" if before[rel] == after else "modify"
        if after is not None and rel.endswith(".py"):
            _compile(path)
        changes.append(FileChange(action, rel, after))
    return site, changes


def manifest_text(layout: Layout, site: Path, changes: list[FileChange]) -> str:
    patches = read_series(layout.patches_dir)
    lines = [
        "# gdn-ucache: files of the installed vllm package changed by the patch series",
        f"vllm_version={installed_version(site) or 'unknown'}",
        f"site={site}",
        f"patch_count={len(patches)}",
    ]
    lines += [f"patch {patch.name}" for patch in patches]
    for change in changes:
        lines.append(f"{change.action} {change.path} sha256={change.sha256 or '-'}")
    return "\n".join(lines) + "\n"


def run_install(
    layout: Layout, site: Path | None, manifest: Path | None, force: bool = False
) -> int:
    site, changes = install_series(layout, site, force=force)
    text = manifest_text(layout, site, changes)
    if manifest is not None:
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(text)
    written = [c for c in changes if c.action in ("create", "modify", "delete")]
    print(f"gdn-ucache: {len(written)} file(s) changed under {site}:")
    for change in changes:
        print(f"  {change.action:<9} {change.path}")
    if manifest is not None:
        print(f"gdn-ucache: manifest written to {manifest}")
    return 0
