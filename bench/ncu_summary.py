"""Compact table of an `ncu --page raw --csv` export (bench/h200_run.sh k3): one line per profiled
launch with its time, occupancy, registers, and its five largest stall reasons
(warps stalled per issued instruction, ncu's smsp__average_warps_issue_stalled_* ratios).

    python3 bench/ncu_summary.py ncu-raw.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

STALL, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
COLUMNS = {
    "us": "gpu__time_duration.sum",
    "warps%": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "regs": "launch__registers_per_thread",
    "ctas/SM(reg)": "launch__occupancy_limit_registers",
    # how close to HBM bandwidth the launch streams (k8): '-' where the export lacks the metric
    "dram%": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram MB": "dram__bytes.sum",
    "L2 hit%": "lts__t_sector_hit_rate.pct",
    # session 20: the L2's own load (k15/k22: ~90 % for both kernels on the H200, where it binds)
    # and its write sectors (16-bit stores write half-sectors: twice the sectors of 16-byte ones)
    "L2%": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "L2 wr Msec": "lts__t_sectors_op_write.sum",
    # session 21: warp instructions executed (k15: the table issues 14-18 % more than flashinfer)
    "Minst": "smsp__inst_executed.sum",
}

# ncu's export unit per value -> the column's unit (us, MB); units not listed are the column's
UNIT_SCALE = {
    "gpu__time_duration.sum": {"nsecond": 1e-3, "msecond": 1e3},
    "dram__bytes.sum": {"byte": 1e-6, "kbyte": 1e-3, "gbyte": 1e3},
    "lts__t_sectors_op_write.sum": {"sector": 1e-6, "ksector": 1e-3, "msector": 1.0},
    "smsp__inst_executed.sum": {"inst": 1e-6, "kinst": 1e-3, "minst": 1.0, "ginst": 1e3},
}


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarize(path: Path) -> list[str]:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return [f"# {path}: no profiled launches"]
    rows = list(csv.reader(lines))
    header, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    name_col = col.get("Kernel Name", 0)
    out = ["| launch | " + " | ".join(COLUMNS) + " | top stalls (warps per issue) |",
           "|---" * (len(COLUMNS) + 2) + "|"]  # fmt: skip
    for r in data:
        cells = []
        for metric in COLUMNS.values():
            i = col.get(metric)
            v = _num(r[i]) if i is not None else None
            if v is not None and metric in UNIT_SCALE:
                v *= UNIT_SCALE[metric].get(units[i].strip().lower(), 1.0)
            cells.append("-" if v is None else f"{v:.4g}")
        stalls = []
        for name, i in col.items():
            if name.startswith(STALL) and name.endswith(STALL_SUFFIX):
                v = _num(r[i])
                if v:
                    stalls.append((v, name[len(STALL) : -len(STALL_SUFFIX)]))
        top = ", ".join(f"{n} {v:.2f}" for v, n in sorted(stalls, reverse=True)[:5])
        label = r[name_col].split("/kernel")[0][:48]  # the NVTX range name, not the mangled symbol
        out.append(f"| {label} | " + " | ".join(cells) + f" | {top} |")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    print("\n".join(summarize(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
