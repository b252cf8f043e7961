"""Check the patch conventions (patches/README.md) on every patch of the series.

Per patch: parses as ``git format-patch`` output written by scripts/export.sh (zero commit
hash, no Date:, no version signature, full index lines); subject in vLLM's ``[Tag] Title``
style; a body saying why the patch exists; trailers ``Upstream-PR:``, ``Drop-when:`` and
``Signed-off-by:``. Per series: every ``*.patch`` in patches/ is listed in ``series`` and
every listed file exists. With ``--branch``: the committed files equal a fresh export of
branch gdn-ucache, ignoring ``index`` lines and ``@@`` line numbers.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tools.series.errors import SeriesError
from tools.series.layout import SERIES_BRANCH, Layout
from tools.series.patchfile import PatchFile, parse_patch, read_series

# vLLM's PR-title rule (.github/workflows/pr-title.yml), applied to patch subjects.
SUBJECT_RE = re.compile(r"^(\[[^][]+\])+ +[^\s].*$")
UPSTREAM_PR_RE = re.compile(
    r"^(none\b.*\S.*|((vllm-project/vllm|flashinfer-ai/flashinfer)?#\d+|https://\S+)"
    r"(,? +((vllm-project/vllm|flashinfer-ai/flashinfer)?#\d+|https://\S+))*( .*)?)$"
)
SIGNOFF_RE = re.compile(r"^.+ <[^<>@\s]+@[^<>\s]+>$")
MIN_WHY_CHARS = 20


def check_patch(patch: PatchFile, text: str) -> list[str]:
    """Problems with one patch (empty list when it follows the conventions)."""
    problems = []
    first = text.split("\n", 1)[0]
    if first.startswith("From ") and not first.startswith(
        "From 0000000000000000000000000000000000000000 "
    ):
        problems.append("commit hash in the From line (export with scripts/export.sh)")
    if re.search(r"^Date: ", text.split("\n\n", 1)[0], flags=re.MULTILINE):
        problems.append("Date: header present (export with scripts/export.sh)")
    if re.search(r"^-- \n\d+\.\d+", text, flags=re.MULTILINE):
        problems.append("git version signature at the end (export with scripts/export.sh)")
    if re.search(r"^index [0-9a-f]{1,39}\.\.", patch.diff, flags=re.MULTILINE):
        problems.append("abbreviated index lines (export with scripts/export.sh)")
    if not SUBJECT_RE.match(patch.subject):
        problems.append(f"subject {patch.subject!r} is not in vLLM's '[Tag] Title' style")
    trailer_keys = {key.lower() for key, _ in patch.trailers}
    why = patch.body
    if patch.trailers:
        why = patch.body.strip().rsplit("\n\n", 1)[0] if "\n\n" in patch.body.strip() else ""
    if len(why.strip()) < MIN_WHY_CHARS:
        problems.append("no body saying why the patch exists (a paragraph before the trailers)")
    upstream = patch.trailer_values("Upstream-PR")
    if not upstream:
        problems.append(
            "no 'Upstream-PR:' trailer (e.g. 'Upstream-PR: vllm-project/vllm#49887'"
            " or 'Upstream-PR: none (reason)')"
        )
    for value in upstream:
        if not UPSTREAM_PR_RE.match(value):
            problems.append(f"Upstream-PR value {value!r} is not '#NNNN', a URL or 'none (...)'")
    drop_when = patch.trailer_values("Drop-when")
    if not drop_when or not all(value.strip() for value in drop_when):
        problems.append("no 'Drop-when:' trailer saying when the patch can be dropped")
    signoffs = patch.trailer_values("Signed-off-by")
    if "signed-off-by" not in trailer_keys:
        problems.append("no 'Signed-off-by:' trailer (DCO; commit with git commit -s)")
    for value in signoffs:
        if not SIGNOFF_RE.match(value):
            problems.append(f"Signed-off-by {value!r} is not 'Name <email>'")
    return problems


def _normalise(text: str) -> str:
    """Drop what changes when only the base moves: index lines and @@ line numbers."""
    lines = []
    for line in text.split("\n"):
        if line.startswith("index "):
            continue
        lines.append(re.sub(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", "@@ @@", line))
    return "\n".join(lines)


def check_against_branch(layout: Layout) -> list[str]:
    from tools.series.apply import require_vllm, series_base
    from tools.series.export import format_series
    from tools.series.gitutil import rev_parse

    repo = require_vllm(layout)
    tip = rev_parse(repo, f"refs/heads/{SERIES_BRANCH}")
    if tip is None:
        return [f"branch {SERIES_BRANCH} does not exist in {repo}"]
    with tempfile.TemporaryDirectory(prefix="series-check-") as scratch:
        fresh = format_series(repo, series_base(layout, repo), tip, Path(scratch))
    committed = [(p.name, p.read_bytes().decode("utf-8")) for p in read_series(layout.patches_dir)]
    if [n for n, _ in fresh] != [n for n, _ in committed]:
        return [
            f"patches/series ({[n for n, _ in committed]}) differs from branch {SERIES_BRANCH} "
            f"({[n for n, _ in fresh]}); run scripts/export.sh"
        ]
    return [
        f"{name}: differs from branch {SERIES_BRANCH}; run scripts/export.sh"
        for (name, new), (_, old) in zip(fresh, committed, strict=True)
        if _normalise(new) != _normalise(old)
    ]


def check_patches(layout: Layout, against_branch: bool = False) -> int:
    """Print every problem; return 0 when the series follows the conventions, else 1."""
    problems: list[str] = []
    try:
        patches = read_series(layout.patches_dir)
    except SeriesError as exc:
        print(f"patches/series: {exc}")
        return 1
    listed = {p.name for p in patches}
    for stray in sorted(layout.patches_dir.glob("*.patch")):
        if stray.name not in listed:
            problems.append(f"{stray.name}: not listed in patches/series")
    for path in patches:
        try:
            patch = parse_patch(path)
        except SeriesError as exc:
            problems.append(str(exc))
            continue
        found = check_patch(patch, path.read_bytes().decode("utf-8"))
        problems += [f"{path.name}: {problem}" for problem in found]
        print(f"{path.name}: {'ok' if not found else f'{len(found)} problem(s)'}")
    if against_branch:
        problems += check_against_branch(layout)
    for problem in problems:
        print(f"FAIL {problem}")
    verdict = f"{len(problems)} problem(s)" if problems else "all ok"
    print(f"checked {len(patches)} patch(es): {verdict}")
    return 1 if problems else 0
