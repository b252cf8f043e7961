"""Run the series' own vLLM tests for its Triton ops on CPU (TRITON_INTERPRET=1).

The files are materialised from the committed patches (``git apply --include``
of the files the series creates), so CI tests exactly what ``patches/`` holds,
without a vLLM checkout or vLLM's dependencies: ``vllm_triton_shim`` binds
``vllm.triton_utils`` to the real Triton. The vLLM test files run unchanged in
a subprocess (the interpreter is chosen when ``triton.jit`` decorates).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.series.patchfile import parse_patch, read_series

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"

# Files created by the series that run without the rest of vLLM.
CPU_FILES = (
    "vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py",
    "tests/kernels/mamba/test_gdn_replayssm_spec_decode.py",
)


def materialise(dest: Path) -> list[str]:
    """Apply the series' hunks for CPU_FILES into ``dest``; return those present."""
    present: list[str] = []
    for path in read_series(PATCHES):
        changed = set(parse_patch(path).changed_paths()) & set(CPU_FILES)
        if not changed:
            continue
        includes = [f"--include={name}" for name in sorted(changed)]
        subprocess.run(
            ["git", "apply", *includes, str(path)], cwd=dest, check=True, capture_output=True
        )
        present.extend(name for name in changed if name not in present)
    return present


@pytest.fixture(scope="module")
def series_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to materialise the patches")
    pytest.importorskip("triton", reason="the Triton interpreter runs the series' ops")
    dest = tmp_path_factory.mktemp("series-cpu")
    present = materialise(dest)
    if not any(name.startswith("tests/") for name in present):
        pytest.skip("the series has no CPU-runnable Triton op tests yet")
    return dest


@pytest.mark.parametrize("test_file", [f for f in CPU_FILES if f.startswith("tests/")])
def test_vllm_series_tests_under_triton_interpreter(series_tree: Path, test_file: str) -> None:
    if not (series_tree / test_file).is_file():
        pytest.skip(f"{test_file} is not in the series")
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        GDN_SERIES_VLLM_ROOT=str(series_tree),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.series.vllm_triton_shim",
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "--import-mode=importlib",
            f"--rootdir={series_tree}",
            str(series_tree / test_file),
        ],
        cwd=series_tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    assert result.returncode == 0, f"vLLM tests failed under TRITON_INTERPRET=1:\n{tail}"
    assert " passed" in result.stdout, tail


ADAPTER_CHECK = """
import torch
from pathlib import Path
from kernels.reference import replay
from kernels.reference.backends import load_module_by_path

adapter = load_module_by_path(Path("tests/series/triton_baseline_adapter.py"), {}, "cpu")
gen = torch.Generator().manual_seed(0)
B, T, H, HV, K, V, SLOTS = 4, 4, 1, 2, 16, 16, 6


def randn(*shape, std=1.0):
    return torch.randn(*shape, generator=gen) * std


x = dict(
    A_log=torch.rand(HV, generator=gen) - 2, a=randn(B, T, HV), dt_bias=randn(HV, std=0.5),
    q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, HV, V, std=0.5), b=randn(B, T, HV),
)
pool = randn(SLOTS, HV, V, K, std=0.3)
k_ring = torch.nn.functional.normalize(randn(SLOTS, H, 32, K), dim=-1)
u_ring = randn(SLOTS, HV, 32, V, std=0.3)
g_ring = -(torch.rand(SLOTS, HV, 32, generator=gen) * 0.1).cumsum(-1)
# empty window on slot 0 (legal), the largest verify window, a wrapping flush, a pad row
hist = torch.tensor([0, 12, 14, 5], dtype=torch.int32)
base = torch.tensor([3, 28, 30, 0], dtype=torch.int32)
idx = torch.tensor([0, 2, 4, -1], dtype=torch.int32)
results = []
for fn in (replay.gated_delta_rule_mtp_ucache_flush, adapter.gated_delta_rule_mtp_ucache_flush):
    state = [t.clone() for t in (pool, k_ring, u_ring, g_ring)]
    out = torch.full((B, T, HV, V), float("nan"))
    fn(x["A_log"], x["a"], x["dt_bias"], q=x["q"], k=x["k"], v=x["v"], b=x["b"],
       initial_state_source=state[0], initial_state_indices=idx, k_cache=state[1],
       u_cache=state[2], g_cache=state[3], hist_len=hist.clone(), cache_base=base.clone(),
       flush_min=13, restart_hist_on_flush=False, output=out)
    results.append((out, state))
(ref_out, ref_state), (out, state) = results
assert out[3].isnan().all(), "pad row output must stay untouched"
torch.testing.assert_close(out[:3], ref_out[:3], atol=1e-5, rtol=1e-5)
for ref, got in zip(ref_state, state):
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5, equal_nan=True)
print("adapter matches the oracle")
"""


