"""Does a change to the kernel's host-side rules keep every compiled variant? Compare two kernel
files on random compile requests, without compiling.

ptx_gate.py proves a refactor byte for byte on ~60 chosen configurations (minutes per run).
This check covers the rules that pick a variant (knob applicability, the cache key): it replaces
cute.compile by capturing the kernel object, sends thousands of random requests (shape, dtypes,
launch mode, persistent CTAs, prefetch, every knob as argument or GDN_UCACHE_* override) to both
files' compile_variant, and requires for each request the same outcome (the same error, or kernel
objects with equal attributes) and that both files' caches group the requests alike. Equal
attributes mean equal device code: the device code reads only the object's attributes.

With --launch it checks the step before instead: random launches (batch, heads, T, q/k/out
alignment, GDN_UCACHE_* table overrides) through both files' _launch, with compile_variant
replaced by capturing its arguments: the same call in both (launch_config and the table).

    python bench/flags_equiv.py OLD.py kernels/gdn_ucache_flush_next.py [--seed 1] [-n 5000]
    python bench/flags_equiv.py OLD.py kernels/gdn_ucache_flush_next.py --launch
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

KNOBS = (
    "t1early", "t1l2", "wvearly", "actfirst", "dsreg", "nobar", "nextl2", "tepi", "afe",
    "ostage", "stef", "tproj",
)  # fmt: skip
DTYPES = (torch.bfloat16, torch.float16)


class CaptureCompile:
    """Stands in for cute.compile (and cute.compile[options]): returns the kernel object."""

    def __getitem__(self, _options: Any) -> CaptureCompile:
        return self

    def __call__(self, kern: Any, *args: Any) -> Any:
        return kern


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _cross_compile_env() -> Iterator[None]:
    """CUTE_DSL_ARCH=sm_90a for the block; the caller's environment back after it (the knob
    variables each request sets included)."""
    saved = dict(os.environ)
    os.environ["CUTE_DSL_ARCH"] = "sm_90a"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _set_knob_env(env: dict[str, str]) -> None:
    """Exactly these GDN_UCACHE_* variables for the next request."""
    for k in [k for k in os.environ if k.startswith("GDN_UCACHE_")]:
        del os.environ[k]
    os.environ.update(env)


def _request(rng: random.Random) -> tuple[tuple, dict[str, Any], dict[str, str]]:
    """One random compile request: positional args, keyword args, GDN_UCACHE_* environment."""
    args = (
        rng.randint(2, 8),
        16,
        32,
        rng.choice([16, 32, 64, 128]),
        *(rng.choice(DTYPES) for _ in range(3)),
        False,
        False,
    )
    kwargs: dict[str, Any] = dict(
        mbp=0,
        late=rng.choice([0, 1, 2, 3, 10, 13]),
        persist=rng.random() < 0.3,
        prefetch=rng.choice([0, 0, 1, 2]),
        vec_qk=rng.random() < 0.8,
        xpf=rng.choice([0, 0, 8]),
    )
    kwargs |= {k: rng.random() < 0.4 for k in KNOBS}
    env = {}
    for var in ("GDN_UCACHE_XSPLIT", "GDN_UCACHE_BSMEM"):
        if rng.random() < 0.3:
            env[var] = rng.choice(["0", "1"])
    for k in KNOBS:
        if rng.random() < 0.05:
            env[f"GDN_UCACHE_{k.upper()}"] = rng.choice(["0", "1"])
    return args, kwargs, env


def _outcome(module: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", module.compile_variant(*args, **kwargs)
    except (ValueError, AssertionError) as e:
        return "error", f"{type(e).__name__}: {e}"


def compare(old_path: Path, new_path: Path, n: int, seed: int) -> tuple[bool, str]:
    """(equivalent, one summary line) over n random requests."""
    import cutlass.cute as cute

    saved_compile = cute.compile
    cute.compile = CaptureCompile()
    try:
        with _cross_compile_env():
            return _compare(old_path, new_path, n, seed)
    finally:  # callers in one process (the tests) get cute.compile back
        cute.compile = saved_compile


def _compare(old_path: Path, new_path: Path, n: int, seed: int) -> tuple[bool, str]:
    old, new = load_module(old_path, "flags_equiv_old"), load_module(new_path, "flags_equiv_new")
    rng = random.Random(seed)
    groups: tuple[dict[int, list[int]], dict[int, list[int]]] = ({}, {})
    errors = 0
    for i in range(n):
        args, kwargs, env = _request(rng)
        _set_knob_env(env)
        (sa, a), (sb, b) = _outcome(old, args, kwargs), _outcome(new, args, kwargs)
        if sa != sb or (sa == "error" and a != b):
            return False, f"request {i} {args} {kwargs} {env}: {sa} {a!s:.200} vs {sb} {b!s:.200}"
        if sa == "error":
            errors += 1
            continue
        if vars(a) != vars(b):
            diff = {k for k in vars(a).keys() | vars(b).keys() if vars(a).get(k) != vars(b).get(k)}
            return False, f"request {i} {args} {kwargs} {env}: attributes differ: {sorted(diff)}"
        groups[0].setdefault(id(a), []).append(i)
        groups[1].setdefault(id(b), []).append(i)
    same = sorted(groups[0].values()) == sorted(groups[1].values())
    line = (
        f"{n - errors} requests compiled to kernel objects with equal attributes, {errors} "
        f"refused alike; cache entries {len(groups[0])} / {len(groups[1])}; same grouping: {same}"
    )
    return same, line


class _Called(Exception):
    """compile_variant's arguments, raised from the launch path before anything compiles."""


