"""The version matrix: the series judged on several vLLM releases (version x patch).

Each release is imported the way the foundation imports the pinned one
(:func:`tools.series.populate.ensure_base`: the PyPI sdist as a deterministic commit on branch
``vllm-<version>`` in ``vllm/``, cached under ``$GDN_UCACHE_CACHE/sdist``), then judged by
:func:`tools.rebase_ci.evaluate.evaluate_base`. Only the pinned release decides the exit
status; older (and newer) ones are reported.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.rebase_ci.evaluate import PatchVerdict, evaluate_base, series_patches
from tools.series.errors import SeriesError
from tools.series.gitutil import git_out, rev_parse
from tools.series.layout import Layout, base_branch_for
from tools.series.populate import ensure_base, is_release_version, sdist_cache_path


@dataclass
class MatrixRow:
    """The series on one base: a release (``kind="version"``) or a git ref."""

    base: str
    kind: str
    commit: str
    upstream_commit: str
    pinned: bool
    verdicts: list[PatchVerdict] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(v.ok for v in self.verdicts)

    def to_json(self) -> dict:
        return {
            "base": self.base,
            "kind": self.kind,
            "commit": self.commit,
            "upstream_commit": self.upstream_commit,
            "pinned": self.pinned,
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            "error": self.error,
            "cells": [v.to_json() for v in self.verdicts],
        }


def _version_key(version: str) -> tuple:
    from pip._vendor.packaging.version import Version

    return (Version(version),)


def available_releases(layout: Layout, offline: bool = False) -> list[str]:
    """vLLM releases with a source distribution, oldest first.

    Asks pip's own PackageFinder (pip's configured index, as the foundation does for the
    pinned sdist); offline, the releases whose sdist is already cached.
    """
    if offline:
        cached = sorted((layout.cache_dir / "sdist").glob("vllm-*.tar.gz"))
        versions = [p.name[len("vllm-") : -len(".tar.gz")] for p in cached]
        return sorted((v for v in versions if is_release_version(v)), key=_version_key)
    from pip._internal.cli.cmdoptions import make_target_python
    from pip._internal.commands.download import DownloadCommand

    # pip warns about every find-links/extra-index location without the package; quiet it.
    logging.getLogger("pip").setLevel(logging.ERROR)
    command = DownloadCommand("download", "list vLLM source releases")
    options, _ = command.parse_args(["--no-deps", "--no-binary", ":all:", "vllm"])
    with command.main_context():
        session = command.get_default_session(options)
        finder = command._build_package_finder(
            options=options,
            session=session,
            target_python=make_target_python(options),
            ignore_requires_python=True,
        )
        candidates = finder.find_all_candidates("vllm")
        versions = {
            str(c.version)
            for c in candidates
            if c.link.filename.endswith(".tar.gz") and not c.version.is_prerelease
        }
    return sorted(versions, key=_version_key)


def select_versions(
    available: list[str], pinned: str, previous: int = 2, newer: bool = False
) -> list[str]:
    """The pinned release, the ``previous`` releases before it and, with ``newer``, the newest
    release after it (the next rebase target). Pinned first, then newest to oldest."""
    ordered = sorted(set(available) | {pinned}, key=_version_key)
    position = ordered.index(pinned)
    chosen = [pinned]
    if newer and position + 1 < len(ordered):
        chosen.append(ordered[-1])
    chosen += list(reversed(ordered[max(0, position - previous) : position]))
    return chosen


def _upstream_commit(layout: Layout, commit: str) -> str:
    """Upstream vLLM commit of a base: the sdist import's trailer, else the commit itself."""
    message = git_out(layout.vllm_dir, "log", "-1", "--format=%B", commit)
    for line in message.splitlines():
        if line.startswith("Upstream-Commit: "):
            return line.split(": ", 1)[1].strip()
    return commit[:12]


def run_matrix(
    layout: Layout,
    bases: list[str],
    test_command: str | None = None,
    source: str = "sdist",
    test_timeout: float = 1800.0,
    log=print,
) -> list[MatrixRow]:
    """Judge the series on every base (release version or git ref in ``vllm/``)."""
    pinned = layout.pinned_version()
    rows = []
    for base in bases:
        started = time.monotonic()
        kind = "version" if is_release_version(base) else "ref"
        row = MatrixRow(base, kind, "", "", pinned=(base == pinned))
        try:
            if kind == "version":
                if rev_parse(layout.vllm_dir, base_branch_for(base)):
                    where = f"branch {base_branch_for(base)}"
                elif sdist_cache_path(layout, base).is_file():
                    where = "cached sdist"
                else:
                    where = "downloading the sdist"
                log(f"== vLLM {base}: {where}")
                row.commit = ensure_base(layout, base, source)
                label = base
            else:
                log(f"== {base}")
                row.commit = git_out(layout.vllm_dir, "rev-parse", f"{base}^{{commit}}")
                label = "ref"
            row.upstream_commit = _upstream_commit(layout, row.commit)
            row.verdicts = evaluate_base(layout, row.commit, label, test_command, test_timeout)
        except SeriesError as exc:
            row.error = str(exc)
        row.seconds = time.monotonic() - started
        for verdict in row.verdicts:
            log(f"   {verdict.patch}: {verdict.status}" + (f" ({verdict.detail.splitlines()[0]})"
                if verdict.detail else ""))  # fmt: skip
        if row.error:
            log(f"   error: {row.error}")
        log(f"   {'ok' if row.ok else 'NOT OK'} in {row.seconds:.1f} s")
        rows.append(row)
    return rows


def matrix_json(layout: Layout, rows: list[MatrixRow], test_command: str | None) -> dict:
    return {
        "kind": "gdn-ucache-version-matrix",
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pinned": layout.pinned_version(),
        "series": [p.name for p in series_patches(layout)],
        "test": test_command or "none",
        "rows": [row.to_json() for row in rows],
    }


def write_outputs(data: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write version-matrix.json and version-matrix.md into out_dir."""
    from tools.rebase_ci.report import matrix_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "version-matrix.json"
    md_path = out_dir / "version-matrix.md"
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    md_path.write_text(matrix_markdown(data))
    return json_path, md_path


def pinned_failed(data: dict) -> bool:
    return any(row["pinned"] and not row["ok"] for row in data["rows"])
