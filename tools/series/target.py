"""Apply the ``vllm/`` part of the series onto an installed vllm package (no git, no patch).

Used where vLLM is pip-installed (e.g. the vllm-openai image has neither git nor patch). The
applier is all-or-nothing: every hunk of every patch is applied in memory first, and files are
written only when the whole series fits. Hunks must match exactly (context may move, no fuzz).
A patch whose reverse applies is reported as already applied, so a second run writes nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.series.errors import SeriesError
from tools.series.layout import Layout
from tools.series.patchfile import parse_patch, read_series

PACKAGE_PREFIX = "vllm/"
_VERSION_ASSIGNMENT = re.compile(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    new_start: int
    old_lines: list[str] = field(default_factory=list)
    new_lines: list[str] = field(default_factory=list)
    kinds: str = ""  # one of ' ', '-', '+' per body line

    @property
    def at_end(self) -> bool:
        """No trailing context: like git apply, the hunk must match at the end of the file."""
        return not self.kinds.endswith(" ")

    def at_start(self, reverse: bool) -> bool:
        """Starts at line 1 (or 0): like git apply, the hunk must match at the beginning."""
        return (self.new_start if reverse else self.old_start) <= 1


@dataclass
class FileDiff:
    path: str  # repository-relative, e.g. vllm/envs.py
    is_new: bool = False
    is_deleted: bool = False
    new_mode: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


def parse_diff(text: str, source: str, allow_binary: bool = False) -> list[FileDiff]:
    """Parse git's unified diff into files and hunks; raise SeriesError on anything odd.

    allow_binary: accept (and skip) binary changes, for validation before git am.
    """
    files: list[FileDiff] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("diff --git "):
            if files and line.startswith("-- ") and line.strip() == "--":
                break  # mail signature
            i += 1
            continue
        match = re.match(r"^diff --git a/(.+) b/(.+)$", line)
        if not match or match.group(1) != match.group(2):
            raise SeriesError(f"{source}: unsupported diff header {line!r}")
        current = FileDiff(path=match.group(2))
        files.append(current)
        i += 1
        while i < len(lines) and not lines[i].startswith(("@@", "diff --git ")):
            header = lines[i]
            if header.startswith("new file mode "):
                current.is_new, current.new_mode = True, header.split()[-1]
            elif header.startswith("deleted file mode "):
                current.is_deleted = True
            elif header.startswith("new mode "):
                current.new_mode = header.split()[-1]
            elif header.startswith(("GIT binary patch", "Binary files ")) and not allow_binary:
                raise SeriesError(
                    f"{source}: binary change to {current.path} cannot be applied to a target"
                )
            elif header.startswith(("rename ", "copy ", "similarity ")):
                raise SeriesError(f"{source}: rename/copy of {current.path} is not supported")
            i += 1
        while i < len(lines) and lines[i].startswith("@@"):
            hunk_match = _HUNK.match(lines[i])
            if not hunk_match:
                raise SeriesError(f"{source}: malformed hunk header {lines[i]!r} in {current.path}")
            old_count = int(hunk_match.group(2) or "1") if hunk_match.group(2) != "0" else 0
            new_count = int(hunk_match.group(4) or "1") if hunk_match.group(4) != "0" else 0
            hunk = Hunk(old_start=int(hunk_match.group(1)), new_start=int(hunk_match.group(3)))
            i += 1
            seen_old = seen_new = 0
            while seen_old < old_count or seen_new < new_count:
                if i >= len(lines):
                    raise SeriesError(f"{source}: truncated hunk in {current.path}")
                body = lines[i]
                kind, content = body[:1], body[1:] + "\n"
                if kind == " ":
                    hunk.old_lines.append(content)
                    hunk.new_lines.append(content)
                    seen_old += 1
                    seen_new += 1
                elif kind == "-":
                    hunk.old_lines.append(content)
                    seen_old += 1
                elif kind == "+":
                    hunk.new_lines.append(content)
                    seen_new += 1
                else:
                    raise SeriesError(
                        f"{source}: corrupt hunk in {current.path}: unexpected line {body!r}"
                    )
                hunk.kinds += kind
                i += 1
                # "\ No newline at end of file" refers to the line just read.
                if i < len(lines) and lines[i].startswith("\\ "):
                    if kind in (" ", "-"):
                        hunk.old_lines[-1] = hunk.old_lines[-1][:-1]
                    if kind in (" ", "+"):
                        hunk.new_lines[-1] = hunk.new_lines[-1][:-1]
                    i += 1
            current.hunks.append(hunk)
    if not files:
        raise SeriesError(f"{source}: no file changes found")
    return files


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only, as diff does (str.splitlines would
    also split on form feeds and other separators and keep CRLF apart from git's view)."""
    lines = text.split("\n")
    tail = lines.pop()
    return [line + "\n" for line in lines] + ([tail] if tail else [])


