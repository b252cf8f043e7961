"""bench/h200_run.sh's k8 mode on the CPU, with stub commands: every step it plans runs with the
arguments the H200 call needs, and the archive comes back. A typo found here costs nothing; on the
GPU host it costs device minutes."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$STUB_LOG"
echo "  GDN_UCACHE_SKIP=${GDN_UCACHE_SKIP:-} GDN_UCACHE_OURS_MODULE=${GDN_UCACHE_OURS_MODULE:-}" \\
  >>"$STUB_LOG"
if [[ $(basename "$0") == ncu ]]; then
  prev=""
  for a in "$@"; do
    if [[ $prev == -o ]]; then touch "$a.ncu-rep"; fi
    prev=$a
  done
fi
exit 0
"""


def test_k8_mode_runs_every_step(tmp_path: Path) -> None:
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
    )
    proc = subprocess.run(
        ["bash", "bench/h200_run.sh", "k8"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = log.read_text()
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
