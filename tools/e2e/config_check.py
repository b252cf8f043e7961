"""Validate every e2e job's engine configuration with the patched vLLM, on CPU (no GPU, no driver).

    python3 -m tools.e2e.config_check MODELS_DIR     # MODELS_DIR from `bench/e2e.py models`

vLLM's config validators (the series' ReplaySSM and ucache checks among them) run inside
`EngineArgs.create_engine_config()`. This runs that for every job of the correctness and
badconfig suites against a stand-in H200 platform (SM 9.0, CUDA enum) with the few driver-bound
probes answered (FlashAttention import, CUTLASS capability ops). It checks two things:
- the engine configurations that must start do validate;
- the bad configurations fail with the designed message (the job's `expect_error`).
That catches a renamed flag or a changed message before a device call. Exit status 1 on any
mismatch.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install_fake_h200() -> None:
    """Make vLLM believe it runs on an SM90 CUDA platform, without importing the CUDA platform
    module (its compiled ops need libcuda)."""
    import torch
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    class FakeH200(Platform):
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        dist_backend = "nccl"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(9, 0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "NVIDIA H200 (stand-in)"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 141 << 30

    platforms._current_platform = FakeH200()
    flash_attn = types.ModuleType("vllm.vllm_flash_attn")
    flash_attn.__path__ = []  # type: ignore[attr-defined]

    def any_attr(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: True

    flash_attn.__getattr__ = any_attr  # type: ignore[attr-defined]
    sys.modules["vllm.vllm_flash_attn"] = flash_attn
    for op in (
        "cutlass_scaled_mm_supports_block_fp8",
        "cutlass_scaled_mm_supports_fp8",
        "cutlass_scaled_mm_supports_fp4",
        "cutlass_group_gemm_supported",
    ):
        setattr(torch.ops._C, op, lambda *args, **kwargs: False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models_dir", type=Path)
    parser.add_argument(
        "--modes", default="eager,full_graphs,piecewise_compile,prefix_caching,preemption"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import bench.e2e as e2e  # noqa: F401 - same module the run uses (pre_ring_module)
    from tools.e2e import plan

    install_fake_h200()
    from vllm.engine.arg_utils import EngineArgs

    tmp = Path(tempfile.mkdtemp(prefix="e2e-config-"))
    e2e.pre_ring_module(tmp)
    jobs = plan.suite_jobs(
        "correctness", list(plan.BACKENDS), args.modes.split(","), 1, str(tmp)
    ) + plan.badconfig_jobs("tiny-agree", str(tmp))
    bad = 0
    for job in jobs:
        env = {k: os.path.expandvars(v) for k, v in job.env.items()}
        env = {k: v for k, v in env.items() if "$" not in v}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            cfg = EngineArgs(
                model=str(args.models_dir / job.model), skip_tokenizer_init=True, **job.engine
            ).create_engine_config()
            cache = cfg.cache_config
            text = (
                f"valid: ssm_dtype={cache.mamba_ssm_cache_dtype} "
                f"replay={getattr(cache, 'use_gdn_replayssm_spec', None)}"
            )
            ok = job.expect_error is None
        except Exception as exc:  # noqa: BLE001 - each outcome is reported
            text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
            ok = job.expect_error is not None and re.search(job.expect_error, text) is not None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {job.key}: {text[:260]}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(jobs) - bad}/{len(jobs)} as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
