"""Regenerate ``patches/`` from the series branch, deterministically.

Each commit in ``<base>..gdn-ucache`` becomes ``patches/<name>.patch`` via ``git format-patch``
with every source of noise removed: zero commit hash in the ``From`` line (``--zero-commit``),
no version signature, no ``Date:`` header, full blob ids on ``index`` lines (abbreviation
length depends on the repository size), no diffstat, no renames (the ``--target`` applier
handles plain diffs), subject kept as written (``-k``). Names come from the subject (git's own
file-name rule without the number) and the order goes to ``patches/series``, so exporting an
unchanged branch rewrites nothing.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tools.series.apply import series_base  # noqa: F401  (re-exported for other tools)
from tools.series.errors import SeriesError
from tools.series.gitutil import commits_between, dirty_files, git, rev_parse
from tools.series.layout import SERIES_BRANCH, Layout
from tools.series.patchfile import read_series

SERIES_HEADER = (
    "# Order in which the patches apply onto the vLLM base (vllm.pin); one file per line.\n"
    "# Written by scripts/export.sh; see patches/README.md.\n"
)
_FORMAT_PATCH_ARGS = (
    "format-patch",
    "--keep-subject",
    "--zero-commit",
    "--no-signature",
    "--full-index",
    "--no-stat",
    "--no-renames",
    "--binary",
    "--no-thread",
    "--no-cover-letter",
    "--no-attach",
    "--encoding=UTF-8",
    "--unified=3",
    "--diff-algorithm=myers",
    "-O/dev/null",
)


def clean_patch_text(text: str) -> str:
    """Drop the lines that change without the patch changing (the Date: header)."""
    head, separator, rest = text.partition("\n\n")
    head = "\n".join(line for line in head.split("\n") if not line.startswith("Date: "))
    return head + separator + rest


def format_series(repo: Path, base: str, tip: str, out_dir: Path) -> list[tuple[str, str]]:
    """(file name, cleaned text) for each commit in base..tip, oldest first."""
    commits = commits_between(repo, base, tip)
    if not commits:
        return []
    result = git(repo, *_FORMAT_PATCH_ARGS, "-o", str(out_dir), f"{base}..{tip}")
    files = [Path(line) for line in result.stdout.split("\n") if line.strip()]
    if len(files) != len(commits):
        raise SeriesError(f"git format-patch wrote {len(files)} files for {len(commits)} commits")
    patches: list[tuple[str, str]] = []
    used: set[str] = set()
    for path in files:
        stem = re.sub(r"^\d{4}-", "", path.stem) or "patch"
        name, number = f"{stem}.patch", 2
        while name in used:
            name, number = f"{stem}-{number}.patch", number + 1
        used.add(name)
        patches.append((name, clean_patch_text(path.read_bytes().decode("utf-8"))))
    return patches


def export_series(layout: Layout) -> list[str]:
    """Write patches/*.patch and patches/series from the series branch; return the names."""
    from tools.series.apply import require_vllm

    repo = require_vllm(layout)
    tip = rev_parse(repo, f"refs/heads/{SERIES_BRANCH}")
    if tip is None:
        raise SeriesError(f"branch {SERIES_BRANCH} does not exist in {repo}; run scripts/apply.sh")
    base = series_base(layout, repo)
    dirty = dirty_files(repo)
    if dirty:
        print(f"note: uncommitted changes in {repo} are not exported: {', '.join(dirty[:5])}")
    old_names = [path.name for path in read_series(layout.patches_dir)]
    with tempfile.TemporaryDirectory(prefix="series-export-") as scratch:
        patches = format_series(repo, base, tip, Path(scratch))
    layout.patches_dir.mkdir(parents=True, exist_ok=True)
    for name, text in patches:
        target = layout.patches_dir / name
        state = "new"
        if target.is_file():
            state = "unchanged" if target.read_bytes() == text.encode("utf-8") else "updated"
        if state != "unchanged":
            target.write_bytes(text.encode("utf-8"))
        print(f"{name}: {state}")
    new_names = [name for name, _ in patches]
    for name in old_names:
        if name not in new_names:
            (layout.patches_dir / name).unlink(missing_ok=True)
            print(f"{name}: removed (no longer on {SERIES_BRANCH})")
    series_text = SERIES_HEADER + "".join(f"{name}\n" for name in new_names)
    if not layout.series_file.is_file() or layout.series_file.read_text() != series_text:
        layout.series_file.write_text(series_text)
    print(f"exported {len(new_names)} patch(es) from {SERIES_BRANCH} ({base[:12]}..{tip[:12]})")
    return new_names
