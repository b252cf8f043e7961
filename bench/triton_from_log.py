"""Rebuild bench_triton's result files from the stdout of a bench/h200_triton.sh run.

The device tool returns a limited number of files; the script's stdout (every printed table) is
always among them. This parses the sweep table, the chosen configs and the grid table of that log
and writes the same sweep_triton.{json,md} and bench_triton.{json,md,png} the run wrote on the
host. Times are the printed ones (0.1 us in the sweep, 0.01 us in the grid); floors are recomputed.

    python bench/triton_from_log.py /tmp/gpu-out/triton/triton.log --out results/triton \
        --device "NVIDIA H200" --torch 2.11.0+cu130 --triton 3.6.0 --python 3.12.3
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_triton  # noqa: E402

CONFIG_NAME = re.compile(r"v\d+k\d+w\d+s\d+(?:r\d+)?|v1|default")
NUMBER = re.compile(r"(-|[\d.]+)(\*?)")
RUN_COMMAND = (
    "python3 bench/bench_triton.py --out $OUT/triton --deadline-s 95 --warm-timeout-s 40 "
    "--v1-root .gpu/series-vllm-v1  (from bench/h200_triton.sh)"
)


def parse_log(text: str) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
    """(sweep rows, chosen config names per regime/ckpt, grid rows) of one run's stdout."""
    lines = text.splitlines()
    sweep_rows: list[dict[str, Any]] = []
    chosen: dict[str, str] = {}
    grid_rows: list[dict[str, Any]] = []
    names: list[str] = []
    section = ""
    for line in lines:
        if line.startswith("# sweep"):
            section = "sweep"
            continue
        if line.lstrip().startswith("HV") and "triton_fp32ckpt" in line:
            section = "grid"
            continue
        if section == "sweep" and line.lstrip().startswith("HV") and " ckpt " in line:
            names = CONFIG_NAME.findall(line.split("ckpt", 1)[1])
            continue
        chosen_match = re.match(r"# (\w+/fp\d+): (\S+) \(geomean", line)
        if chosen_match:
            chosen[chosen_match.group(1)] = chosen_match.group(2)
            continue
        fields = line.split()
        if section == "sweep" and len(fields) >= 5 and fields[3] in ("fp32", "fp16"):
            hv, B, frac = (int(x) for x in fields[:3])
            values = NUMBER.findall(line.split(fields[3], 1)[1])
            if len(values) != len(names):
                raise ValueError(f"sweep row has {len(values)} values for {names}: {line}")
            us = {n: float(v) for n, (v, _) in zip(names, values, strict=True) if v != "-"}
            sweep_rows.append(
                dict(HV=hv, B=B, flush_pct=frac, ckpt=fields[3], regime=bench_triton.regime(B, hv),
                     us=us)
            )  # fmt: skip
        elif section == "grid" and len(fields) == 16 and fields[0].isdigit():
            hv, B, frac = (int(x) for x in fields[:3])
            times = [float(fields[i]) for i in (5, 7, 9, 11)]
            us = dict(zip(bench_triton.ARMS, times, strict=True))
            grid_rows.append(dict(HV=hv, B=B, flush_pct=frac, us=us))
    return sweep_rows, chosen, grid_rows


def config_fields(name: str) -> dict[str, int | None]:
    match = re.fullmatch(r"v(\d+)k(\d+)w(\d+)s(\d+)(?:r(\d+))?", name)
    if match is None:
        raise ValueError(f"not a launch-config name: {name}")
    block_v, block_k, warps, stages, regs = match.groups()
    return dict(
        block_v=int(block_v), block_k=int(block_k), num_warps=int(warps),
        num_stages=int(stages), max_registers=int(regs) if regs else None,
    )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--torch", default="2.11.0+cu130")
    ap.add_argument("--triton", default="3.6.0")
    ap.add_argument("--python", default="3.12.3")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--T", type=int, default=4)
    args = ap.parse_args()
    text = args.log.read_text()
    sweep_rows, chosen_names, grid_rows = parse_log(text)
    chosen = {key: config_fields(name) for key, name in chosen_names.items()}
    wall = re.search(r"# wall ([\d.]+) s", text)
    kernel = "patch 1 (this series)"
    if "grid Triton columns: v1" in text:
        kernel = "v1 (session-1 kernel; the series' kernel failed)"

    def meta(_: argparse.Namespace, wall_s: float) -> dict[str, Any]:
        return dict(
            command=RUN_COMMAND,
            reconstructed_from=f"{args.log.name} (stdout of bench/h200_triton.sh)",
            device=args.device,
            torch=args.torch,
            triton=args.triton,
            python=args.python,
            wall_s=wall_s,
            reps=args.reps,
            p_verify=bench_triton.P_VERIFY,
            p_flush=bench_triton.P_FLUSH,
            hbm_bytes_per_s=bench_triton.HBM_BYTES_PER_S,
            triton_kernel=kernel,
        )

    bench_triton.meta = meta  # type: ignore[assignment]
    results = []
    for row in grid_rows:
        hv, B, frac = row["HV"], row["B"], row["flush_pct"]
        n_flush = int(round(frac / 100 * B))
        floors = {
            "fp16ckpt": bench_triton.floor_us(B, args.H, hv, args.T, n_flush, 2),
            "fp32ckpt": bench_triton.floor_us(B, args.H, hv, args.T, n_flush, 4),
        }
        floor_of = {"triton_fp32ckpt": floors["fp32ckpt"]}
        x = {arm: us / floor_of.get(arm, floors["fp16ckpt"]) for arm, us in row["us"].items()}
        regime = bench_triton.regime(B, hv)
        configs = {c: chosen_names.get(f"{regime}/{c}", "-") for c in ("fp32", "fp16")}
        results.append(
            dict(HV=hv, H=args.H, T=args.T, B=B, flush_pct=frac, n_flush=n_flush,
                 floor_us=floors, us=row["us"], x=x, errors={}, triton_config=configs)
        )  # fmt: skip
    out_args = argparse.Namespace(out=args.out, reps=args.reps, triton_kernel=kernel)
    bench_triton.write_sweep(out_args, sweep_rows, chosen)
    bench_triton.write_grid(out_args, results, chosen, float(wall.group(1)) if wall else 0.0)
    print(f"{len(sweep_rows)} sweep rows, {len(results)} grid rows -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
