"""Registers and spills of our kernel under each launch bound, and of flashinfer's, on the CPU.

CuTe-DSL compiles to sm_90a PTX without a GPU; a CUDA >= 12.9 `ptxas -v` (PTX 8.8) then reports
what each launch configuration costs in registers and spills. Launch bounds (`mbp`, min CTAs per
SM) are added to the PTX as `.minnctapersm N`, as the kernel's own launch does on a GPU. The
register count sets the CTAs per SM (65536 registers / (128 threads x registers)).

    python bench/ptxas_regs.py --late 0 1 3 --mbp 0 5 6 7 [--flashinfer] --out results/kernel/ptxas

No GPU needed. `--ptxas PATH` (default: `ptxas` on PATH, then /usr/local/cuda/bin/ptxas).
flashinfer's file comes from .gpu/fi (scripts/gpu-bundle.sh), compiled in the benchmarks' compact
mode at B=256 with its own launch bound (tools/e2e/fi_static_compile.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGS_PER_SM, THREADS = 65536, 128
MAX_CTAS_PER_SM = 32
REG_ALLOC_PER_THREAD = 8  # a warp's registers are allocated in units of 256
# H200 (sm_90): 227 KiB of shared memory per SM for CTAs at the largest carve-out, 1 KiB of it
# reserved per CTA (ncu: "Driver Shared Memory Per Block 1.02 KB"; results/kernel/k13)
SMEM_PER_SM, SMEM_RESERVED_PER_CTA = 232448, 1024


_LAUNCH_STRUCT = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64,"


def launch_smem_bytes(ir_text: str) -> int | None:
    """Dynamic shared memory of the kernel launch in a compiled function's lowered host IR: the
    i64 constant stored into field 2 of the launch-config struct (grid, block, smem bytes, ...).
    SSA names repeat across functions, so constants are tracked per function."""
    consts: dict[str, int] = {}
    fields: set[str] = set()
    for line in ir_text.splitlines():
        if "llvm.func" in line:
            consts, fields = {}, set()
        if m := re.match(r"\s*(%\d+) = llvm\.mlir\.constant\((\d+) : i64\) : i64", line):
            consts[m.group(1)] = int(m.group(2))
        elif (m := re.match(r"\s*(%\d+) = llvm\.getelementptr %\d+\[0, 2\] ", line)) and (
            _LAUNCH_STRUCT in line
        ):
            fields.add(m.group(1))
        elif (m := re.match(r"\s*llvm\.store (%\d+), (%\d+) : i64,", line)) and m.group(
            2
        ) in fields:
            return consts.get(m.group(1))
    return None


def ptxas_candidates(explicit: str | None = None) -> list[str]:
    """Existing ptxas binaries in the order they are tried: explicit, PATH's, /usr/local/cuda's."""
    cands = (explicit, shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas")
    return [c for c in cands if c and Path(c).is_file()]


def ptxas_reading_ptx88() -> str | None:
    """The first ptxas candidate from CUDA >= 12.9 (it reads CuTe-DSL 4.8's PTX 8.8), or None."""
    for cand in ptxas_candidates():
        out = subprocess.run([cand, "--version"], capture_output=True, text=True).stdout
        if "release 12.9" in out or "release 13" in out or "cuda_13" in out:
            return cand
    return None


def find_ptxas(explicit: str | None) -> str:
    ptxas = next(iter(ptxas_candidates(explicit)), None)
    if ptxas is None:
        raise SystemExit("no ptxas: pass --ptxas PATH (CUDA >= 12.9 reads CuTe-DSL 4.8's PTX 8.8)")
    return ptxas


def compile_for_sm90a(
    variants: list, dump: Path, kernel: Path, env: dict[str, str]
) -> subprocess.CompletedProcess:
    """Compile kernel variants (tests/kernels/_compile_variants.py's list) of `kernel` for sm_90a
    in a subprocess with `env`, keeping their PTX in `dump`; the finished process."""
    dump.mkdir(parents=True, exist_ok=True)
    env = env | {
        "CUTE_DSL_ARCH": "sm_90a",
        "CUTE_DSL_KEEP": "ptx",
        "CUTE_DSL_DUMP_DIR": str(dump),
        "GDN_UCACHE_KERNEL_FILE": str(kernel),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "tests/kernels/_compile_variants.py"), json.dumps(variants)],
        env=env,
        capture_output=True,
        text=True,
    )


def ours_ptx(
    late: int, T: int, HV: int, dump: Path, kernel: Path | None = None, bv: int = 128
) -> Path:
    """Compile our kernel file (default: the shipped one; BV rows per CTA, serving dtypes) in a
    subprocess and return its PTX."""
    res = compile_for_sm90a(
        [[T, 16, HV, bv, "bf16", "fp16", "fp16", 0]],
        dump,
        kernel or ROOT / "kernels/gdn_ucache_flush.py",
        dict(os.environ, GDN_UCACHE_LATE=str(late)),
    )
    res.check_returncode()
    (dump / "compile.json").write_text(res.stdout.strip().splitlines()[-1])
    (ptx,) = dump.glob("*.ptx")
    return ptx