def _find(
    lines: list[str], needle: list[str], hint: int, at_start: bool, at_end: bool
) -> int | None:
    """Index where needle occurs in lines, nearest to hint; None if nowhere.

    at_start/at_end pin the match to the beginning/end of the file, as git apply does for
    hunks without leading/trailing context (otherwise an addition at the end of a file would
    "apply" again after it was applied).
    """
    if at_start or at_end:
        candidates = ([0] if at_start else []) + ([len(lines) - len(needle)] if at_end else [])
        for start in candidates:
            if start >= 0 and lines[start : start + len(needle)] == needle:
                return start
        return None
    if not needle:
        return min(max(hint, 0), len(lines))
    limit = len(lines) - len(needle)
    for distance in range(max(limit, 0) + 1 + abs(hint)):
        for start in (hint - distance, hint + distance):
            if 0 <= start <= limit and lines[start : start + len(needle)] == needle:
                return start
        if hint - distance < 0 and hint + distance > limit:
            break
    return None


def apply_hunks(content: list[str], hunks: list[Hunk], reverse: bool = False) -> list[str] | None:
    """Apply hunks to content (lines with endings); None if any hunk does not match."""
    result = list(content)
    offset = 0
    for hunk in hunks:
        old, new = (hunk.new_lines, hunk.old_lines) if reverse else (hunk.old_lines, hunk.new_lines)
        hint = (hunk.new_start if reverse else hunk.old_start) - 1 + offset
        start = _find(result, old, hint, hunk.at_start(reverse), hunk.at_end)
        if start is None:
            return None
        result[start : start + len(old)] = new
        offset += len(new) - len(old)
    return result


def resolve_target(target: str) -> Path:
    """The directory that holds the vllm package (site-packages), given it or the package dir."""
    path = Path(target).resolve()
    if (path / "vllm" / "__init__.py").is_file():
        return path
    if path.name == "vllm" and (path / "__init__.py").is_file():
        return path.parent
    raise SeriesError(
        f"{target} holds no installed vllm package (expected {target}/vllm/__init__.py or a "
        "vllm package dir); find it with: python3 -c 'import vllm, os; "
        "print(os.path.dirname(vllm.__file__))'"
    )


def installed_version(site: Path) -> str | None:
    version_file = site / "vllm" / "_version.py"
    if version_file.is_file():
        match = _VERSION_ASSIGNMENT.search(version_file.read_text())
        if match:
            return match.group(1)
    for metadata in sorted(site.glob("vllm-*.dist-info/METADATA")):
        for line in metadata.read_text(errors="replace").splitlines():
            if line.startswith("Version: "):
                return line.split(":", 1)[1].strip()
    return None


_NO_MATCH = object()


def _current_lines(site: Path, rel: str, pending: dict[str, list[str] | None]) -> list[str] | None:
    if rel in pending:
        return pending[rel]
    path = site / rel
    return split_lines(path.read_bytes().decode("utf-8")) if path.is_file() else None


