"""Where each kernel's warps wait, instruction by instruction, from Nsight Compute's source page.

Input: `ncu -i REPORT.ncu-rep --page source --csv --print-source=sass` of a report taken with
`--section SourceCounters` (bench/h200_run.sh sass). Per kernel it prints the warp-instructions
executed, the stall samples by reason and by opcode, the samples along the program (20 equal
slices of the SASS listing), the instructions that collect the most samples, and the memory map
(global loads/stores, async copies, barriers, MMAs) with each line's index, so a stall can be
placed between the loads it waits for and the code that consumes them.

    python bench/ncu_sass.py SASS.csv[.xz] [--top 14] [--map] [--out SUMMARY.md]

CPU only (standard library).
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import lzma
import sys
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
# opcodes the memory map shows: what moves data or orders threads
MAP_OPS = ("LDG", "STG", "LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR", "HMMA", "SYNCS", "UTMALDG", "LDSM")


@dataclass
class Kernel:
    name: str
    header: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source: str) -> str:
    """'@!P0 LDG.E.128 R16, ...' -> 'LDG'."""
    parts = source.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0].split(".")[0] if parts else ""


def read_kernels(path: Path) -> list[Kernel]:
    raw = path.read_bytes()
    text = (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode()
    kernels: list[Kernel] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernels.append(Kernel(row[1] if len(row) > 1 else "?"))
        elif row[0] == "Address" and kernels:
            kernels[-1].header = row
        elif kernels and kernels[-1].header and len(row) == len(kernels[-1].header):
            kernels[-1].rows.append(dict(zip(kernels[-1].header, row, strict=True)))
    if not kernels:
        raise SystemExit(f"{path}: no 'Kernel Name' line: not `ncu --page source --csv` output")
    return kernels


def summarize(k: Kernel, top: int, show_map: bool) -> list[str]:
    rows = k.rows
    stalls = [c for c in k.header if c.startswith("stall_") and "Not Issued" not in c]
    samples = sum(number(r[SAMPLES]) for r in rows) or 1.0
    executed = sum(number(r[EXECUTED]) for r in rows) or 1.0
    out = [f"## {k.name[:120]}", ""]
    out.append(f"{len(rows)} SASS instructions, {executed:.4g} warp-instructions executed, "
               f"{samples:.0f} stall samples")  # fmt: skip
    by_reason = collections.Counter({c[6:]: sum(number(r[c]) for r in rows) for c in stalls})
    out.append("stall reasons: " + ", ".join(
        f"{c} {v / samples * 100:.1f} %" for c, v in by_reason.most_common(8)))  # fmt: skip
    ops_exec: collections.Counter[str] = collections.Counter()
    ops_samp: collections.Counter[str] = collections.Counter()
    for r in rows:
        ops_exec[opcode(r["Source"])] += number(r[EXECUTED])
        ops_samp[opcode(r["Source"])] += number(r[SAMPLES])
    out.append("opcodes by instructions executed: " + ", ".join(
        f"{o} {v / executed * 100:.1f} %" for o, v in ops_exec.most_common(12)))  # fmt: skip
    out.append("opcodes by stall samples: " + ", ".join(
        f"{o} {v / samples * 100:.1f} %" for o, v in ops_samp.most_common(10)))  # fmt: skip
    n = max(len(rows), 1)
    slices_s, slices_e = [0.0] * 20, [0.0] * 20
    for i, r in enumerate(rows):
        slices_s[i * 20 // n] += number(r[SAMPLES])
        slices_e[i * 20 // n] += number(r[EXECUTED])
    out.append("samples per twentieth of the listing (%): "
               + " ".join(f"{x / samples * 100:.0f}" for x in slices_s))  # fmt: skip
    out.append("executed per twentieth of the listing (%): "
               + " ".join(f"{x / executed * 100:.0f}" for x in slices_e))  # fmt: skip
    out += ["", "| index | samples % | main reason | instruction |", "|---|---|---|---|"]
    ranked = sorted(range(len(rows)), key=lambda i: -number(rows[i][SAMPLES]))[:top]
    for i in ranked:
        r = rows[i]
        reason = max(stalls, key=lambda c: number(r[c]))[6:] if stalls else "-"
        out.append(f"| {i} | {number(r[SAMPLES]) / samples * 100:.1f} | {reason} | "
                   f"`{r['Source'][:80]}` |")  # fmt: skip
    if show_map:
        out += ["", "memory map (index, opcode, warp-instructions executed, samples %):", "```"]
        previous = ""
        for i, r in enumerate(rows):
            op = opcode(r["Source"])
            if op not in MAP_OPS or (op in ("HMMA", "LDSM") and previous == op):
                continue
            previous = op
            share = number(r[SAMPLES]) / samples * 100
            executed_i = number(r[EXECUTED])
            out.append(f"{i:5d} {op:9s} {executed_i:9.0f} {share:5.1f}  {r['Source'][:70]}")
        out.append("```")
    return out + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--map", action="store_true", help="also the memory/barrier/MMA map")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    lines: list[str] = []
    for k in read_kernels(args.csv):
        lines += summarize(k, args.top, args.map)
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text + "\n")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
