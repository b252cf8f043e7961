"""Check every patch of series part 1 at its own commit: vLLM lint of its files, then its tests.

    python tests/series/run_patch_tests.py --vllm-python /path/to/venv/bin/python

Each commit of branch gdn-ucache (vllm/) is checked out in a temporary worktree. Lint runs vLLM's
pinned ruff (check + format) and typos on the Python files the commit changes (the venv that
scripts/lint-vllm.sh caches). The tests are the patch's own vLLM tests; they need an interpreter
with vLLM's dependencies (torch 2.14.x, torchvision, transformers, ... as vLLM 0.33.0 pins) given
by --vllm-python. Without a GPU the Triton kernels run in Triton's interpreter (plugins/), the
kernel test through tests/series/vllm_triton_shim.py with this interpreter. Prints one line per
patch and exits 1 if any patch fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "vllm"
PLUGINS = Path(__file__).resolve().parent / "plugins"

# Subject prefix -> (tests, needs vLLM's dependencies, extra pytest args).
PATCH_TESTS: dict[str, tuple[list[str], bool, list[str]]] = {
    "[Kernel] GDN ReplaySSM": (
        ["tests/kernels/mamba/test_gdn_replayssm_spec_decode.py"],
        False,
        [],
    ),
    "[Core] GDN ReplaySSM state layout": (
        ["tests/kernels/mamba/test_gdn_replayssm_state_layout.py"],
        True,
        [],
    ),
    "[Attention] GDN metadata": (["tests/v1/attention/test_gdn_replayssm_metadata.py"], True, []),
    "[Model] Qwen GDN: dispatch": (
        ["tests/kernels/mamba/test_gdn_replayssm_layer_dispatch.py"],
        True,
        ["-p", "force_triton"],
    ),
    "[Feature] Enable GDN ReplaySSM": (
        ["tests/test_config.py", "-k", "gdn_replayssm or qwen3_5_declares or kda_recoverssm"],
        True,
        [],
    ),
}


def git(*args: str, cwd: Path = VLLM) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def lint(worktree: Path, commit: str) -> str:
    from tools.series.layout import default_layout
    from tools.series.lint import hook_versions, lint_venv

    files = git("diff", "--name-only", f"{commit}~1", commit, "--", "*.py").split()
    if not files:
        return "ok"
    bin_dir = lint_venv(default_layout(ROOT), hook_versions(VLLM))
    for tool in (["ruff", "check", "-q"], ["ruff", "format", "-q", "--check"], ["typos"]):
        if subprocess.run([str(bin_dir / tool[0]), *tool[1:], *files], cwd=worktree).returncode:
            return f"FAIL ({tool[0]} {tool[1] if len(tool) > 1 else ''})"
    return "ok"


def run_tests(worktree: Path, subject: str, vllm_python: str, gpu: bool) -> str:
    matches = [spec for prefix, spec in PATCH_TESTS.items() if subject.startswith(prefix)]
    if not matches:
        return "no tests registered"
    tests, needs_vllm, extra = matches[0]
    env = dict(os.environ, VLLM_SRC_ROOT=str(worktree))
    env.pop("TRITON_INTERPRET", None)
    if not gpu and ("force_triton" in extra or not needs_vllm):
        env["TRITON_INTERPRET"] = "1"  # Triton kernels in the CPU interpreter
    base = ["-q", "-p", "no:cacheprovider", "--noconftest"]
    if needs_vllm:
        env["PYTHONPATH"] = str(PLUGINS)
        plugins = [] if gpu else ["-p", "nopin", *extra]
        cmd = [vllm_python, "-m", "pytest", *base, *plugins, *tests]
        cwd = worktree
    else:
        env.update(GDN_SERIES_VLLM_ROOT=str(worktree), PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "pytest", *base, "-p", "tests.series.vllm_triton_shim"]
        cmd += ["--import-mode=importlib", *(str(worktree / t) for t in tests)]
        cwd = ROOT
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    last = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    return last if result.returncode == 0 else f"FAIL: {last}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python", required=True, help="interpreter with vLLM's deps")
    parser.add_argument("--base", default="vllm-0.33.0", help="base branch in vllm/")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    gpu = torch.cuda.is_available()
    failed = False
    commits = git("rev-list", "--reverse", f"{args.base}..gdn-ucache").split()
    for number, commit in enumerate(commits, start=1):
        subject = git("log", "-1", "--format=%s", commit)
        with tempfile.TemporaryDirectory(prefix="series-patch-") as scratch:
            worktree = Path(scratch) / "vllm"
            git("worktree", "add", "--detach", str(worktree), commit)
            try:
                lint_status = lint(worktree, commit)
                test_status = run_tests(worktree, subject, args.vllm_python, gpu)
            finally:
                git("worktree", "remove", "--force", str(worktree))
        failed |= "FAIL" in lint_status + test_status
        print(f"{number}. {subject[:70]}\n   lint {lint_status}; tests {test_status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
