"""The series on disk: ``patches/series`` (order) and ``git format-patch`` files.

``patches/series`` lists one patch file name per line, in application order; blank lines
and ``#`` comments are ignored. Names are stable (derived from the subject, no numbers), so
adding or dropping a patch touches one line and no other file.
"""

from __future__ import annotations

import email.header
import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.series.errors import SeriesError

_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$")


@dataclass
class PatchFile:
    """A parsed ``git format-patch`` file (one commit)."""

    path: Path
    author: str
    subject: str
    body: str
    diff: str
    trailers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    def trailer_values(self, key: str) -> list[str]:
        return [value for k, value in self.trailers if k.lower() == key.lower()]

    def changed_paths(self) -> list[str]:
        paths = []
        for line in self.diff.splitlines():
            if line.startswith("diff --git "):
                match = re.match(r"^diff --git a/(.+) b/(.+)$", line)
                if match:
                    paths.append(match.group(2))
        return paths


def read_series(patches_dir: Path) -> list[Path]:
    """Patch files in series order; every listed file must exist, with no duplicates."""
    series_file = patches_dir / "series"
    if not series_file.is_file():
        return []
    names: list[str] = []
    for number, raw in enumerate(series_file.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "/" in line or not line.endswith(".patch"):
            raise SeriesError(f"{series_file}:{number}: {line!r} is not a patch file name")
        if line in names:
            raise SeriesError(f"{series_file}:{number}: {line} is listed twice")
        names.append(line)
    missing = [name for name in names if not (patches_dir / name).is_file()]
    if missing:
        raise SeriesError(f"{series_file} lists missing patch files: {', '.join(missing)}")
    return [patches_dir / name for name in names]


def _decode_header(value: str) -> str:
    parts = email.header.decode_header(value)
    return "".join(
        text.decode(charset or "utf-8") if isinstance(text, bytes) else text
        for text, charset in parts
    )


def parse_patch(path: Path) -> PatchFile:
    """Parse one format-patch file; raise SeriesError naming the file if it is corrupt."""
    try:
        # Bytes, not read_text: universal newlines would drop the \r of CRLF lines.
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeriesError(f"{path.name}: cannot read it: {exc}") from exc
    lines = text.split("\n")
    headers: dict[str, str] = {}
    index = 0
    if lines and lines[0].startswith("From "):
        index = 1
    last_key = None
    while index < len(lines) and lines[index] != "":
        line = lines[index]
        if line[:1] in (" ", "\t") and last_key:
            headers[last_key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            last_key = key.strip().lower()
            headers[last_key] = value.strip()
        else:
            raise SeriesError(f"{path.name}: line {index + 1}: not a mail header: {line!r}")
        index += 1
    if "subject" not in headers or "from" not in headers:
        raise SeriesError(f"{path.name}: not a git format-patch file (no From:/Subject: header)")
    rest = "\n".join(lines[index + 1 :])
    marker = re.search(r"^diff --git ", rest, flags=re.MULTILINE)
    if marker is None:
        raise SeriesError(f"{path.name}: contains no diff (no 'diff --git' line)")
    message = rest[: marker.start()]
    diff = rest[marker.start() :]
    # Notes/diffstat below a '---' line are not part of the commit message.
    message = re.split(r"^---$", message, maxsplit=1, flags=re.MULTILINE)[0].strip("\n")
    trailers = []
    paragraphs = message.strip().split("\n\n") if message.strip() else []
    if paragraphs:
        last = paragraphs[-1].splitlines()
        if last and all(_TRAILER.match(line) for line in last):
            trailers = [_TRAILER.match(line).groups() for line in last]  # type: ignore[union-attr]
    return PatchFile(
        path=path,
        author=_decode_header(headers["from"]),
        subject=_decode_header(headers["subject"]),
        body=message,
        diff=diff,
        trailers=[(k, v) for k, v in trailers],
    )
