"""H200 check of upstream-design §7.3 with flashinfer's real kernel file (prints one JSON line).

Imports the kernel under its package name with no GDN_* variables set, as `import flashinfer`
does, then asks vLLM's adapter for its serving configuration without VLLM_GDN_UCACHE_MODULE.
Expected: the package copy is frozen at bf16 state/rings with compact q/k/v; the adapter returns a
private copy with fp16 state/rings and strided q/k/v and leaves the package copy alone.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels.reference import ucache_adapter  # noqa: E402

KERNEL = "flashinfer.gdn_kernels.gdn_decode_bf16_wy_ucache_flush"


def settings(module: object) -> dict[str, str]:
    names = ("IO_TORCH", "ST_TORCH", "RING_TORCH", "_STRIDED_QKV")
    return {name: str(getattr(module, name, None)) for name in names}


def main() -> None:
    for name in (
        "GDN_UCACHE_IO_DTYPE",
        "GDN_UCACHE_STATE_DTYPE",
        "GDN_UCACHE_RING_DTYPE",
        "SGLANG_GDN_WY_STRIDED_QKV",
        "VLLM_GDN_UCACHE_MODULE",
    ):
        os.environ.pop(name, None)
    adapter = ucache_adapter.load_adapter()
    frozen = importlib.import_module(KERNEL)
    before = settings(frozen)
    module = adapter.load_ucache_kernel_module()
    print(
        json.dumps(
            {
                "package_copy_after_import": before,
                "adapter_copy": settings(module),
                "adapter_copy_is_private": module is not frozen,
                "adapter_copy_name": module.__name__,
                "package_copy_unchanged": settings(sys.modules[KERNEL]) == before,
            }
        )
    )


if __name__ == "__main__":
    main()