def smem_info(dump: Path) -> dict[str, int | None]:
    """The dynamic shared memory ours_ptx's launch requests (compile.json beside the PTX) and the
    CTAs per SM it allows at the largest carve-out."""
    smem = json.loads((dump / "compile.json").read_text()).get("smem_bytes", [None])[0]
    ctas = None
    if smem is not None:
        ctas = min(MAX_CTAS_PER_SM, SMEM_PER_SM // (smem + SMEM_RESERVED_PER_CTA))
    return {"smem_bytes": smem, "ctas_by_smem": ctas}


def fi_ptx(dump: Path) -> Path:
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a")
    subprocess.run(
        [sys.executable, "-m", "tools.e2e.fi_static_compile", "--batches", "256", "--compact"]
        + ["--dump", str(dump)],
        env=env,
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    (ptx,) = dump.glob("*.ptx")
    return ptx


def with_bound(ptx_text: str, mbp: int) -> str:
    if mbp <= 0 or ".minnctapersm" in ptx_text:
        return ptx_text
    text, n = re.subn(
        r"^(\.reqntid 128, 1, 1)$", rf"\1\n.minnctapersm {mbp}", ptx_text, count=1, flags=re.M
    )
    if n != 1:
        raise ValueError("no `.reqntid 128, 1, 1` line to put the launch bound after")
    return text


def ctas_by_registers(regs: int) -> int:
    """CTAs of 128 threads per SM that `regs` registers per thread allow. The SM allocates a
    warp's registers in units of 256 (8 per thread), so 84 registers take 88: 5 CTAs, not 6
    (Nsight Compute's launch__occupancy_limit_registers; session 20, results/kernel/k22-h100)."""
    alloc = -(-regs // REG_ALLOC_PER_THREAD) * REG_ALLOC_PER_THREAD
    return min(MAX_CTAS_PER_SM, REGS_PER_SM // (alloc * THREADS))


def ptxas_info(
    ptxas: str, ptx_text: str, work: Path, options: tuple[str, ...] = ()
) -> dict[str, int]:
    """Registers, spills and CTAs per SM of one PTX; `options`: extra ptxas flags (as a kernel's
    compile passes them, e.g. next's TPROJ_PTXAS_OPTIONS)."""
    src, out = work / "k.ptx", work / "k.cubin"
    src.write_text(ptx_text)
    res = subprocess.run(
        [ptxas, "-arch=sm_90a", "-v", "-O3", *options, str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    log = res.stdout + res.stderr
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    spill_st = int(re.search(r"(\d+) bytes spill stores", log).group(1))
    spill_ld = int(re.search(r"(\d+) bytes spill loads", log).group(1))
    return {
        "registers": regs,
        "spill_stores": spill_st,
        "spill_loads": spill_ld,
        "ctas_by_regs": ctas_by_registers(regs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--late", nargs="+", type=int, default=[0, 1, 3])
    ap.add_argument("--mbp", nargs="+", type=int, default=[0, 5, 6, 7])
    ap.add_argument("--T", type=int, default=4)
    ap.add_argument("--hv", type=int, default=32)
    ap.add_argument("--bv", type=int, default=128, choices=(16, 32, 64, 128))
    ap.add_argument("--kernel", type=Path, default=ROOT / "kernels/gdn_ucache_flush.py")
    ap.add_argument("--flashinfer", action="store_true", help="also flashinfer's kernel (B=256)")
    ap.add_argument("--ptxas", default=None)
    ap.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args(argv)
    ptxas = find_ptxas(args.ptxas)
    version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for late in args.late:
            text = ours_ptx(
                late, args.T, args.hv, work / f"late{late}", args.kernel, args.bv
            ).read_text()
            smem = smem_info(work / f"late{late}")
            for mbp in args.mbp:
                rows.append({"kernel": args.kernel.name, "late": late, "mbp": mbp}
                            | ptxas_info(ptxas, with_bound(text, mbp), work) | smem)  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
        if args.flashinfer:
            text = fi_ptx(work / "fi").read_text()
            bound = re.search(r"^\.minnctapersm (\d+)$", text, re.M)
            rows.append({"kernel": "flashinfer (compact, B=256)", "late": None,
                         "mbp": int(bound.group(1)) if bound else 0}
                        | ptxas_info(ptxas, text, work))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        knobs = {k: v for k, v in sorted(os.environ.items()) if k.startswith("GDN_UCACHE_")}
        meta = {
            "argv": sys.argv,
            "env": knobs,
            "ptxas": version.strip().splitlines()[-1],
            "T": args.T,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        lines = [
            f"# ptxas -v of the kernels (sm_90a, T={args.T}, HV={args.hv}, BV={args.bv}, "
            "serving dtypes)",
            "",
            "Command: `"
            + "".join(f"{k}={v} " for k, v in knobs.items())
            + f"python {' '.join(sys.argv)}` ({meta['ptxas']})",
            "",
            "Bound `none` = `+mbp0` in a launch-config string. A string without `mbp` does not "
            "mean none: explicit knobs switch the launch table off and launch_config's default "
            "bound applies (4 CTAs/SM at BV=128, T <= 4).",
            "",
            "| kernel | late tiles | launch bound (CTAs/SM) | registers | spill stores / loads (B) "
            "| CTAs/SM by registers | shared memory (B) | CTAs/SM by shared memory |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            late = "-" if r["late"] is None else r["late"]
            lines.append(
                f"| {r['kernel']} | {late} | {r['mbp'] or 'none'} | {r['registers']} | "
                f"{r['spill_stores']} / {r['spill_loads']} | {r['ctas_by_regs']} | "
                f"{r.get('smem_bytes') or '-'} | {r.get('ctas_by_smem') or '-'} |"
            )
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
