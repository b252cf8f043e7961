"""CPU checks of the benchmark's byte model and the kernel's launch heuristics (no GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench.bench_ucache import HBM_BYTES_PER_S, floor_bytes

KERNEL = Path(__file__).resolve().parents[2] / "kernels" / "gdn_ucache_flush.py"
# the next version (launch_config, persistent CTAs) until it replaces the shipped file
NEXT = KERNEL.with_name("gdn_ucache_flush_next.py")


# on/off launch knobs the table may name (session 12)
FLAG_KNOBS = {
    "t1early",
    "t1l2",
    "wvearly",
    "actfirst",
    "dsreg",
    "nobar",
    "nextl2",
    "tepi",
    "afe",
    "ostage",
    "stef",
    "tproj",
}


def test_floor_matches_kernel_spec_tables() -> None:
    # kernel-spec 3.2 (HV=64, H=16, T=4): fused verify P=12 2.59 MB, flush P=16 4.77 MB per request,
    # and the B=256 verify-only floor of 154.5 us at 4.3 TB/s.
    assert floor_bytes(1, 16, 64, 4, 0, 12, 16) / 1e6 == pytest.approx(2.59, abs=0.01)
    assert floor_bytes(1, 16, 64, 4, 1, 12, 16) / 1e6 == pytest.approx(4.77, abs=0.01)
    assert floor_bytes(256, 16, 64, 4, 0, 12, 16) / HBM_BYTES_PER_S * 1e6 == pytest.approx(
        154.5, abs=0.1
    )
    # HV=32 spec table (P=12 verify, 10.0 us at B=32; P=16 flush 18.2 us)
    assert floor_bytes(32, 16, 32, 4, 0, 12, 16) / HBM_BYTES_PER_S * 1e6 == pytest.approx(
        10.0, abs=0.1
    )
    assert floor_bytes(32, 16, 32, 4, 32, 12, 16) / HBM_BYTES_PER_S * 1e6 == pytest.approx(
        18.2, abs=0.1
    )


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_props(names: dict[int, str]) -> dict[int, SimpleNamespace]:
    """A kernel module's per-device properties cache for cards that are not here."""
    return {i: SimpleNamespace(name=n, multi_processor_count=132) for i, n in names.items()}


@pytest.fixture(scope="module")
def kmod():
    return _load(KERNEL, "gdnu_heuristics")


@pytest.fixture(scope="module")
def knext():
    return _load(NEXT if NEXT.exists() else KERNEL, "gdnu_heuristics_next")