def test_triton_adapter_matches_oracle(series_tree: Path) -> None:
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        GDN_SERIES_VLLM_ROOT=str(series_tree),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    result = subprocess.run(
        [sys.executable, "-c", ADAPTER_CHECK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


COMPILE_CHECK = """
import inspect
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tests.series import vllm_triton_shim

root, arch = sys.argv[1], int(sys.argv[2])
ops = vllm_triton_shim.load(root, vllm_triton_shim.SHIMMED_MODULES[0])
POINTERS_INT = {"state_indices", "hist_len", "cache_base", "query_start_loc", "pending_len",
                "num_accepted_tokens", "hist_len_out", "cache_base_out"}


def signature(fn, dtypes):
    sig = {}
    for name, param in inspect.signature(fn.fn).parameters.items():
        if param.annotation is not inspect.Parameter.empty:
            sig[name] = "constexpr"
        elif name in dtypes:
            sig[name] = dtypes[name]
        elif name in POINTERS_INT:
            sig[name] = "*i32"
        elif name == "scale":
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig


target = GPUTarget("cuda", arch, 32)
ARMS = (("bf16", "fp32", "fp16", "tf32"), ("bf16", "fp16", "fp16", "tf32"),
        ("bf16", "bf16", "bf16", "tf32"), ("fp32", "fp32", "fp32", "tf32x3"))
# (block_v, block_k, num_warps): the op's default table rows and the extremes a sweep tries.
CONFIGS = ((32, 32, 4), (64, 32, 4), (128, 32, 8), (128, 64, 8))
for io, state, ring, precision in ARMS:
    dtypes = {name: f"*{io}" for name in ("q", "k", "v", "a", "b", "o")}
    dtypes.update(A_log="*fp32", dt_bias="*fp32", g_ring="*fp32", ssm_state=f"*{state}",
                  k_ring=f"*{ring}", u_ring=f"*{ring}")
    for is_flush in (False, True):
      for block_v, block_k, num_warps in (CONFIGS if state == "fp16" else CONFIGS[:1]):
        constants = dict(softplus_threshold=20.0, H=16, HV=64, K=128, V=128, BV=block_v,
                         BK=block_k, WINDOW=16, RING_SLOTS=32, T_PAD=16, NUM_SQUARINGS=1,
                         IS_FLUSH=is_flush, DOT_PRECISION=precision)
        fn = ops._gdn_replayssm_spec_kernel
        src = ASTSource(fn=fn, signature=signature(fn, dtypes), constexprs=constants)
        triton.compile(src, target=target, options=dict(num_warps=num_warps, num_stages=2))
for reset in (True, False):
    fn = ops._gdn_replayssm_cursor_kernel
    src = ASTSource(fn=fn, signature=signature(fn, {}),
                    constexprs=dict(RING_SLOTS=32, RESET=reset, GATHER=not reset, BLOCK=128))
    triton.compile(src, target=target, options=dict(num_warps=4))
print("compiled for sm", arch)
"""


@pytest.mark.parametrize("arch", [90, 100])
def test_triton_kernels_compile_for_gpu(series_tree: Path, arch: int) -> None:
    """The interpreter accepts code the GPU compiler rejects (e.g. non-constexpr globals):
    compile every kernel variant the series launches for the target GPU (no GPU needed)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run(
        [sys.executable, "-c", COMPILE_CHECK, str(series_tree), str(arch)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


HARNESS_CHECK = """
import sys
from pathlib import Path

from kernels.reference.arms import get_arm
from kernels.reference.backends import KernelHandle, load_module_by_path
from kernels.reference.harness import ConformanceHarness, HarnessConfig

layout, num_tokens = sys.argv[1], int(sys.argv[2])
adapter = load_module_by_path(Path("tests/series/triton_baseline_adapter.py"), {}, "cpu")
handle = KernelHandle(
    backend="triton_vllm", arm=get_arm("serving"), layout=layout,
    fn=adapter.gated_delta_rule_mtp_ucache_flush, device="cpu", supported_t=adapter.SUPPORTED_T,
    pad_output_policy=adapter.PAD_OUTPUT_POLICY, g_ring_format=adapter.G_RING_FORMAT,
)
config = HarnessConfig(num_tokens=num_tokens, steps=16, pad_rows=1, head_dim=16, layout=layout,
                       recycle_prob=0.05)
report = ConformanceHarness(handle, config).run()
assert report.ok, report.failure_text()
assert report.summary()["flush_rows"] > 0
print("harness ok", report.summary())
"""


@pytest.mark.parametrize("layout, num_tokens", [("compact", 4), ("vllm", 8), ("vllm", 1)])
def test_triton_baseline_passes_conformance_harness(
    series_tree: Path, layout: str, num_tokens: int
) -> None:
    """The conformance suite's multi-step harness (cursor protocol, flushes, wraps, pad rows,
    recycled slots; vLLM's packed q/k/v and block-strided pools) drives the Triton baseline
    through its ucache-contract adapter at a small head dim, in the serving dtype arm."""
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        GDN_SERIES_VLLM_ROOT=str(series_tree),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    result = subprocess.run(
        [sys.executable, "-c", HARNESS_CHECK, layout, str(num_tokens)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
