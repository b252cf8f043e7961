"""The kernel's load-order / epilogue knobs (t1early ... tproj): `resolve_flags` keeps each only in
the launch modes that have it, the kernel object reads exactly what it resolved, and requests that
resolve alike share one compile-cache entry. The CuTe-DSL compile itself is replaced by capturing
the kernel object, so each request costs milliseconds (test_module_cpu.py compiles for real)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bench.flags_equiv import CaptureCompile, load_module

REPO = Path(__file__).resolve().parents[2]
KERNEL_FILES = [
    REPO / "kernels" / "gdn_ucache_flush.py",
    REPO / "kernels" / "gdn_ucache_flush_next.py",
]
ALL = dict(
    t1early=True, t1l2=True, wvearly=True, xpf=8, actfirst=True, dsreg=True, nobar=True,
    nextl2=True, tepi=True, ostage=True, stef=True, afe=True, tproj=True,
)  # fmt: skip


@pytest.fixture(params=KERNEL_FILES, ids=lambda p: p.stem)
def kmod(request: pytest.FixtureRequest) -> Any:
    module = load_module(request.param, f"gdnu_flags_{request.param.stem}")
    if not hasattr(module, "resolve_flags"):
        pytest.skip(f"{request.param.name} predates resolve_flags")
    return module


def _on(flags: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(flags).items() if v}


@pytest.mark.parametrize(
    ("case", "T", "BV", "late", "persist", "asked", "expected"),
    [
        # a register mode keeps only the knobs that do not need the bulk stage
        (
            "late3",
            4,
            128,
            3,
            False,
            ALL,
            dict(wvearly=True, actfirst=True, nobar=True, ostage=True),
        ),
        # dsreg (no ds rows) rules out ostage, afe and tproj; tepi still applies
        (
            "late13 all",
            4,
            128,
            13,
            False,
            ALL,
            dict(
                t1early=True,
                t1l2=True,
                wvearly=True,
                xpf=8,
                actfirst=True,
                dsreg=True,
                nobar=True,
                tepi=True,
                stef=True,
            ),
        ),
        # without dsreg: tepi rules out afe, and tproj comes back
        (
            "late13 no dsreg",
            4,
            128,
            13,
            False,
            ALL | dict(dsreg=False),
            dict(
                t1early=True,
                t1l2=True,
                wvearly=True,
                xpf=8,
                actfirst=True,
                nobar=True,
                tepi=True,
                ostage=True,
                stef=True,
                tproj=True,
            ),
        ),
        # afe alone (v12b's B=32 entry with ostage: v12c)
        (
            "late10 afe",
            4,
            128,
            10,
            False,
            dict(t1early=True, afe=True, ostage=True),
            dict(t1early=True, afe=True, ostage=True),
        ),
        # T > 4 (two n-tiles): no dsreg, afe or tproj
        ("late13 T8", 8, 128, 13, False, dict(dsreg=True, afe=True, tproj=True), dict()),
        # BV=64: no dsreg, tepi or afe; nobar and ostage stay (every warp owns its tiles)
        (
            "late13 bv64",
            4,
            64,
            13,
            False,
            dict(dsreg=True, tepi=True, t1early=True, afe=True, nobar=True, ostage=True),
            dict(t1early=True, nobar=True, ostage=True),
        ),
        # chain (bulk + persistent CTAs): nextl2 yes; actfirst, xpf, tepi, afe no
        (
            "chain",
            4,
            128,
            13,
            True,
            ALL | dict(dsreg=False),
            dict(
                t1early=True,
                t1l2=True,
                wvearly=True,
                nobar=True,
                nextl2=True,
                ostage=True,
                stef=True,
                tproj=True,
            ),
        ),
        # register-mode persistent CTAs: none of the one-row knobs
        ("late0 persist", 4, 128, 0, True, ALL, dict(ostage=True)),
    ],  # fmt: skip
)
def test_each_knob_applies_only_where_its_mode_has_it(
    kmod: Any, case: str, T: int, BV: int, late: int, persist: bool, asked: dict, expected: dict
) -> None:
    assert _on(kmod.resolve_flags(T, BV, late, persist, True, True, **asked)) == expected, case


def test_tproj_needs_the_smem_fragments_and_the_split(kmod: Any) -> None:
    for bsmem, xsplit in ((False, True), (True, False)):
        assert not kmod.resolve_flags(4, 128, 13, False, bsmem, xsplit, tproj=True).tproj
    assert kmod.resolve_flags(4, 128, 13, False, True, True, tproj=True).tproj


def test_the_kernel_reads_what_was_resolved_and_alike_requests_share_an_entry(
    kmod: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cute = pytest.importorskip("cutlass.cute")
    monkeypatch.setattr(cute, "compile", CaptureCompile())
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    for var in ("GDN_UCACHE_LATE", "GDN_UCACHE_XSPLIT", "GDN_UCACHE_BSMEM", "GDN_UCACHE_AFE"):
        monkeypatch.delenv(var, raising=False)
    kmod._CACHE.clear()
    # late3 has no bulk stage: asking for t1early / stef compiles the plain late3 variant
    plain = kmod.compile_variant(4, 16, 32, 128, late=3)
    assert kmod.compile_variant(4, 16, 32, 128, late=3, t1early=True, stef=True) is plain
    assert len(kmod._CACHE) == 1
    # every knob asked of late13: the object holds exactly resolve_flags' answer
    kern = kmod.compile_variant(4, 16, 32, 128, late=13, **(ALL | dict(dsreg=False)))
    want = kmod.resolve_flags(4, 128, 13, False, True, True, **(ALL | dict(dsreg=False)))
    assert {f: getattr(kern, f) for f in dataclasses.asdict(want)} == dataclasses.asdict(want)
    # the environment overrides an argument (GDN_UCACHE_AFE=1 on late10 + t1early)
    monkeypatch.setenv("GDN_UCACHE_AFE", "1")
    assert kmod.compile_variant(4, 16, 32, 128, late=10, t1early=True).afe
    assert len(kmod._CACHE) == 3


def test_flags_equiv_passes_a_file_and_catches_a_changed_rule(tmp_path: Path) -> None:
    """bench/flags_equiv.py (the check a refactor of these rules runs beside ptx_gate.py): a file
    against itself is equivalent; dropping afe's `not tepi` is caught."""
    pytest.importorskip("cutlass.cute")
    from bench.flags_equiv import compare

    nxt = REPO / "kernels" / "gdn_ucache_flush_next.py"
    ok, line = compare(nxt, nxt, 300, seed=3)
    assert ok and "same grouping: True" in line
    text = nxt.read_text()
    rule = "and one_row and not dsreg and not tepi"
    assert text.count(rule) == 1
    mutated = tmp_path / "mutated.py"
    mutated.write_text(text.replace(rule, "and one_row and not dsreg"))
    ok, line = compare(nxt, mutated, 3000, seed=5)
    assert not ok and "attributes differ: ['afe'" in line
    import cutlass.cute as cute

    assert not isinstance(cute.compile, CaptureCompile), "cute.compile given back"


