"""Does a kernel refactor change any compiled code? Compare PTX, configuration by configuration.

A change meant to be behaviour-preserving (removing dead launch modes, renaming, moving code into
helpers, adding a knob that is off by default) is proven on the CPU, without a GPU, when every
kept configuration compiles to byte-identical PTX before and after:

    python bench/ptx_gate.py --kernel kernels/gdn_ucache_flush_next.py --ref HEAD [--quick]
    python bench/ptx_gate.py --kernel NEW.py --old OLD.py --configs late13_bv128 late3_bv128

Each side compiles in fresh processes (CUTE_DSL_ARCH=sm_90a, PTX kept, file caching off, a cache
directory per configuration) from the same file path, since the kernel's name and debug lines
may hold it. Prints one line per configuration and exits 1 if any PTX differs or fails to build.
Session 12's cleanup of next (38 configurations, results/kernel/cleanup-s12) ran this check.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ptxas_regs import compile_for_sm90a  # noqa: E402

SERVING = ("bf16", "fp16", "fp16")
BF16 = ("bf16", "bf16", "bf16")


def _config(
    late: int,
    bv: int = 128,
    T: int = 4,
    dtypes: tuple[str, str, str] = SERVING,
    sr: int = 0,
    persist: int = 0,
    prefetch: int = 0,
    vec_qk: int = 1,
    **env: str,
) -> tuple[list, dict[str, str]]:
    """One compile: _compile_variants.py's variant entry and the knob environment."""
    variant = [T, 16, 32, bv, *dtypes, sr, late, persist, prefetch, vec_qk]
    knobs = {f"GDN_UCACHE_{k.upper()}": v for k, v in env.items()}
    if sr:
        knobs["GDN_UCACHE_STATE_SR"] = "1"
    return variant, knobs


# every mode of next the launch table or a knob can reach, at the shapes that change its code
CONFIGS: dict[str, tuple[list, dict[str, str]]] = {
    **{f"late{late}_bv{bv}": _config(late, bv) for late in (0, 1, 3) for bv in (32, 64, 128)},
    "late2_bv128": _config(2),
    "late1_bv128_T8": _config(1, T=8),
    **{f"late{late}_bv{bv}": _config(late, bv) for late in (10, 13) for bv in (64, 128)},
    **{f"late{late}_bv128_T{T}": _config(late, T=T) for late in (10, 13) for T in (2, 8)},
    "late13_bv128_nosplit": _config(13, xsplit="0"),
    "late13_bv128_regfrag": _config(13, bsmem="0"),
    "late13_bv128_scalar_qk": _config(13, vec_qk=0),
    "late13_bv128_ring_ne_state": _config(13, dtypes=("bf16", "bf16", "fp16")),
    **{f"late{late}_bv128_bf16": _config(late, dtypes=BF16) for late in (0, 10, 13)},
    "late0_bv128_persist_pf1": _config(0, persist=1, prefetch=1),
    "late0_bv128_persist_pf2": _config(0, persist=1, prefetch=2),
    "late3_bv128_persist_pf2": _config(3, persist=1, prefetch=2),
    "late3_bv128_sr": _config(3, sr=1),
    "late13_bv128_sr": _config(13, sr=1),
    "late13_bv128_t1early": _config(13, t1early="1"),
    "late10_bv128_t1early_t1l2": _config(10, t1early="1", t1l2="1"),
    "late13_bv128_wvearly": _config(13, wvearly="1"),
    "late3_bv128_wvearly": _config(3, wvearly="1"),
    "late13_bv128_xpf8": _config(13, xpf="8"),
    "late13_bv128_actfirst": _config(13, actfirst="1"),
    "late3_bv128_actfirst_xpf8": _config(3, actfirst="1", xpf="8"),
    "late13_bv128_T8_all_knobs": _config(
        13, T=8, xpf="8", actfirst="1", t1early="1", t1l2="1", wvearly="1"
    ),
    "late10_bv128_no_fold": _config(10, skip="fold"),
    "late13_bv128_alias_pad4096": _config(13, skip="alias,pad4096"),
    # session 17: chain (late13 with persistent CTAs)
    "late13_bv128_chain": _config(13, persist=1, t1early="1", t1l2="1", wvearly="1"),
    "late13_bv128_chain_dsreg": _config(13, persist=1, t1early="1", t1l2="1", dsreg="1"),
    "late13_bv128_chain_nextl2": _config(13, persist=1, t1early="1", t1l2="1", nextl2="1"),
    # session 19: nobar's CTA barrier after tile 0; tepi (each tile's epilogue after its turn)
    "late13_bv128_nobar": _config(13, t1early="1", t1l2="1", wvearly="1", nobar="1"),
    "late13_bv128_tepi": _config(13, t1early="1", t1l2="1", wvearly="1", tepi="1"),
    "late13_bv128_tepi_dsreg": _config(13, t1early="1", t1l2="1", tepi="1", dsreg="1"),
    "late10_bv128_tepi": _config(10, t1early="1", tepi="1"),
    "late13_bv128_T8_tepi": _config(13, T=8, t1early="1", tepi="1"),
    "late13_bv128_no_epistore": _config(13, skip="epistore"),
    "late13_bv128_no_epimath": _config(13, skip="epimath"),
    # session 20: afe (phase 5 before the state), ostage (16-byte result rows), stef (evict-first)
    "late13_bv128_afe": _config(13, t1early="1", t1l2="1", wvearly="1", afe="1"),
    "late10_bv128_afe_ostage": _config(10, afe="1", ostage="1"),
    "late10_bv128_ostage": _config(10, ostage="1"),
    "late13_bv128_T8_ostage": _config(13, T=8, t1early="1", ostage="1"),
    "late13_bv64_ostage": _config(13, bv=64, ostage="1"),
    "late3_bv128_ostage": _config(3, ostage="1"),
    "late13_bv128_stef": _config(13, t1early="1", t1l2="1", wvearly="1", stef="1"),
    # session 21: tproj (the transposed projection); bf16 = late13's direct phase-1 writes
    "late13_bv128_tproj": _config(13, t1early="1", t1l2="1", wvearly="1", tproj="1"),
    "late13_bv128_bf16_tproj": _config(13, dtypes=BF16, t1early="1", tproj="1"),
    "late10_bv128_tproj": _config(10, tproj="1"),
    "late13_bv64_tproj": _config(13, bv=64, tproj="1"),
    "late13_bv128_T8_tproj": _config(13, T=8, t1early="1", tproj="1"),
}
QUICK = (
    "late0_bv32",
    "late3_bv128",
    "late10_bv128",
    "late13_bv128",
    "late13_bv64",
    "late13_bv128_T8",
    "late0_bv128_persist_pf2",
    "late13_bv128_t1early",
)


