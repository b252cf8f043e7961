"""scripts/build-container.sh: the docker build command it would run, and its refusals."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tools.container.buildinfo import build_info, series_digest
from tools.series.layout import Layout
from tools.series.patchfile import read_series

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/build-container.sh"


def _build(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False, env=env
    )


def _build_argv(stdout: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if "docker build" in line)
    words = shlex.split(line.strip())
    assert words[0] == "DOCKER_BUILDKIT=1"
    return words[1:]


def _build_args(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, word in enumerate(argv) if word == "--build-arg"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_dry_run_passes_pin_and_series_as_build_args() -> None:
    result = _build("--dry-run", "--kernel", "flashinfer")
    assert result.returncode == 0, result.stderr
    argv = _build_argv(result.stdout)
    layout = Layout(ROOT)
    info = build_info(layout)
    args = _build_args(argv)
    assert args["VLLM_VERSION"] == layout.pinned_version()
    assert args["PATCH_COUNT"] == str(len(read_series(layout.patches_dir)))
    assert args["SERIES_DIGEST"] == series_digest(read_series(layout.patches_dir))
    assert args["SERIES_VERSION"] == info.series_version
    assert args["UCACHE_KERNEL"] == "flashinfer"
    assert args["SERIES_FORCE"] == "0"
    assert argv[-1] == str(ROOT)  # the context; .dockerignore trims it
    tag = argv[argv.index("--tag") + 1]
    # The printed docker run command uses the image just built, and the ucache flags.
    run = result.stdout.split("serve Qwen3.5", 1)[1]
    words = shlex.split(run.split("\n", 1)[1].replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and tag in words
    assert words[words.index("--speculative-config") + 1] == (
        '{"method":"mtp","num_speculative_tokens":3}'
    )
    assert words[words.index("--additional-config") + 1] == (
        '{"gdn_spec_backend":"flashinfer_ucache"}'
    )
    assert "--use-replayssm" in words
    assert words[words.index("--mamba-ssm-cache-dtype") + 1] == "auto"


def test_extra_docker_args_and_tag() -> None:
    result = _build("--dry-run", "--kernel", "flashinfer", "--tag", "me/img:1", "--", "--pull")
    assert result.returncode == 0, result.stderr
    argv = _build_argv(result.stdout)
    assert argv[argv.index("--tag") + 1] == "me/img:1"
    assert argv[-2:] == ["--pull", str(ROOT)]


def test_other_vllm_version_needs_force() -> None:
    refused = _build("--dry-run", "--kernel", "flashinfer", "--vllm-version", "0.32.0")
    assert refused.returncode == 1
    assert "differs from vllm.pin" in refused.stderr and "--force" in refused.stderr
    forced = _build("--dry-run", "--kernel", "flashinfer", "--vllm-version", "0.32.0", "--force")
    assert forced.returncode == 0, forced.stderr
    args = _build_args(_build_argv(forced.stdout))
    assert args["VLLM_VERSION"] == "0.32.0" and args["SERIES_FORCE"] == "1"


def test_unknown_kernel_is_refused() -> None:
    result = _build("--dry-run", "--kernel", "triton")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_missing_kernel_file_names_the_alternative(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "patches").mkdir(parents=True)
    (root / "patches/series").write_text("")
    (root / "vllm.pin").write_text("VLLM_VERSION=0.33.0\nVLLM_UPSTREAM_COMMIT=4ba787ec9\n")
    env = {**os.environ, "GDN_UCACHE_ROOT": str(root)}
    result = _build("--dry-run", env=env)
    assert result.returncode == 1
    assert "kernels/gdn_ucache_flush.py does not exist" in result.stderr
    assert "--kernel flashinfer" in result.stderr


def test_without_docker_the_build_says_so() -> None:
    # A PATH without docker; PYTHON keeps the interpreter of this test run.
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable}
    found = subprocess.run(["bash", "-c", "command -v docker"], env=env, capture_output=True)
    if found.returncode == 0:
        return  # docker lives in /usr/bin on this machine: nothing to check here
    result = _build("--kernel", "flashinfer", env=env)
    assert result.returncode == 1
    assert "docker is not installed" in result.stderr and "--dry-run" in result.stderr
