"""bench/h200_run.sh's k4 and k8 modes on the CPU, with stub commands: every step it plans runs
with the arguments the H200 call needs, and the archive comes back. A typo found here costs
nothing; on the GPU host it costs device minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STUB = """#!/usr/bin/env bash
# one line per call (background steps append concurrently): the command, then its knobs
echo "$(basename "$0") $* | GDN_UCACHE_SKIP=${GDN_UCACHE_SKIP:-}" \\
  "GDN_UCACHE_OURS_MODULE=${GDN_UCACHE_OURS_MODULE:-} GDN_UCACHE_LATE=${GDN_UCACHE_LATE:-}" \\
  "GDN_UCACHE_BV=${GDN_UCACHE_BV:-} GDN_UCACHE_XSPLIT=${GDN_UCACHE_XSPLIT:-}" \\
  "GDN_UCACHE_T1EARLY=${GDN_UCACHE_T1EARLY:-} GDN_UCACHE_XPF=${GDN_UCACHE_XPF:-}" \\
  "GDN_UCACHE_DSREG=${GDN_UCACHE_DSREG:-} GDN_UCACHE_NOBAR=${GDN_UCACHE_NOBAR:-}" \\
  "GDN_UCACHE_PERSIST=${GDN_UCACHE_PERSIST:-} GDN_UCACHE_NPROG=${GDN_UCACHE_NPROG:-}" \\
  "GDN_UCACHE_TEPI=${GDN_UCACHE_TEPI:-} GDN_UCACHE_AFE=${GDN_UCACHE_AFE:-}" \\
  "GDN_UCACHE_OSTAGE=${GDN_UCACHE_OSTAGE:-} GDN_UCACHE_STEF=${GDN_UCACHE_STEF:-}" \\
  "GDN_UCACHE_TPROJ=${GDN_UCACHE_TPROJ:-}" >>"$STUB_LOG"
# the files a step's options name: a sweep's --json (propose reads the ones that exist),
# propose's --write (the proposed kernel file), ncu's -o report
prev=""
for a in "$@"; do
  case $prev in
    --json) echo '{"rows": []}' >"$a" ;;
    --write) echo "# proposed" >"$a" ;;
    -o) if [[ $(basename "$0") == ncu ]]; then touch "$a.ncu-rep"; fi ;;
  esac
  prev=$a
done
# a suite that lasts (STUB_SUITE_S seconds) and says when it ended: which suites overlapped
if [[ -n ${STUB_SUITE_S:-} && $* == *run_gpu_suite.py* ]]; then
  sleep "$STUB_SUITE_S"
  echo "ended $*" >>"$STUB_LOG"
