"""Import every module the e2e run needs from an unpacked GPU-host bundle (no GPU needed).

    PYTHONPATH=/tmp/gdn-host/site/.boot CUDA_VISIBLE_DEVICES= \
        python3.12 tools/gpuhost/import_check.py

Run it with a Python 3.12 that has the GPU host's own packages (torch, transformers, ...; see the
top of tools/gpuhost/wheels.txt) to find a missing wheel on CPU instead of in a device call.
Exit status 1 if any module fails; each failure names the missing module.
"""

from __future__ import annotations

import importlib
import sys
import time

MODULES = (
    "vllm",
    "vllm.envs",
    "vllm.platforms",
    "vllm.config",
    "vllm.triton_utils",
    "vllm.model_executor.layers.mamba.mamba_utils",
    "vllm.model_executor.layers.mamba.ops.gdn_replayssm_spec_decode",
    "vllm.model_executor.layers.mamba.ops.gdn_ucache_spec",
    "vllm.model_executor.layers.mamba.gdn.spec_backend",
    "vllm.v1.attention.backends.gdn_attn",
    "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn",
    "vllm.model_executor.models.qwen3_5",
    "vllm.model_executor.models.qwen3_5_mtp",
    "vllm.v1.engine.llm_engine",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle",
    "vllm.entrypoints.llm",
    "flashinfer",
    "cutlass",
    "cutlass.cute",
)


def main() -> int:
    failed = 0
    for name in MODULES:
        start = time.time()
        try:
            importlib.import_module(name)
            print(f"OK   {name} ({time.time() - start:.1f}s)", flush=True)
        except Exception as exc:  # noqa: BLE001 - report every failure, go on
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
