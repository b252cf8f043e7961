"""Materialise the files a series patch creates, without git (the GPU host has none).

The Triton baseline's kernel file and its vLLM test are new files of patch 1, so their full text
is the added lines of their hunks. The GPU script writes them under `.gpu/series-vllm/` from the
committed `patches/` on every run, so the host never times a stale copy.

    python3 bench/triton_prep.py patches/Kernel-GDN-ReplaySSM-...patch .gpu/series-vllm
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SERIES_FILES = (
    "vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py",
    "tests/kernels/mamba/test_gdn_replayssm_spec_decode.py",
)


def new_files(patch_text: str) -> dict[str, str]:
    """{path: content} of every file the patch creates (``new file mode``, one ``+`` hunk)."""
    files: dict[str, str] = {}
    sections = patch_text.split("\ndiff --git ")
    for section in sections[1:]:
        header, _, body = section.partition("\n@@ ")
        if "\nnew file mode" not in header:
            continue
        path = header.split("\n", 1)[0].split(" b/", 1)[1]
        lines = body.split("\n")[1:]  # drop the rest of the @@ line
        content: list[str] = []
        for line in lines:
            if line.startswith("+"):
                content.append(line[1:])
            elif line.startswith("\\"):  # "\ No newline at end of file"
                continue
            else:
                break  # the next file's header or the patch trailer ("-- ")
        files[path] = "\n".join(content) + "\n"
    return files


def materialise(patch: Path, dest: Path, wanted: tuple[str, ...] = SERIES_FILES) -> list[Path]:
    """Write the wanted new files of `patch` under `dest`; error if one is missing."""
    files = new_files(patch.read_text())
    missing = [name for name in wanted if name not in files]
    if missing:
        raise SystemExit(f"{patch} does not create {missing}")
    written = []
    for name in wanted:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[name])
        written.append(target)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("patch", type=Path)
    ap.add_argument("dest", type=Path)
    args = ap.parse_args()
    for path in materialise(args.patch, args.dest):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