fi
exit 0
"""


def run_mode(
    tmp_path: Path, mode: str, extra_env: dict[str, str] | None = None
) -> tuple[str, Path]:
    """Run one mode with stub python3/ncu/nvidia-smi/timeout; return the stub log and $OUT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "ncu", "nvidia-smi", "timeout"):
        stub = bin_dir / name
        stub.write_text(STUB if name != "timeout" else '#!/usr/bin/env bash\nshift\nexec "$@"\n')
        stub.chmod(0o755)
    log = tmp_path / "calls.log"
    out = tmp_path / "out"
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        OUT=str(out),
        GDN_HOST_SITE="stub",  # as in the e2e host bundle's environment: no .gpu/env.sh
        STUB_LOG=str(log),
        K6_CONF_KEEP=str(tmp_path / "conf-keep"),  # not the host's /tmp/gdn-k6-conformance
    ) | (extra_env or {})
    proc = subprocess.run(
        ["bash", "bench/h200_run.sh", mode], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text(), out


def out_name(line: str) -> str:
    """The folder name a stub-logged command's `--out DIR` names (a suite's name)."""
    return line.split("--out ")[1].split()[0].rsplit("/", 1)[1]


def test_k4_mode_measures_next_at_its_forced_path(tmp_path: Path) -> None:
    """k4 on v8: #3's suite with late5 forced at BV=128, v8's launch candidates next to the
    shipped file and flashinfer in both arms, its knock-outs (stream incl.) and an ncu of the
    forced path beside flashinfer's with the DRAM columns."""
    calls, out = run_mode(tmp_path, "k4")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert len(suites) == 2
    forced = next(ln for ln in suites if "suite-k4-late5" in ln)
    assert "GDN_UCACHE_LATE=5 GDN_UCACHE_BV=128" in forced
    sweeps = [ln for ln in lines if "bench/knockout.py" in ln and "--warm" not in ln]
    assert len(sweeps) == 3
    for sweep in sweeps:
        assert "--backends flashinfer" in sweep and " next:bv128+late5 " in f"{sweep} "
    assert " next:bv128+late5+stream " in f"{sweeps[2]} "
    warm = [ln for ln in lines if "bench/knockout.py --warm" in ln]
    assert len(warm) == 1 and "--batch 1 " in warm[0] and "--backends flashinfer" in warm[0]
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 1
    assert "--backends ours flashinfer" in profiles[0] and "dram__throughput" in profiles[0]
    assert "GDN_UCACHE_LATE=5" in profiles[0]
    with tarfile.open(out / "kernel-k4.tar.gz") as tar:
        assert "kernel/ncu-k4.ncu-rep" in tar.getnames()


def test_k8_mode_runs_every_step(tmp_path: Path) -> None:
    calls, out = run_mode(tmp_path, "k8")
    knockout = next(ln for ln in calls.splitlines() if "bench/knockout.py" in ln)
    for variant in (
        "next:base+stream",
        "next:base+no_all",
        "next:bv128+late4+stream",
        "next:bv128+late3+persist5+pf2+stream",
    ):
        assert f" {variant} " in f"{knockout} "
    assert "--backends flashinfer" in knockout
    warm = [ln for ln in calls.splitlines() if "bench/knockout.py --warm" in ln]
    assert len(warm) == 1 and "--batch 1 " in warm[0]
    profiles = [ln for ln in calls.splitlines() if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 2
    assert "--backends ours flashinfer" in profiles[0]
    assert "--backends ours --hv" in profiles[1]
    assert "GDN_UCACHE_SKIP=proj,epi,fold,sink" in calls  # the stream-only profile
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in profiles[0]
    with tarfile.open(out / "kernel-k8.tar.gz") as tar:
        names = tar.getnames()
    assert "kernel/ncu-k8-main.ncu-rep" in names and "kernel/ncu-k8-stream.ncu-rep" in names


def test_every_nsight_compute_mode_uses_the_one_profile_function(tmp_path: Path) -> None:
    """k3 (an old record mode) profiles through the same ncu_profile as k4 and k8: one ncu run
    with the DRAM columns, then its details and raw pages."""
    calls, _ = run_mode(tmp_path, "k3")
    lines = calls.splitlines()
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 1 and "ncu-k3" in profiles[0]
    assert "--batch 256 32 1 --flush 0 100" in profiles[0] and "dram__bytes.sum" in profiles[0]
    pages = [ln for ln in lines if ln.startswith("ncu -i ")]
    assert any("--page details" in ln for ln in pages) and any("--page raw" in ln for ln in pages)
    assert (ROOT / "bench/h200_run.sh").read_text().count("ncu --clock-control") == 1


def test_sass_mode_profiles_per_instruction_and_summarises(tmp_path: Path) -> None:
    """sass: one ncu run with source counters of the shipped kernel and flashinfer, the SASS
    source page exported as CSV (compressed), and bench/ncu_sass.py's summary of it."""
    calls, out = run_mode(tmp_path, "sass")
    lines = calls.splitlines()
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 1 and "--section SourceCounters" in profiles[0]
    assert "--backends ours flashinfer --hv 32 --batch 256 --flush 0" in profiles[0]
    assert "GDN_UCACHE_OURS_MODULE=kernels/gdn_ucache_flush.py" in profiles[0]
    assert any("--page source --csv --print-source=sass" in ln for ln in lines)
    assert any("bench/ncu_sass.py" in ln and "--map" in ln for ln in lines)
    assert (out / "kernel/sass.csv.xz").is_file()


def test_k15_profiles_then_repeats_and_archives_everything(tmp_path: Path) -> None:
    """k15: ncu of ours and flashinfer at the HV=32 / HV=64 shapes, the SASS profile, two more
    serving processes (run-to-run spread), all in one archive (the device tool returns only a
    handful of files per call)."""
    calls, out = run_mode(tmp_path, "k15")
    lines = calls.splitlines()
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 2 and "--hv 32 64 --batch 256 128 32 --flush 0" in profiles[0]
    repeats = [ln for ln in lines if "bench/bench_ucache.py" in ln]
    assert len(repeats) == 2 and all("--backends ours flashinfer |" in ln for ln in repeats)
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k15.tar.gz"]
    with tarfile.open(out / "kernel-k15.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"kernel/sass.csv.xz", "kernel/ncu-k15-raw.csv", "kernel/repeat2-serving.log"} <= names
    assert not any(n.endswith(".ncu-rep") for n in names)


def test_k16_checks_dsreg_and_nobar_before_timing_them(tmp_path: Path) -> None:
    """k16: #3's suite forced onto late13 / late10 with the table's knobs + dsreg and onto late13
    with nobar, the launch candidates carrying either knob (both arms), then one sweep of the
    table with and without each knob vs flashinfer; one archive."""
    calls, out = run_mode(tmp_path, "k16")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    dsreg = sorted(out_name(ln) for ln in suites if "GDN_UCACHE_DSREG=1" in ln)
    assert dsreg == ["suite-k16-dsreg-late10", "suite-k16-dsreg-late13"]
    assert all("GDN_UCACHE_T1EARLY=1" in ln for ln in suites if "GDN_UCACHE_DSREG=1" in ln)
    nobar = [out_name(ln) for ln in suites if "GDN_UCACHE_NOBAR=1" in ln]
    assert nobar == ["suite-k16-nobar-late13"]
    assert all("gdn_ucache_flush_next.py" in ln for ln in suites)
    conf = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert len(conf) == 1 and "candidate and (dsreg or nobar)" in conf[0]
    sweep = [ln for ln in lines if "bench/knockout.py" in ln]
    assert len(sweep) == 1
    assert "--variants ours:base ours:base+dsreg ours:base+nobar |" in sweep[0]
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 2
    for d, ln in enumerate(profiles):  # without, then with the knob, at HV=32 B=256 verify
        assert f"ncu-k16-dsreg{d}" in ln and f"GDN_UCACHE_DSREG={d}" in ln
        assert "--hv 32 --batch 256 --flush 0" in ln
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k16.tar.gz"]


def test_k17_checks_chain_before_timing_it(tmp_path: Path) -> None:
    """k17: #3's suite forced onto chain (late13 with persistent CTAs, several rows per CTA) with
    the table's knobs and with dsreg, the chain launch candidates (both arms), then one sweep of
    the table, the table + dsreg and both chain forms vs flashinfer, ncu of chain; one archive."""
    calls, out = run_mode(tmp_path, "k17")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert sorted(out_name(ln) for ln in suites) == [
        "suite-k17-chain-dsreg-nextl2-late13",
        "suite-k17-chain-late13",
    ]
    for ln in suites:  # persistent with 2-3 programs: every CTA walks several rows
        assert "GDN_UCACHE_PERSIST=" in ln and "GDN_UCACHE_NPROG=" in ln
        assert "GDN_UCACHE_BV=128" in ln and "gdn_ucache_flush_next.py" in ln
    conf = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert len(conf) == 1 and "candidate and (persist6 or persist7 or bv64+actfirst)" in conf[0]
    sweep = [ln for ln in lines if "bench/knockout.py" in ln and "--warm" not in ln]
    assert len(sweep) == 1 and "ours:base ours:base+dsreg" in sweep[0]
    (warm,) = [ln for ln in lines if "bench/knockout.py --warm" in ln]
    assert "--batch 1 " in warm and " ours:bv64+actfirst " in warm
    assert " ours:bv128+late13+persist6+t1early+t1l2+wvearly " in sweep[0]
    assert " ours:bv128+late13+persist6+t1early+t1l2+wvearly+nextl2 " in sweep[0]
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 1 and "GDN_UCACHE_PERSIST=6" in profiles[0]
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k17.tar.gz"]


def test_k9_mode_checks_v9_step_one(tmp_path: Path) -> None:
    """k9: #3's suite forced onto late6 at BV=128 without a bound, knock-outs with the alias
    variants beside flashinfer, an ncu of late6 with and without alias, one archive."""
    calls, out = run_mode(tmp_path, "k9")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert len(suites) == 2
    for late in (7, 9):
        suite = next(ln for ln in suites if f"suite-k9-late{late}" in ln)
        assert f"GDN_UCACHE_LATE={late} GDN_UCACHE_BV=128" in suite
    knockout = next(ln for ln in lines if "bench/knockout.py" in ln)
    for variant in (
        "next:bv128+late6+mbp0",
        "next:bv128+late7+mbp0",
        "next:bv128+late7+mbp0+alias",
        "next:bv128+late7+mbp0+stream",
        "next:base+alias",
        "next:bv128+late8+mbp0",
        "next:bv128+late9+mbp0",
    ):
        assert f" {variant} " in f"{knockout} "
    assert "--backends flashinfer" in knockout
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 2 and "GDN_UCACHE_SKIP=alias" in profiles[1]
    with tarfile.open(out / "kernel-k9.tar.gz") as tar:
        assert "kernel/ncu-k9-late7-alias.ncu-rep" in tar.getnames()


def test_forced_suites_run_each_mode_with_its_knobs(tmp_path: Path) -> None:
    """k9-k14 share forced_suites: one #3's suite per mode, on next, with the mode's BV; k14's
    specs LATE/XSPLIT name their suites and set the split (knobs in the stub log)."""
    (tmp_path / "k14").mkdir()
    (tmp_path / "k9").mkdir()
    calls, _ = run_mode(tmp_path / "k14", "k14")
    suites = [ln for ln in calls.splitlines() if "run_gpu_suite.py" in ln]
    names = sorted(out_name(ln) for ln in suites)
    assert names == [
        "suite-k14-late10-bv64-split1",
        "suite-k14-late12-bv64-split0",
        "suite-k14-late12-bv64-split1",
        "suite-k14-late13-bv64-split1",
    ]
    for ln in suites:
        assert "GDN_UCACHE_BV=64" in ln and "gdn_ucache_flush_next.py" in ln
        assert "--deadline-s 60 --jobs 4" in ln
        split = "0" if "split0 " in ln else "1"
        assert f"GDN_UCACHE_XSPLIT={split}" in ln
    calls9, _ = run_mode(tmp_path / "k9", "k9")
    suites9 = [ln for ln in calls9.splitlines() if "run_gpu_suite.py" in ln]
    assert sorted(out_name(ln) for ln in suites9) == [
        "suite-k9-late7",
        "suite-k9-late9",
    ]
    assert all("GDN_UCACHE_BV=128" in ln and "--deadline-s 55 --jobs 8" in ln for ln in suites9)


def test_k6_measures_the_file_about_to_ship(tmp_path: Path) -> None:
    """k6 with K6_MODULE=next (the shipping call): every step runs next, not the shipped file:
    conformance, #3's suite forced onto late13 and late10 at BV=128 with and without the knobs,
    the final benchmark with the Triton baseline, the knock-outs and the candidates (incl.
    base+t1early and base+xpfN); the archive comes back."""
    nxt = "kernels/gdn_ucache_flush_next.py"
    calls, out = run_mode(tmp_path, "k6", {"K6_MODULE": nxt})
    lines = calls.splitlines()
    python = [ln for ln in lines if ln.startswith("python3 ") and " -c " not in ln]
    final = [ln for ln in python if "bench_ucache.py" in ln or "nosplit-k6" in ln]
    assert python and all(f"GDN_UCACHE_OURS_MODULE={nxt}" in ln for ln in python if ln not in final)
    # the final benchmark and the knock-outs time next with the table the sweeps chose, written
    # by propose into a copy (the file that ships once the same command rewrites next in place)
    (propose,) = [ln for ln in python if " propose " in ln]
    proposed = propose.split("--write ")[1].split()[0]
    assert proposed.endswith("/proposed-k6.py") and f"--kernel {nxt} " in propose
    assert "candidates-k6.json" in propose and "warm-b1-k6.json" in propose
    # chosen among the candidates that passed the conformance half (its logs kept on the host)
    keep = tmp_path / "conf-keep"
    assert f"--conformance {keep}/conformance-candidate-bf16.log " in propose
    assert f"{keep}/conformance-candidate-serving.log --write" in propose
    for ln in final:
        assert f"GDN_UCACHE_OURS_MODULE={proposed}" in ln or f"ours={proposed}" in ln
    order = [i for i, ln in enumerate(python) if "knockout.py" in ln or "bench_ucache" in ln]
    assert [(" propose " in python[i], "bench_ucache" in python[i]) for i in order] == [
        (False, False),  # candidates
        (False, False),  # warm B=1
        (True, False),
        (False, True),
        (False, True),
        (False, False),  # knock-outs
    ]
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln and "suite-k6-" in ln]
    names = sorted(out_name(ln) for ln in suites)
    assert names == [
        "suite-k6-chain-late13",
        "suite-k6-knobs-late10",
        "suite-k6-knobs-late13",
        "suite-k6-late10",
        "suite-k6-late13",
    ]
    for ln in suites:
        assert "GDN_UCACHE_BV=128" in ln
        knobs = "knobs" in out_name(ln) or "chain" in out_name(ln)
        assert ("GDN_UCACHE_T1EARLY=1" in ln) == knobs
        # next has chain (late13 with persistent CTAs): its suite walks 2 programs
        chain = "chain" in out_name(ln)
        assert ("GDN_UCACHE_PERSIST=6 GDN_UCACHE_NPROG=2" in ln) == chain
    bench = [ln for ln in lines if "bench_ucache.py" in ln]
    assert len(bench) == 2 and all("triton_vllm" in ln and "final-v10-" in ln for ln in bench)
    sweeps = [ln for ln in lines if "knockout.py" in ln and " propose " not in ln]
    assert len(sweeps) == 3 and all(f"ours={nxt}" in ln for ln in sweeps[:2])
    assert "--warm" in sweeps[1] and "--batch 1 " in sweeps[1] and "base+actfirst" in sweeps[1]
    assert " ours:bv64+actfirst" in sweeps[1]  # session 21: B=1 at HV 48/64
    # session 21's default candidates: ostage on the table's entries, the load-order knobs, the
    # bulk forms named whole (xpf left the default: it lost everywhere in session 16)
    for knob in ("ostage", "t1early", "t1early+t1l2", "t1early+t1l2+wvearly", "actfirst"):
        assert f" ours:base+{knob} " in sweeps[0]
    assert "xpf" not in sweeps[0]
    assert (out / "kernel-k6.tar.gz").is_file()


def test_k6_repeats_add_processes_per_arm(tmp_path: Path) -> None:
    """K6_REPEATS=3: the final grid's process per arm plus two more of ours and flashinfer, each
    with its own tag (bench/targets.py merges them)."""
    calls, _ = run_mode(tmp_path, "k6", {"K6_REPEATS": "3", "K6_STEPS": "bench"})
    bench = [ln for ln in calls.splitlines() if "bench_ucache.py" in ln]
    tags = [ln.split("--tag ")[1].split()[0] for ln in bench]
    assert tags == [
        "final-v10-serving",
        "final-v10-serving-r2",
        "final-v10-serving-r3",
        "final-v10-bf16",
        "final-v10-bf16-r2",
        "final-v10-bf16-r3",
    ]
    for tag, ln in zip(tags, bench, strict=True):  # repeats: ours and flashinfer only
        assert ("triton_vllm" in ln) == (not tag.endswith(("-r2", "-r3")))


def test_k6_steps_split_the_call(tmp_path: Path) -> None:
    """K6_STEPS=conf runs the conformance and the forced suites only, K6_STEPS=bench the timing
    only; each half leaves its archive."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "bench").mkdir()
    keep = {"K6_CONF_KEEP": str(tmp_path / "keep")}  # one host: the halves share its /tmp
    lone, _ = run_mode(tmp_path / "bench", "k6", {"K6_STEPS": "bench"} | keep)
    assert "--conformance" not in lone, "no conformance half on this host: nothing to filter by"
    conf, out_c = run_mode(tmp_path / "conf", "k6", {"K6_STEPS": "conf"} | keep)
    assert "run_gpu_suite.py" in conf and "test_ours_conformance_gpu.py" in conf
    # a suite is forced onto chain exactly when the shipped file has it (v12 does, v10 did not)
    has_chain = "self.chain = " in (ROOT / "kernels/gdn_ucache_flush.py").read_text()
    assert ("suite-k6-chain" in conf) == has_chain
    assert "bench_ucache.py" not in conf and "knockout.py" not in conf
    shutil.rmtree(tmp_path / "bench")
    (tmp_path / "bench").mkdir()
    bench, out_b = run_mode(tmp_path / "bench", "k6", {"K6_STEPS": "bench"} | keep)
    assert f"--conformance {tmp_path}/keep/conformance-candidate-bf16.log" in bench
    assert "run_gpu_suite.py" not in bench and "test_ours_conformance_gpu.py" not in bench
    assert bench.count("bench_ucache.py") == 2 and bench.count("knockout.py") == 4
    assert (out_c / "kernel-k6.tar.gz").is_file() and (out_b / "kernel-k6.tar.gz").is_file()
    # the conf half also leaves a checkpoint of its conformance logs before the forced suites (a
    # call cut by its limit keeps them), the bench half none
    with tarfile.open(out_c / "kernel-k6-conf.tar.gz") as tar:
        names = tar.getnames()
    assert "kernel/suite-k6.log" in names and "kernel/conformance-candidate-bf16.log" in names
    assert not any("suite-k6-late13" in n for n in names), "taken before the forced suites"
    assert not (out_b / "kernel-k6-conf.tar.gz").exists()


@pytest.mark.parametrize(
    ("mem_mib", "serial"), [("81559", True), ("no number", True), ("143771", False)]
)
def test_k6_knob_suites_wait_for_the_forced_ones_on_an_80_gb_card(
    tmp_path: Path, mem_mib: str, serial: bool
) -> None:
    """Four forced suites at once ran an H100 out of memory (sessions 22-24): below 100 GB, or
    where nvidia-smi gives no number, the knob suites start only after the plain ones ended."""
    env = {"K6_STEPS": "conf", "GDN_GPU_MEM_MIB": mem_mib, "STUB_SUITE_S": "0.5"}
    calls, _ = run_mode(tmp_path, "k6", env)
    lines = [ln for ln in calls.splitlines() if "run_gpu_suite.py" in ln]
    forced_ends = [i for i, ln in enumerate(lines) if ln.startswith("ended") and "k6-late" in ln]
    knob_starts = [i for i, ln in enumerate(lines) if ln.startswith("python3") and "knobs" in ln]
    assert len(forced_ends) == 2 and len(knob_starts) == 2, lines
    assert (max(forced_ends) < min(knob_starts)) == serial, lines


def test_k6_final_step_times_the_shipped_file_alone(tmp_path: Path) -> None:
    """K6_STEPS=final: the issue's benchmark (both arms, with the Triton baseline) of the file
    as it is, no candidate sweep, no propose, no knock-outs, no conformance."""
    nxt = "kernels/gdn_ucache_flush_next.py"
    calls, out = run_mode(tmp_path, "k6", {"K6_STEPS": "final", "K6_MODULE": nxt, "K6_TAG": "v12"})
    lines = calls.splitlines()
    bench = [ln for ln in lines if "bench_ucache.py" in ln]
    assert [ln.split("--tag ")[1].split()[0] for ln in bench] == [
        "final-v12-serving",
        "final-v12-bf16",
    ]
    assert all("triton_vllm" in ln and f"GDN_UCACHE_OURS_MODULE={nxt} " in ln for ln in bench)
    assert "knockout.py" not in calls and "run_gpu_suite.py" not in calls
    assert "test_ours_conformance_gpu.py" not in calls
    assert (out / "kernel-k6.tar.gz").is_file()


def test_k18_checks_tepi_and_nobar_before_timing_them(tmp_path: Path) -> None:
    """k18: #3's suite forced onto tepi (late13 with the B >= 128 knobs, late10 with t1early) and
    onto nobar, the launch candidates with tepi / nobar / dsreg (both arms), then one sweep of
    the table, the table + tepi (with and without t1early) and nobar vs flashinfer; one archive."""
    calls, out = run_mode(tmp_path, "k18")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert sorted(out_name(ln) for ln in suites) == [
        "suite-k18-nobar-late13",
        "suite-k18-tepi-late10",
        "suite-k18-tepi-late13",
    ]
    for ln in suites:
        assert "GDN_UCACHE_T1EARLY=1" in ln and "GDN_UCACHE_BV=128" in ln
        assert ("GDN_UCACHE_TEPI=1" in ln) == ("-tepi-" in out_name(ln))
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and (tepi or nobar or dsreg)" in conf
    (sweep,) = [ln for ln in lines if "bench/knockout.py" in ln]
    assert " ours:base ours:base+tepi ours:base+t1early ours:base+t1early+tepi " in sweep
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k18.tar.gz"]


@pytest.mark.parametrize(
    ("mode", "sweeps"),
    [("k18", 1), ("k19", 1), ("k20", 1), ("k21", 2), ("k23", 1), ("k24", 1)],
)
def test_conf_0_runs_the_sweeps_alone(tmp_path: Path, mode: str, sweeps: int) -> None:
    """K<N>_CONF=0 (conformance already passed on another card): no suite, no candidates, the
    mode's sweeps (k21: cold and warm) and its archive."""
    calls, out = run_mode(tmp_path, mode, {f"{mode.upper()}_CONF": "0"})
    lines = calls.splitlines()
    assert not [ln for ln in lines if "run_gpu_suite.py" in ln or "conformance_gpu" in ln]
    assert len([ln for ln in lines if "bench/knockout.py" in ln]) == sweeps
    assert sorted(p.name for p in out.iterdir()) == ["kernel", f"kernel-{mode}.tar.gz"]


def test_k19_checks_afe_before_timing_it(tmp_path: Path) -> None:
    """k19: #3's suite forced onto afe (late13 with the B >= 128 knobs, late10), the launch
    candidates with afe (both arms), then one sweep of the table, the table + afe, tepi and
    no_epi vs flashinfer; one archive."""
    calls, out = run_mode(tmp_path, "k19")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert sorted(out_name(ln) for ln in suites) == ["suite-k19-afe-late10", "suite-k19-afe-late13"]
    for ln in suites:
        assert "GDN_UCACHE_AFE=1" in ln and "GDN_UCACHE_BV=128" in ln
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and afe" in conf
    (sweep,) = [ln for ln in lines if "bench/knockout.py" in ln]
    assert " ours:base ours:base+afe ours:base+t1early+afe ours:base+tepi ours:base+no_epi" in sweep
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k19.tar.gz"]


def test_k20_checks_ostage_before_timing_it(tmp_path: Path) -> None:
    """k20: #3's suite forced onto ostage through afe (late13) and through phase 5 (late10), the
    launch candidates with ostage (both arms), then one sweep; one archive."""
    calls, out = run_mode(tmp_path, "k20")
    lines = calls.splitlines()
    suites = {out_name(ln): ln for ln in lines if "run_gpu_suite.py" in ln}
    assert sorted(suites) == ["suite-k20-afe-ostage-late13", "suite-k20-ostage-late10"]
    assert all("GDN_UCACHE_OSTAGE=1" in ln for ln in suites.values())
    assert "GDN_UCACHE_AFE=1" in suites["suite-k20-afe-ostage-late13"]
    assert "GDN_UCACHE_AFE= " in suites["suite-k20-ostage-late10"]
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and ostage" in conf
    (sweep,) = [ln for ln in lines if "bench/knockout.py" in ln]
    assert " ours:base ours:base+ostage ours:base+afe+ostage " in sweep
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k20.tar.gz"]


def test_k21_checks_stef_then_times_it_cold_and_warm(tmp_path: Path) -> None:
    """k21: #3's suite forced onto stef (late13; late10 with ostage), the launch candidates with
    stef (both arms), then a cold-L2 and a warm sweep; one archive."""
    calls, out = run_mode(tmp_path, "k21")
    lines = calls.splitlines()
    suites = {out_name(ln): ln for ln in lines if "run_gpu_suite.py" in ln}
    assert sorted(suites) == ["suite-k21-stef-late13", "suite-k21-stef-ostage-late10"]
    assert all("GDN_UCACHE_STEF=1" in ln for ln in suites.values())
    assert "GDN_UCACHE_OSTAGE=1" in suites["suite-k21-stef-ostage-late10"]
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and stef" in conf
    sweeps = [ln for ln in lines if "bench/knockout.py" in ln]
    assert len(sweeps) == 2 and "--warm" not in sweeps[0] and "--warm" in sweeps[1]
    assert " ours:base ours:base+stef ours:base+stef+ostage " in sweeps[0]
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k21.tar.gz"]


def test_k22_profiles_residency_for_each_form(tmp_path: Path) -> None:
    """k22: four Nsight Compute profiles (the table with flashinfer; dsreg, no_epi and afe +
    ostage alone, each its own process with its knobs), verify-only at HV 32/64 x B 256/128,
    reports removed, one archive."""
    calls, out = run_mode(tmp_path, "k22")
    profiles = [ln for ln in calls.splitlines() if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 4
    assert "--backends ours flashinfer --hv 32 64 --batch 256 128 --flush 0" in profiles[0]
    assert "GDN_UCACHE_DSREG=1" in profiles[1] and "GDN_UCACHE_SKIP=epi" in profiles[2]
    assert "GDN_UCACHE_AFE=1" in profiles[3] and "GDN_UCACHE_OSTAGE=1" in profiles[3]
    assert all("GDN_UCACHE_OURS_MODULE=kernels/gdn_ucache_flush_next.py" in ln for ln in profiles)
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k22.tar.gz"]
    with tarfile.open(out / "kernel-k22.tar.gz") as tar:
        assert not [n for n in tar.getnames() if n.endswith(".ncu-rep")]


def test_k23_tests_the_l2_limit(tmp_path: Path) -> None:
    """k23: the ostage candidates (both arms), one sweep of the table with ostage and without
    t1l2 vs flashinfer, then three ncu profiles (the table with flashinfer; ostage; the B >= 128
    knobs without t1l2, with ostage); reports removed, one archive."""
    calls, out = run_mode(tmp_path, "k23")
    lines = calls.splitlines()
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and ostage" in conf
    (sweep,) = [ln for ln in lines if "bench/knockout.py" in ln]
    assert " ours:base ours:base+ostage ours:base+afe+ostage " in sweep
    assert " ours:bv128+late13+mbp0+t1early+wvearly+ostage " in sweep
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 3
    assert "--backends ours flashinfer" in profiles[0]
    assert "GDN_UCACHE_OSTAGE=1" in profiles[1] and "GDN_UCACHE_T1EARLY=1" in profiles[2]
    assert "GDN_UCACHE_LATE=13" in profiles[2] and "GDN_UCACHE_BV=128" in profiles[2]
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k23.tar.gz"]


def test_k24_checks_tproj_before_timing_and_profiling_it(tmp_path: Path) -> None:
    """k24: #3's suite forced onto tproj (late13 with the B >= 128 knobs, late10), the launch
    candidates with tproj (both arms), one sweep of the table with tproj vs flashinfer, then ncu
    of the table with flashinfer and of tproj; reports removed, one archive."""
    calls, out = run_mode(tmp_path, "k24")
    lines = calls.splitlines()
    suites = [ln for ln in lines if "run_gpu_suite.py" in ln]
    assert len(suites) == 2 and all("GDN_UCACHE_TPROJ=1" in ln for ln in suites)
    (conf,) = [ln for ln in lines if "test_ours_conformance_gpu.py" in ln]
    assert "candidate and tproj" in conf
    (sweep,) = [ln for ln in lines if "bench/knockout.py" in ln]
    assert " ours:base ours:base+tproj ours:base+tproj+ostage ours:base+no_epi" in sweep
    profiles = [ln for ln in lines if ln.startswith("ncu ") and " -o " in ln]
    assert len(profiles) == 2
    assert "--backends ours flashinfer" in profiles[0] and "GDN_UCACHE_TPROJ=1" in profiles[1]
    assert "smsp__inst_executed.sum" in profiles[0]
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k24.tar.gz"]


def test_k25_sweeps_b1_rows_per_cta_twice(tmp_path: Path) -> None:
    """k25: two warm-L2 B=1 sweeps (separate processes) of rows per CTA 16..128 with actfirst
    next to the table and flashinfer; one archive."""
    calls, out = run_mode(tmp_path, "k25")
    sweeps = [ln for ln in calls.splitlines() if "bench/knockout.py" in ln]
    assert len(sweeps) == 2 and all("--warm" in ln and "--batch 1 " in ln for ln in sweeps)
    assert all(
        " ours:base ours:bv16+actfirst ours:bv32+actfirst ours:bv64+actfirst ours:bv128+actfirst"
        in ln
        for ln in sweeps
    )
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k25.tar.gz"]


def test_k26_sweeps_stag_then_probes_producer_consumer(tmp_path: Path) -> None:
    """k26: one sweep of next's stagN columns next to the table and flashinfer (next as the
    `ours` module), a checkpoint archive, then the producer / consumer probe (the shipped file as
    `ours`, its own configurations unless K26_PC_CONFIGS names some)."""
    calls, out = run_mode(tmp_path, "k26", {"K26_PC_CONFIGS": "plain:0 pc:3:2:0"})
    lines = calls.splitlines()
    sweep = [ln for ln in lines if "sweep-k26" in ln]
    assert len(sweep) == 1
    assert (
        "--variants ours:base ours:base+stag500 ours:base+stag1000 ours:base+stag2000 "
        "ours:base+stag4000 " in sweep[0]
    )
    assert "--modules ours=kernels/gdn_ucache_flush_next.py " in sweep[0]
    probe = [ln for ln in lines if "bench.pc_probe" in ln]
    assert len(probe) == 1 and "--configs plain:0 pc:3:2:0 " in probe[0]
    assert "GDN_UCACHE_OURS_MODULE=kernels" not in probe[0]
    assert lines.index(sweep[0]) < lines.index(probe[0])
    rowlat = [ln for ln in lines if "rowlat-k26" in ln]
    assert len(rowlat) == 1 and lines.index(probe[0]) < lines.index(rowlat[0])
    assert "--warm " in rowlat[0] and "--batch 1 4 16 " in rowlat[0]
    assert " ours:bv128+late13+persist1+nprog1 " in rowlat[0]
    assert "--modules ours=kernels/gdn_ucache_flush_next.py " in rowlat[0]
    assert sorted(p.name for p in out.iterdir()) == [
        "kernel", "kernel-k26-sweep.tar.gz", "kernel-k26.tar.gz",
    ]  # fmt: skip


def test_k26_short_form_probes_first_and_bounds_the_sweep(tmp_path: Path) -> None:
    """K26_PROBE_FIRST=1 and SWEEP_BUDGET_S (a call on a nearly spent lease): the probe runs and
    is archived before the sweep, whose budget and timeout follow SWEEP_BUDGET_S."""
    calls, out = run_mode(tmp_path, "k26", {"K26_PROBE_FIRST": "1", "SWEEP_BUDGET_S": "60"})
    lines = calls.splitlines()
    probe = [i for i, ln in enumerate(lines) if "bench.pc_probe" in ln]
    sweep = [i for i, ln in enumerate(lines) if "sweep-k26" in ln]
    rowlat = [i for i, ln in enumerate(lines) if "rowlat-k26" in ln]
    assert len(probe) == 1 and len(sweep) == 1 and probe[0] < rowlat[0] < sweep[0]
    assert "--budget-s 60 " in lines[sweep[0]]
    assert sorted(p.name for p in out.iterdir()) == [
        "kernel", "kernel-k26-probe.tar.gz", "kernel-k26-sweep.tar.gz", "kernel-k26.tar.gz",
    ]  # fmt: skip


def test_k26_without_sweep_probes_and_times_rows_only(tmp_path: Path) -> None:
    """K26_SWEEP=0 (a lease with ~2 minutes left): the probe and the row-latency step, no sweep."""
    calls, out = run_mode(tmp_path, "k26", {"K26_PROBE_FIRST": "1", "K26_SWEEP": "0"})
    lines = calls.splitlines()
    assert [ln for ln in lines if "sweep-k26" in ln] == []
    assert len([ln for ln in lines if "bench.pc_probe" in ln]) == 1
    assert len([ln for ln in lines if "rowlat-k26" in ln]) == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "kernel", "kernel-k26-probe.tar.gz", "kernel-k26.tar.gz",
    ]  # fmt: skip


def test_k30_times_both_launch_tables_then_checks_the_cards_table(tmp_path: Path) -> None:
    """k30: the shipped file against a copy held to the H200's table, in two processes, then
    #3's suite on the shipped file; one archive."""
    calls, out = run_mode(tmp_path, "k30")
    sweeps = [ln for ln in calls.splitlines() if "bench/knockout.py" in ln]
    assert len(sweeps) == 2
    for ln in sweeps:
        assert "--batch 256 128 32 8 " in ln and "--variants ours:base h200t:base |" in ln
        copy = ln.split("h200t=")[1].split()[0]
        assert "--modules ours=kernels/gdn_ucache_flush.py h200t=" in ln
    assert copy.endswith("/one-table-k30.py")
    with tarfile.open(out / "kernel-k30.tar.gz") as tar:
        text = tar.extractfile("kernel/one-table-k30.py").read().decode()
    assert "\n_H100_CLASS = ()\n" in text and "_TUNED_T4_H100" in text
    suites = [ln for ln in calls.splitlines() if "run_gpu_suite.py" in ln]
    assert len(suites) == 1 and "GDN_UCACHE_OURS_MODULE=kernels/gdn_ucache_flush.py" in suites[0]
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "kernel-k30.tar.gz"]
