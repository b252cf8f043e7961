"""Paste-ready markdown from the rebase-CI JSON (version matrix, bisect result).

One table a maintainer can paste into an upstream PR or an issue: patches as rows, vLLM bases
as columns (there are few bases and they have short names), one verdict per cell. A bisect
result becomes a short block naming the first bad upstream commit. GitHub-flavoured markdown;
no HTML.
"""

from __future__ import annotations

import json
from pathlib import Path

from tools.rebase_ci.evaluate import BLOCKED, BROKEN, CONFLICTS, FAILS_TESTS, MERGES

_MARK = {
    "applies": "✅ applies",
    MERGES: "✅ applies (3-way)",
    CONFLICTS: "❌ **conflicts**",
    FAILS_TESTS: "❌ **fails tests**",
    BROKEN: "❌ **broken patch**",
    BLOCKED: "⏸ blocked",
}


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cell(cell: dict) -> str:
    text = _MARK.get(cell["status"], _escape(cell["status"]))
    if cell["status"] == CONFLICTS and cell.get("files"):
        shown = ", ".join(f"`{Path(f).name}`" for f in cell["files"][:3])
        more = f" +{len(cell['files']) - 3}" if len(cell["files"]) > 3 else ""
        text += f": {shown}{more}"
    return text


def _count(patches: int) -> str:
    return f"{patches} patch" if patches == 1 else f"{patches} patches"


def _column_title(row: dict) -> str:
    name = f"vLLM {row['base']}" if row["kind"] == "version" else f"`{_escape(row['base'])}`"
    return name + (" (pinned)" if row["pinned"] else "")


def matrix_markdown(data: dict) -> str:
    """Markdown for a version-matrix JSON (see tools/rebase_ci/matrix.py)."""
    rows = data["rows"]
    lines = [
        f"### gdn-ucache series vs vLLM releases ({_count(len(data['series']))}, "
        f"pinned {data['pinned']})",
        "",
    ]
    if not rows:
        return "\n".join(lines + ["(no bases were checked)", ""])
    lines.append("| patch | " + " | ".join(_column_title(r) for r in rows) + " |")
    lines.append("|---|" + "---|" * len(rows))
    upstream = [f"`{r['upstream_commit'][:12]}`" if r["upstream_commit"] else "?" for r in rows]
    lines.append("| *upstream commit* | " + " | ".join(upstream) + " |")
    for index, name in enumerate(data["series"]):
        cells = []
        for row in rows:
            if row["error"]:
                cells.append("⚠ not checked")
            elif index < len(row["cells"]):
                cells.append(_cell(row["cells"][index]))
            else:
                cells.append("?")
        lines.append(f"| `{_escape(name)}` | " + " | ".join(cells) + " |")
    verdicts = ["**OK**" if r["ok"] else "**NOT OK**" for r in rows]
    lines.append("| *series* | " + " | ".join(verdicts) + " |")
    lines.append("")
    lines.append(
        f"Tests per patch: `{_escape(data.get('test', 'none'))}`. "
        "blocked = an earlier patch failed there. Only the pinned release gates CI."
    )
    notes = []
    for row in rows:
        if row["error"]:
            notes.append(f"- {_column_title(row)}: {_escape(row['error'].splitlines()[0])}")
        for cell in row["cells"]:
            if cell["status"] in (CONFLICTS, FAILS_TESTS, BROKEN) and cell.get("detail"):
                first = _escape(cell["detail"].strip().splitlines()[0])[:200]
                notes.append(f"- {_column_title(row)}, `{cell['patch']}`: {first}")
    if notes:
        lines += ["", "Details:", *notes]
    lines.append("")
    return "\n".join(lines)


def bisect_markdown(data: dict) -> str:
    """Markdown for a bisect-result JSON (see tools/rebase_ci/bisect.py)."""
    good, bad = data["good"][:12], data["bad"][:12]
    predicate = "applies and passes its tests" if data.get("test") else "applies"
    lines = [f"### First upstream commit where the series no longer {predicate}", ""]
    culprit = data.get("culprit")
    if not culprit:
        lines += [f"Range `{good}..{bad}`: {data.get('message', 'no culprit found')}", ""]
        return "\n".join(lines)
    lines += [
        "| | |",
        "|---|---|",
        f"| commit | `{culprit['commit'][:12]}` |",
        f"| subject | {_escape(culprit['subject'])} |",
        f"| date | {culprit.get('date', '')} |",
        f"| range bisected | `{good}..{bad}` ({data['commits_in_range']} commits, "
        f"{data['steps']} steps) |",
    ]
    shared = culprit.get("shared_files") or []
    lines.append(
        "| files it touched that the series also touches | "
        + (", ".join(f"`{f}`" for f in shared) or "none") + " |"
    )  # fmt: skip
    for cell in culprit.get("failing", []):
        files = ", ".join(f"`{f}`" for f in cell.get("files", []))
        lines.append(
            f"| failing patch | `{cell['patch']}`: {cell['status']}"
            + (f" ({files})" if files else "") + " |"
        )  # fmt: skip
    lines.append("")
    return "\n".join(lines)


def render(paths: list[Path]) -> str:
    """Markdown for each JSON file given (matrix or bisect, told apart by their 'kind')."""
    parts = []
    for path in paths:
        data = json.loads(path.read_text())
        kind = data.get("kind")
        if kind == "gdn-ucache-version-matrix":
            parts.append(matrix_markdown(data))
        elif kind == "gdn-ucache-bisect":
            parts.append(bisect_markdown(data))
        else:
            raise ValueError(f"{path}: not a rebase-CI result (kind={kind!r})")
    return "\n".join(parts)