def test_the_launch_passes_every_knob_through(kmod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """GDN_UCACHE_<KNOB>=1 reaches compile_variant from the public launch path for every field of
    LoadFlags (launch_config reads them by name); ostage only with a 16-byte aligned output."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda.bindings.driver")

    class Captured(Exception):
        pass

    def capture(*args: Any, **kwargs: Any) -> None:
        raise Captured(kwargs)

    monkeypatch.setattr(kmod, "compile_variant", capture)
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    for name in kmod.FLAG_NAMES:
        monkeypatch.setenv(f"GDN_UCACHE_{name.upper()}", "8" if name == "xpf" else "1")
    buf = torch.zeros(1 << 16, dtype=torch.bfloat16)

    def launch(out_offset: int) -> dict[str, Any]:
        q = buf[: 2 * 4 * 16 * 128].view(2, 4, 16, 128)
        out = buf[out_offset : out_offset + 2 * 4 * 32 * 128].view(2, 4, 32, 128)
        with pytest.raises(Captured) as caught:
            kmod._launch(q, q, out, *[None] * 11, out, 9, 1.0, 4, 16, 32, False)
        return caught.value.args[0]

    aligned = launch(0)
    assert {n: aligned[n] for n in kmod.FLAG_NAMES} == {
        n: 8 if n == "xpf" else 1 for n in kmod.FLAG_NAMES
    }
    assert not launch(1)["ostage"]  # a 2-byte offset: no 16-byte result rows


def test_flags_equiv_launch_mode_catches_a_dropped_alignment_guard(tmp_path: Path) -> None:
    """flags_equiv --launch: a file against itself makes the same calls; a launch path that no
    longer checks the output's alignment before asking for ostage is caught."""
    pytest.importorskip("cuda.bindings.driver")
    from bench.flags_equiv import compare_launch

    nxt = REPO / "kernels" / "gdn_ucache_flush_next.py"
    ok, line = compare_launch(nxt, nxt, 200, seed=3)
    assert ok, line
    guard = 'flags["ostage"] = bool(cfg["ostage"]) and _rows_16b(out)'
    text = nxt.read_text()
    assert text.count(guard) == 1
    mutated = tmp_path / "mutated.py"
    mutated.write_text(text.replace(guard, 'flags["ostage"] = bool(cfg["ostage"])'))
    ok, line = compare_launch(nxt, mutated, 2000, seed=4)
    assert not ok and "arguments differ: {'ostage': (False, True)}" in line