def build(kernel: Path, name: str, out: Path) -> str:
    """Compile one configuration of `kernel` into out/name; its PTX's sha256 (or 'error: ...')."""
    variant, knobs = CONFIGS[name]
    dump = out / name
    shutil.rmtree(dump, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDN_UCACHE_")}
    env |= knobs | {
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "CUTE_DSL_CACHE_DIR": str(dump / "cache"),
    }
    proc = compile_for_sm90a([variant], dump, kernel, env)
    shutil.rmtree(dump / "cache", ignore_errors=True)
    ptx = sorted(dump.glob("*.ptx"))
    if proc.returncode != 0 or len(ptx) != 1:
        return "error: " + (proc.stdout + proc.stderr).strip().splitlines()[-1:][0][:200]
    return hashlib.sha256(ptx[0].read_bytes()).hexdigest()


def gate(old: Path, new: Path, names: list[str], jobs: int, work: Path) -> dict[str, tuple]:
    """{name: (old hash, new hash)}: both files compiled from one path, work/<file name>."""
    fixed = work / "src" / new.name
    fixed.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, list[str]] = {name: [] for name in names}
    for side, src in (("old", old), ("new", new)):
        shutil.copyfile(src, fixed)
        with ThreadPoolExecutor(jobs) as pool:
            hashes = pool.map(lambda n, s=side: build(fixed, n, work / s), names)
            for name, digest in zip(names, hashes, strict=True):
                result[name].append(digest)
    return {name: tuple(pair) for name, pair in result.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", type=Path, required=True, help="the changed kernel file")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--ref", help="git revision holding the old version of --kernel")
    which.add_argument("--old", type=Path, help="the old version as a file")
    ap.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), help="default: all")
    ap.add_argument("--quick", action="store_true", help=f"only {len(QUICK)} configurations")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    names = args.configs or list(QUICK if args.quick else CONFIGS)
    with tempfile.TemporaryDirectory(prefix="ptx-gate-") as tmp:
        work = Path(tmp)
        old = args.old
        if args.ref:
            rel = args.kernel.resolve().relative_to(ROOT)
            text = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{args.ref}:{rel}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            old = work / "ref" / args.kernel.name
            old.parent.mkdir()
            old.write_text(text)
        results = gate(old, args.kernel, names, args.jobs, work)
    bad = 0
    for name, (a, b) in results.items():
        if a.startswith("error") or b.startswith("error"):
            verdict, bad = f"ERROR old={a[:60]} new={b[:60]}", bad + 1
        elif a == b:
            verdict = f"identical  {a[:12]}"
        else:
            verdict, bad = f"DIFFERS    {a[:12]} -> {b[:12]}", bad + 1
        print(f"{name:32s} {verdict}")
    print(f"{len(results) - bad}/{len(results)} configurations byte-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