def _capture_call(*args: Any, **kwargs: Any) -> None:
    raise _Called(args, kwargs)


def _launch_env(rng: random.Random) -> dict[str, str]:
    env = {}
    for k in KNOBS:
        if rng.random() < 0.3:
            env[f"GDN_UCACHE_{k.upper()}"] = rng.choice(["0", "1"])
    for var, values in (
        ("GDN_UCACHE_XPF", ["0", "4", "8"]),
        ("GDN_UCACHE_LATE", ["0", "3", "10", "13"]),
        ("GDN_UCACHE_BV", ["32", "64", "128"]),
        ("GDN_UCACHE_PERSIST", ["0", "6"]),
        ("GDN_UCACHE_VEC_QK", ["0"]),
    ):
        if rng.random() < 0.2:
            env[var] = rng.choice(values)
    return env


def _call_outcome(module: Any, tensors: tuple, T: int, HV: int) -> tuple[str, Any]:
    q, k, v, out = tensors
    try:
        module._launch(q, k, v, *[None] * 11, out, 9, 1.0, T, 16, HV, False)
    except _Called as call:
        args, kwargs = call.args
        # the knobs as compile_variant reads them (bool(); xpf, mbp, late, prefetch as ints)
        ints = ("xpf", "mbp", "late", "prefetch")
        return "call", (args, {n: int(x) if n in ints else bool(x) for n, x in kwargs.items()})
    except (ValueError, AssertionError) as e:
        return "error", f"{type(e).__name__}: {e}"
    return "no call", None


def compare_launch(old_path: Path, new_path: Path, n: int, seed: int) -> tuple[bool, str]:
    """(equivalent, one summary line) over n random launches."""
    with _cross_compile_env():
        return _compare_launch(old_path, new_path, n, seed)


def _compare_launch(old_path: Path, new_path: Path, n: int, seed: int) -> tuple[bool, str]:
    old, new = load_module(old_path, "launch_equiv_old"), load_module(new_path, "launch_equiv_new")
    old.compile_variant = new.compile_variant = _capture_call
    rng = random.Random(seed)
    buf = torch.zeros(1 << 26, dtype=torch.bfloat16)
    calls: set[str] = set()
    for i in range(n):
        env = _launch_env(rng)
        _set_knob_env(env)
        B, HV = rng.choice([1, 8, 32, 64, 128, 256, 512]), rng.choice([32, 48, 64])
        T = rng.randint(2, 8)

        def rows(heads: int, B: int = B, T: int = T) -> torch.Tensor:
            off = rng.choice([0, 0, 0, 1])  # 1: a 2-byte offset, no 16-byte rows
            return buf[off : off + B * T * heads * 128].view(B, T, heads, 128)

        tensors = (rows(16), rows(16), rows(HV), rows(HV))
        a = _call_outcome(old, tensors, T, HV)
        b = _call_outcome(new, tensors, T, HV)
        if a != b:
            where = f"launch {i} B={B} HV={HV} T={T} {env}"
            if a[0] == b[0] == "call" and a[1][0] == b[1][0]:
                kw_a, kw_b = a[1][1], b[1][1]
                diff = {n: (kw_a.get(n), kw_b.get(n)) for n in kw_a.keys() | kw_b.keys()}
                diff = {n: d for n, d in sorted(diff.items()) if d[0] != d[1]}
                return False, f"{where}: compile_variant arguments differ: {diff}"
            return False, f"{where}: {a!s:.300} vs {b!s:.300}"
        if a[0] == "call":
            calls.add(repr(a[1]))
    return True, f"{n} launches made the same compile_variant call ({len(calls)} distinct)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("-n", type=int, default=5000, help="random requests")
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh one (printed)")
    ap.add_argument("--launch", action="store_true", help="check the launch path instead")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    ok, line = (compare_launch if args.launch else compare)(args.old, args.new, args.n, seed)
    print(f"seed {seed}: {line}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