def _forward(current: list[str] | None, diff: FileDiff) -> object:
    """New lines (None = deleted) after applying diff to current, or _NO_MATCH."""
    if diff.is_new:
        return apply_hunks([], diff.hunks) if current is None else _NO_MATCH
    if current is None:
        return _NO_MATCH
    after = apply_hunks(current, diff.hunks)
    if after is None:
        return _NO_MATCH
    if diff.is_deleted:
        return None if after == [] else _NO_MATCH
    return after


def _reverse(current: list[str] | None, diff: FileDiff) -> object:
    """Lines before diff, if current already has diff applied; else _NO_MATCH."""
    if diff.is_new:
        return None if current is not None and current == apply_hunks([], diff.hunks) else _NO_MATCH
    if diff.is_deleted:
        return [] if current is None else _NO_MATCH
    if current is None:
        return _NO_MATCH
    before = apply_hunks(current, diff.hunks, reverse=True)
    return _NO_MATCH if before is None else before


def apply_to_target(layout: Layout, target: str, force: bool = False, dry_run: bool = False) -> int:
    site = resolve_target(target)
    pinned = layout.pinned_version()
    found = installed_version(site)
    if found is None or found.split("+")[0] != pinned:
        message = (
            f"{site}/vllm is version {found or 'unknown'}, but the series is pinned to {pinned}"
        )
        if not force:
            raise SeriesError(message + "; install vllm==" + pinned + " or pass --force")
        print(f"warning: {message} (--force)")
    patches = read_series(layout.patches_dir)
    pending: dict[str, list[str] | None] = {}  # relative path -> new lines (None = delete)
    modes: dict[str, str] = {}
    failures: list[str] = []
    for patch_path in patches:
        patch = parse_patch(patch_path)
        diffs = [d for d in parse_diff(patch.diff, patch.name) if d.path.startswith(PACKAGE_PREFIX)]
        if not diffs:
            print(f"{patch.name}: nothing under vllm/ (skipped)")
            continue
        forward: dict[str, list[str] | None] = {}
        problems: list[str] = []
        already_applied = True
        for diff in diffs:
            current = _current_lines(site, diff.path, pending)
            after, before = _forward(current, diff), _reverse(current, diff)
            if after is _NO_MATCH:
                missing = current is None and not diff.is_new
                problems.append(f"{diff.path} (missing)" if missing else diff.path)
            else:
                forward[diff.path] = after  # type: ignore[assignment]
            already_applied = already_applied and before is not _NO_MATCH
        if already_applied and not problems:
            raise SeriesError(
                f"{patch.name}: cannot tell whether it is applied to {site} (both it and its "
                "reverse match); nothing was written"
            )
        if problems and already_applied:
            print(f"{patch.name}: already applied")
            continue
        if problems:
            failures.append(f"{patch.name}: does not apply to {', '.join(problems)}")
            continue
        print(f"{patch.name}: applies")
        for path, lines in forward.items():
            pending[path] = lines
        for diff in diffs:
            if diff.new_mode:
                modes[diff.path] = diff.new_mode
    if failures:
        raise SeriesError(
            "the series does not apply to "
            + str(site)
            + " (nothing was written):\n  "
            + "\n  ".join(failures)
        )
    for rel in sorted(pending):
        lines = pending[rel]
        path = site / rel
        action = "delete" if lines is None else ("create" if not path.exists() else "modify")
        print(f"{'would ' if dry_run else ''}{action} {path}")
        if dry_run:
            continue
        if lines is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".gdn-ucache.tmp")
        temporary.write_bytes("".join(lines).encode("utf-8"))
        mode = modes.get(rel)
        if mode:
            os.chmod(temporary, 0o755 if mode.endswith("755") else 0o644)
        elif path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        temporary.replace(path)
    print(f"{len(pending)} file(s) {'would change' if dry_run else 'changed'} under {site}")
    return 0