def test_bv_heuristic(kmod, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GDN_UCACHE_BV", raising=False)
    cpu = torch.device("cpu")  # 132 SMs assumed off-GPU
    assert kmod._pick_bv(1, 32, cpu) == 16  # latency-bound: most CTAs
    assert kmod._pick_bv(8, 32, cpu) == 64
    assert kmod._pick_bv(256, 64, cpu) == 128  # one pass over whole tiles
    monkeypatch.setenv("GDN_UCACHE_BV", "32")
    assert kmod._pick_bv(256, 64, cpu) == 32
    monkeypatch.setenv("GDN_UCACHE_BV", "48")
    with pytest.raises(ValueError, match="GDN_UCACHE_BV"):
        kmod._pick_bv(1, 32, cpu)


def test_persistent_programs(knext, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    for var in ("GDN_UCACHE_PERSIST", "GDN_UCACHE_NPROG"):
        monkeypatch.delenv(var, raising=False)
    assert knext._persistent_programs(256, 32, 128, cpu) == 256  # off: one row per CTA
    monkeypatch.setenv("GDN_UCACHE_PERSIST", "4")
    # 4 x 132 CTAs / 32 heads = 16 programs; 256 rows split evenly: 16 rows each
    assert knext._persistent_programs(256, 32, 128, cpu) == 16
    # programs walk rows z0, z0 + nprog, ...: they differ by at most one row, and all of them are
    # resident at once (nprog * HV * 128 / BV <= 4 CTAs x 132 SMs)
    for batch in (17, 100, 255, 256, 1000):
        for hv, bv in ((32, 128), (64, 64), (48, 128)):
            nprog = knext._persistent_programs(batch, hv, bv, cpu)
            assert 1 <= nprog <= batch
            if nprog < batch:
                assert nprog * hv * (128 // bv) <= 4 * 132
    assert knext._persistent_programs(8, 32, 128, cpu) == 8  # small batch: not persistent
    monkeypatch.setenv("GDN_UCACHE_NPROG", "2")
    assert knext._persistent_programs(7, 4, 16, cpu) == 2


def test_launch_config_knobs(knext, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    for var in ("GDN_UCACHE_BV", "GDN_UCACHE_MBP", "GDN_UCACHE_LATE", "GDN_UCACHE_PERSIST"):
        monkeypatch.delenv(var, raising=False)
    cfg = knext.launch_config(256, 32, 4, cpu)
    assert cfg["bv"] == 128 and cfg["nprog"] == 256
    monkeypatch.setenv("GDN_UCACHE_MBP", "6")
    monkeypatch.setenv("GDN_UCACHE_LATE", "1")
    cfg = knext.launch_config(256, 32, 4, cpu)
    assert (cfg["mbp"], cfg["late"]) == (6, 1)


def test_every_variant_knob_is_cleared_between_variants() -> None:
    """The sweep clears KNOBS before each variant: an environment variable a variant sets but
    KNOBS misses leaks into every later column and point (session 20: GDN_UCACHE_TEPI did, so
    k18's 'base' columns after the first point ran with tepi)."""
    from bench.knockout import CANDIDATES, KNOBS, VARIANTS, variant_env

    set_by_variants = {key for env in VARIANTS.values() for key in env}
    set_by_variants |= {key for name in CANDIDATES for key in variant_env(name)}
    assert set_by_variants <= set(KNOBS), sorted(set_by_variants - set(KNOBS))


def test_timing_tokens_combine_in_skip() -> None:
    """`padN` and `stagN` (timing experiments) go to GDN_UCACHE_SKIP and combine with the
    knock-outs there; a word that is none of the known parts is refused by name."""
    from bench.knockout import variant_env

    env = variant_env("bv128+late13+mbp0+t1early+stag1500+no_epi")
    assert env["GDN_UCACHE_SKIP"] == "stag1500,epi" and env["GDN_UCACHE_LATE"] == "13"
    assert variant_env("alias+pad9800")["GDN_UCACHE_SKIP"] == "alias,pad9800"
    with pytest.raises(SystemExit, match="unknown variant part 'stagx'"):
        variant_env("base+stagx")


def test_tuned_table_lookup(knext, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.knockout import CANDIDATES, KNOBS

    for var in KNOBS:
        monkeypatch.delenv(var, raising=False)
    # every candidate name parses in the kernel file exactly as the bench's variant_env sets it
    for name in CANDIDATES:
        knobs = knext._config_knobs(name)
        assert set(knobs) <= {"bv", "mbp", "late", "persist", "prefetch", "xpf"} | FLAG_KNOBS
    assert knext._config_knobs("bv128+late3+mbp7") == {"bv": 128, "late": 3, "mbp": 7}
    assert knext._config_knobs("bv128+persist4+pf2") == {"bv": 128, "persist": 4, "prefetch": 2}
    assert knext._config_knobs("bv128+late13+t1early") == {"bv": 128, "late": 13, "t1early": 1}
    assert knext._config_knobs("bv128+late13+xpf16") == {"bv": 128, "late": 13, "xpf": 16}
    with pytest.raises(ValueError, match="knob"):
        knext._config_knobs("bv128+warp9")
    cpu = torch.device("cpu")
    table = {32: {1: "bv16", 8: "bv64+mbp7", 128: "bv128+late3+mbp7"}, 64: {1: "bv32"}}
    monkeypatch.setattr(knext, "_TUNED_T4", table)
    assert knext._tuned(200, 32, 4) == {"bv": 128, "late": 3, "mbp": 7}  # largest B <= 200
    assert knext._tuned(20, 32, 4) == {"bv": 64, "mbp": 7}
    assert knext._tuned(256, 56, 4) == {"bv": 32}  # nearest HV
    assert knext._tuned(256, 32, 8) == {}  # measured at T=4 only
    cfg = knext.launch_config(256, 32, 4, cpu)
    assert (cfg["bv"], cfg["mbp"], cfg["late"], cfg["nprog"]) == (128, 7, 3, 256)
    monkeypatch.setenv("GDN_UCACHE_BV", "64")  # any knob set: the table is ignored
    assert knext._tuned(256, 32, 4) == {}
    assert knext.launch_config(256, 32, 4, cpu)["bv"] == 64
    monkeypatch.delenv("GDN_UCACHE_BV")
    monkeypatch.setattr(knext, "_TUNED_T4", {32: {1: "bv128+persist4+pf2"}})
    cfg = knext.launch_config(256, 32, 4, cpu)
    assert (cfg["nprog"], cfg["mbp"], cfg["prefetch"]) == (16, 4, 2)
    # chain (late13 with persistent CTAs): 6 per SM on 132 SMs at HV=32 -> 24 programs of 10-11
    # rows, launch bound 6; below one wave of rows it is one row per CTA again
    monkeypatch.setattr(knext, "_TUNED_T4", {32: {1: "bv128+late13+persist6+t1early+nextl2"}})
    cfg = knext.launch_config(256, 32, 4, cpu)
    assert (cfg["nprog"], cfg["mbp"], cfg["late"], cfg["nextl2"]) == (24, 6, 13, 1)
    assert knext.launch_config(16, 32, 4, cpu)["nprog"] == 16


@pytest.mark.parametrize("which", ["shipped", "next"])
def test_tuned_tables_use_only_conformance_candidates(which: str, kmod, knext) -> None:
    # the launch table may name only configurations that the GPU conformance test runs
    # (bench/knockout.py CANDIDATES, tests/kernels/test_ours_conformance_gpu.py::test_candidate)

    # xpfN runs the same code for every N > 0 (N only offsets the prefetched row): any distance
    # of a candidate's xpf counts as that candidate (knobs in any order)
    from bench.knockout import is_candidate

    assert is_candidate("bv128+late13+mbp0+xpf16+actfirst")
    assert not is_candidate("bv128+late13+mbp0+nosplit")
    mod = kmod if which == "shipped" else knext
    for var in ("_TUNED_T4", "_TUNED_T4_H100"):
        for hv, row in getattr(mod, var).items():
            for b, name in row.items():
                assert is_candidate(name), f"{which} {var}[{hv}][{b}] = {name!r} is not a candidate"


@pytest.mark.parametrize("which", ["shipped", "next"])
def test_launch_table_follows_the_card_and_the_override(
    which: str, kmod, knext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # H100-class cards take the table chosen on an H100 (session 30: the two cards disagree at
    # HV=48 B >= 128 and HV=64 B = 32); the H200, unmeasured cards and CPU runs the H200's
    mod = kmod if which == "shipped" else knext
    monkeypatch.delenv("GDN_UCACHE_TABLE", raising=False)
    for k in mod._KNOB_ENV:
        monkeypatch.delenv(k, raising=False)
    assert mod._TUNED_T4_H100 != mod._TUNED_T4, "the two tables differ (else drop one)"
    names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H200", 2: "NVIDIA H800", 3: "NVIDIA B200"}
    monkeypatch.setattr(mod, "_PROPS", _fake_props(names))
    cuda = [torch.device("cuda", i) for i in range(4)]  # names come from the cache: no GPU needed
    assert mod._launch_table(cuda[0]) is mod._TUNED_T4_H100
    assert mod._launch_table(cuda[2]) is mod._TUNED_T4_H100
    assert mod._launch_table(cuda[1]) is mod._TUNED_T4
    assert mod._launch_table(cuda[3]) is mod._TUNED_T4  # never measured: the card
    assert mod._launch_table(torch.device("cpu")) is mod._TUNED_T4
    assert mod._launch_table(None) is mod._TUNED_T4
    h100_entry = mod._config_knobs(mod._TUNED_T4_H100[64][32])
    assert mod._tuned(32, 64, 4, cuda[0]) == h100_entry
    assert mod._tuned(32, 64, 4, cuda[1]) == mod._config_knobs(mod._TUNED_T4[64][32])
    assert mod.launch_config(32, 64, 4, cuda[0])["late"] == h100_entry["late"]
    monkeypatch.setenv("GDN_UCACHE_TABLE", "h200")  # time one card's table on the other
    assert mod._launch_table(cuda[0]) is mod._TUNED_T4
    monkeypatch.setenv("GDN_UCACHE_TABLE", " H100 ")
    assert mod._launch_table(cuda[1]) is mod._TUNED_T4_H100
    monkeypatch.setenv("GDN_UCACHE_TABLE", "b200")
    with pytest.raises(ValueError, match="GDN_UCACHE_TABLE='b200': expected one of h200, h100"):
        mod._launch_table(cuda[1])


def test_choose_takes_the_smallest_mean_ratio_over_flush_levels() -> None:
    # a: 2 % faster than b verify-only, 8 % slower all-flush (v7-k4, HV=64 B=256): b wins on the
    # mean even though its worst ratio (verify-only) is the larger one.
    from bench.knockout import choose

    def row(flush: int, fi: float, a: float, b: float) -> dict:
        us = {"flashinfer:base": fi, "next:a": a, "next:b": b, "next:no_all": 1.0}
        return {"HV": 64, "B": 256, "flush_pct": flush, "us": us}

    rows = [
        row(0, 171.0, 184.0, 187.0),
        row(20, 214.0, 214.0, 208.0),
        row(100, 411.0, 355.0, 328.0),
    ]
    assert choose(rows, "next", exclude=("no_all",)) == {(64, 256): "b"}
    # a tie on the mean goes to the faster one at 20 % flush
    tie = [row(0, 100.0, 100.0, 110.0), row(20, 100.0, 110.0, 100.0)]
    assert choose(tie, "next", exclude=("no_all",)) == {(64, 256): "b"}


class _FakeCuda:
    """Just enough of torch.cuda for bench_ucache.time_graph on the CPU: every graph replay
    'takes' 2 us per captured call plus 5 us of launch, and the events report that."""

    def __init__(self, slow_replays: int = 0, slow_us: float = 0.0) -> None:
        self.captured = 0
        self.capturing = False
        self.clock = 0.0
        # the card's drift after a point's allocation: the first `slow_replays` replays of any
        # graph take `slow_us` longer (results/kernel/s22-order)
        self.slow_replays, self.slow_us = slow_replays, slow_us
        self.replays: list[str] = []  # the order graphs were replayed in, by name

    class _Ctx:
        def __init__(self, enter=None, exit_=None) -> None:
            self.enter, self.exit_ = enter, exit_

        def __enter__(self):
            if self.enter:
                self.enter()

        def __exit__(self, *exc):
            if self.exit_:
                self.exit_()

    def synchronize(self) -> None:
        pass

    def Stream(self):  # noqa: N802 - torch's name
        return type("S", (), {"wait_stream": lambda self, other: None})()

    def current_stream(self):
        return self.Stream()

    def stream(self, s):
        return self._Ctx()

    def CUDAGraph(self):  # noqa: N802
        cuda = self

        class Graph:
            calls = 0
            name = ""

            def replay(self) -> None:
                slow = cuda.slow_us if len(cuda.replays) < cuda.slow_replays else 0.0
                cuda.replays.append(self.name)
                cuda.clock += 5.0 + 2.0 * self.calls + slow

        return Graph()

    def graph(self, g):
        def enter() -> None:
            self.capturing, self.captured = True, 0

        def exit_() -> None:
            self.capturing = False
            g.calls = self.captured

        return self._Ctx(enter, exit_)

    def Event(self, enable_timing: bool = False):  # noqa: N802
        cuda = self

        class Ev:
            def record(self) -> None:
                self.t = cuda.clock

            def elapsed_time(self, end) -> float:
                return (end.t - self.t) / 1e3  # ms

        return Ev()

    def _sleep(self, cycles: int) -> None:
        pass


def _fake_card(monkeypatch: pytest.MonkeyPatch, slow_replays: int = 0, slow_us: float = 0.0):
    """bench_ucache on a _FakeCuda (with that drift): the fake card and a point whose calls during
    a capture count as captured calls."""
    from bench import bench_ucache

    cuda = _FakeCuda(slow_replays, slow_us)
    monkeypatch.setattr(bench_ucache.torch, "cuda", cuda)
    sink = torch.zeros(())
    monkeypatch.setattr(bench_ucache.torch, "zeros", lambda *a, **k: sink)

    class Point:
        def call(self, fn):
            if cuda.capturing:
                cuda.captured += 1

    return cuda, Point()


def test_time_graph_warm_mode_times_back_to_back_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm: WARM_CALLS calls captured in one graph, the replay divided by them (so the launch
    cost is shared); cold: one call per replay after the scrub."""
    from bench import bench_ucache

    _, point = _fake_card(monkeypatch)
    n = bench_ucache.WARM_CALLS
    warm = bench_ucache.time_graph(None, point, None, reps=5)
    assert warm == pytest.approx((5.0 + 2.0 * n) / n)
    cold = bench_ucache.time_graph(None, point, torch.ones(4), reps=5)
    assert cold == pytest.approx(7.0)


def test_time_graphs_interleave_so_a_drift_falls_on_every_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two identical graphs on a card whose first 12 replays run slow: timed one after the other
    the first would take the drift (session 22's H100: whichever backend went first lost 8-16 %
    at HV 48 / 64, B = 256); time_graphs settles first and rotates the order, so both medians are
    the clean time, and every round replays each graph once."""
    from bench import bench_ucache

    cuda, point = _fake_card(monkeypatch, slow_replays=12, slow_us=30.0)
    graphs = {}
    for name in ("ours", "flashinfer"):
        graphs[name] = bench_ucache.capture_graph(None, point, 1)
        graphs[name].name = name
    reps = 9
    out = bench_ucache.time_graphs(graphs, torch.ones(4), reps=reps, calls=1)
    assert out == {"ours": pytest.approx(7.0), "flashinfer": pytest.approx(7.0)}
    rounds = [cuda.replays[i : i + 2] for i in range(0, len(cuda.replays), 2)]
    assert len(rounds) == bench_ucache.SETTLE_ROUNDS + reps
    assert all(sorted(r) == ["flashinfer", "ours"] for r in rounds)
    assert {r[0] for r in rounds} == {"ours", "flashinfer"}, "the order rotates"


def test_mean_ratios_scores_every_column_against_flashinfer() -> None:
    from bench.knockout import mean_ratios

    def row(hv: int, b: int, f: int, fi: float, a: float, c: float) -> dict:
        us = {"flashinfer:base": fi, "v5b:base": a, "next:bv128+late10+mbp0": c}
        return {"arm": "serving", "HV": hv, "B": b, "flush_pct": f, "us": us}

    rows = [row(32, 256, 0, 80.0, 96.0, 88.0), row(32, 256, 100, 200.0, 170.0, 180.0)]
    table, summary = mean_ratios(rows)
    assert table[0] == "| HV | B | next:bv128+late10+mbp0 | v5b:base |"
    # means: late10 (1.10 + 0.90) / 2 = 1.000, v5b (1.20 + 0.85) / 2 = 1.025; the best in bold
    assert table[2] == "| 32 | 256 | **1.000** | 1.025 |"
    assert summary[0].startswith("- next:bv128+late10+mbp0: <= flashinfer at 1 of 2 points")
    assert "worst 1.200x (HV=32 B=256 flush 0 %)" in summary[1]


def test_write_table_rewrites_only_the_table_in_ruff_format_layout(tmp_path: Path) -> None:
    # k6's bench half times the kernel file with the proposed table (propose --write), so the
    # final numbers are of the file that ships; the same command writes next in place
    import shutil
    import subprocess

    from bench.knockout import table_source, write_table

    table = _load(NEXT, "gdnu_write_next")._TUNED_T4
    same = tmp_path / "same.py"
    write_table(NEXT, table, same)
    assert same.read_text() == NEXT.read_text(), "the file's own table writes the file unchanged"
    short_table = {hv: {b: "bv128" for b in row} for hv, row in table.items()}
    short = tmp_path / "short.py"
    write_table(NEXT, short_table, short)
    assert _load(short, "gdnu_write_short")._TUNED_T4 == short_table
    longer = {
        hv: {b: n + "+t1early+actfirst+xpf8" for b, n in row.items()} for hv, row in table.items()
    }
    dest = tmp_path / "proposed.py"
    write_table(short, longer, dest)
    assert _load(dest, "gdnu_write_proposed")._TUNED_T4 == longer
    before, after = short.read_text().split("\n"), dest.read_text().split("\n")
    assert len(after) > len(before), "entries too long for one line per HV get one line each"
    head = before.index("_TUNED_T4: dict[int, dict[int, str]] = {")
    assert before[:head] == after[:head] and before[-200:] == after[-200:]
    ruff = shutil.which("ruff")
    if ruff is not None:  # the layout is ruff-format's: the written file stays lint clean
        snippet = tmp_path / "table.py"
        snippet.write_text(table_source(longer) + table_source(table))
        proc = subprocess.run(
            [ruff, "format", "--check", "--line-length", "100", str(snippet)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\n")
    with pytest.raises(SystemExit, match="expected one line `_TUNED_T4"):
        write_table(broken, table, tmp_path / "never.py")
    assert not (tmp_path / "never.py").exists()


def test_propose_command_writes_the_kernel_file_that_ships(tmp_path: Path) -> None:
    # the command k6's bench half runs on the GPU host (a CPU run of the same code path)
    import json
    import subprocess
    import sys

    from bench.knockout import write_table

    # from session 8's table (before the knobs), so base+xpf8 resolves to a conformance candidate
    table = {hv: {1: "bv128", 8: "bv128+late3+mbp5", 128: "bv128+late13+mbp0"} for hv in (32, 64)}
    kernel = tmp_path / "kernel.py"
    write_table(NEXT, table, kernel)
    fi, hv = 100.0, min(table)
    us = {"flashinfer:base": fi, "ours:base": 110.0, "ours:base+xpf8": 95.0}
    rows = [{"HV": hv, "B": 256, "flush_pct": f, "us": us} for f in (0, 20, 100)]
    sweep = tmp_path / "candidates-k6.json"
    sweep.write_text(json.dumps({"rows": rows}))
    dest = tmp_path / "proposed.py"
    root = NEXT.parents[1]
    cmd = [sys.executable, "bench/knockout.py", "propose", str(sweep), "--kernel", str(kernel)]
    proc = subprocess.run(
        [*cmd, "--write", str(dest)], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"# wrote {dest}" in proc.stdout
    key = max(b for b in table[hv] if b <= 256)
    expected = {h: dict(row) for h, row in table.items()}
    expected[hv][key] = table[hv][key] + "+xpf8"
    assert _load(dest, "gdnu_cli_proposed")._TUNED_T4 == expected
    # an H100 sweep: its `base` was the H100 table, and only that block is rewritten
    h100_table = {hv: {1: "bv128", 8: "bv128+late3+mbp5", 128: "bv128+late10+mbp0"} for hv in (32,)}
    write_table(kernel, h100_table, kernel, "_TUNED_T4_H100")
    dest_h100 = tmp_path / "proposed-h100.py"
    proc = subprocess.run(
        [*cmd, "--table", "h100", "--write", str(dest_h100)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proposed = _load(dest_h100, "gdnu_cli_proposed_h100")
    assert proposed._TUNED_T4 == table
    assert proposed._TUNED_T4_H100 == {hv: {**h100_table[hv], key: "bv128+late10+mbp0+xpf8"}}
    old_kernel = tmp_path / "one-table.py"  # a kernel from before the H100 table (v12d)
    old_kernel.write_text(kernel.read_text().replace("_TUNED_T4_H100", "_OTHER"))
    cmd_old = [*cmd[:-1], str(old_kernel), "--table", "h100"]
    proc = subprocess.run(cmd_old, cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "has no _TUNED_T4_H100: pass --table h200" in proc.stderr


def test_propose_chooses_only_candidates_that_passed_on_the_gpu(tmp_path: Path) -> None:
    # k6's conformance half leaves pytest -v logs; a candidate that failed, errored or was cut
    # by the part's time limit in any arm is never written into the table
    from bench.knockout import passed_candidates, propose, same_code

    x13 = "bv128+late13+mbp0"
    t = "tests/kernels/test_ours_conformance_gpu.py::test_candidate"
    (tmp_path / "serving.log").write_text(
        f"{t}[serving-{x13}+actfirst+xpf2] PASSED [ 10%]\n"
        f"{t}[serving-{x13}+xpf2] PASSED [ 20%]\n"
        f"{t}[serving-bv128+late10+mbp0] FAILED [ 30%]\n"
        f"{t}[serving-{x13}] PASSED [ 40%]\n"
    )
    (tmp_path / "bf16.log").write_text(
        f"{t}[bf16-{x13}+xpf2] PASSED [ 20%]\n"
        f"{t}[bf16-bv128+late10+mbp0] PASSED [ 30%]\n"
        f"{t}[bf16-{x13}] PASSED [ 40%]\n"
    )  # actfirst+xpf2 did not run in bf16 (the part's limit)
    passed = passed_candidates(sorted(tmp_path.glob("*.log")))
    assert passed == {same_code(x13), same_code(x13 + "+xpf2")}
    table = {32: {32: "bv128+late10+mbp0", 128: x13}}

    def row(b: int, **cols: float) -> dict:
        us = {"flashinfer:base": 100.0} | {
            f"ours:{k.replace('_', '+')}": v for k, v in cols.items()
        }
        return {"HV": 32, "B": b, "flush_pct": 0, "us": us}

    rows = [
        row(256, base=110.0, base_actfirst_xpf8=90.0, base_xpf8=95.0),
        row(32, base=110.0, bv128_late13_mbp0=105.0),
    ]
    assert propose(rows, table)[0][32][128] == x13 + "+actfirst+xpf8", "unfiltered: the fastest"
    new, lines = propose(rows, table, passed=passed)
    assert new == {32: {32: x13, 128: x13 + "+xpf8"}}, "any xpf distance passes as xpf2 did"
    assert lines[0] == (
        "HV=32 B>=32: the entry bv128+late10+mbp0 did not pass in every arm of the conformance logs"
    )


def test_propose_resolves_base_plus_knob_into_the_table() -> None:
    # k6's candidate sweep names the table's entry `base`; the proposal writes entry+knob, keys
    # B >= 128 average their B=128 and B=256 rows, and a key no column beats keeps its entry
    from bench.knockout import propose

    x13 = "bv128+late13+mbp0"
    table = {32: {1: "bv32", 8: "bv128+late3+mbp5", 32: "bv128+late10+mbp0", 128: x13}}

    def row(b: int, flush: int, fi: float, **cols: float) -> dict:
        us = {"flashinfer:base": fi} | {f"ours:{k.replace('_', '+')}": v for k, v in cols.items()}
        return {"HV": 32, "B": b, "flush_pct": flush, "us": us}

    rows = [
        row(256, 0, 100.0, base=110.0, base_xpf8=95.0, bv128_late10_mbp0=111.0, base_nosplit=1.0),
        row(128, 0, 50.0, base=52.0, base_xpf8=53.0, bv128_late10_mbp0=56.0, base_nosplit=1.0),
        row(32, 0, 20.0, base=21.0, base_xpf8=21.5, bv128_late10_mbp0=22.0),
        row(8, 0, 10.0, base=10.5, base_xpf8=10.6, bv128_late10_mbp0=10.1),
        row(8, 0, 10.0, base=10.5, base_xpf8=10.6, bv128_late10_mbp0=10.1) | {"HV": 40},
    ]
    new, lines = propose(rows, table)
    assert new == {
        32: {1: "bv32", 8: "bv128+late10+mbp0", 32: "bv128+late10+mbp0", 128: x13 + "+xpf8"}
    }
    assert len(lines) == 2 and lines[0].startswith("HV=32 B>=8: bv128+late3+mbp5 ->")
    assert table[32][128] == x13, "the input table is not modified"
    # a knock-out (nosplit: less precise) is never chosen however fast: not a candidate


def test_propose_takes_the_table_of_the_card_the_sweeps_ran_on(
    knext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an H100 sweep's `base` column is the H100 table: proposing from it into the H200 table
    # would silently mix the cards, so the recorded card decides and a contradiction stops
    from bench.knockout import sweep_table

    card_table = knext._card_table  # the rule propose takes from the kernel file
    h100, h200 = {"device": "NVIDIA H100 80GB HBM3"}, {"device": "NVIDIA H200"}
    assert sweep_table([h100, h100], None, card_table) == "h100"
    assert sweep_table([h200], None, card_table) == "h200"
    assert sweep_table([{}, {"warm": False}], None, card_table) == "h200"  # before session 30
    assert sweep_table([{}], "h100", card_table) == "h100"
    assert sweep_table([h100], "h100", card_table) == "h100"
    with pytest.raises(SystemExit, match="--table h200, but .* whose table is h100"):
        sweep_table([h100], "h200", card_table)
    with pytest.raises(SystemExit, match="cards with different launch tables"):
        sweep_table([h100, h200], None, card_table)
    names = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H800", "NVIDIA H200"]
    names += ["NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA H20"]
    monkeypatch.delenv("GDN_UCACHE_TABLE", raising=False)
    monkeypatch.setattr(knext, "_PROPS", _fake_props(dict(enumerate(names))))
    for i, name in enumerate(names):  # the rule propose uses is the one the launch path uses
        is_h100 = knext._launch_table(torch.device("cuda", i)) is knext._TUNED_T4_H100
        assert is_h100 == (card_table(name) == "h100"), name
