"""Import the series' ucache modules from a vLLM tree without vLLM's dependencies.

Registers plain packages for ``vllm`` and the parents of the ucache modules (their
``__init__.py`` files, which pull in the model executor, are not executed), so the
dependency-light modules (``gdn_ucache_spec``: torch + stdlib; ``spec_backend``: plus
``regex``) and their vLLM tests run under CPU CI. ``vllm.envs`` still loads from the tree when
the tree has it (stdlib only); a tree materialised from patches alone lacks it and the adapter
then reads ``os.environ`` itself.

Used as a pytest plugin (``-p vllm_ucache_shim``, this folder on PYTHONPATH) with
``GDN_SERIES_VLLM_ROOT`` pointing at the tree.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

PACKAGES = (
    "vllm",
    "vllm.model_executor",
    "vllm.model_executor.layers",
    "vllm.model_executor.layers.mamba",
    "vllm.model_executor.layers.mamba.ops",
    "vllm.model_executor.layers.mamba.gdn",
)


def install(vllm_root: str | os.PathLike[str]) -> None:
    root = Path(vllm_root)
    if not (root / "vllm").is_dir():
        raise FileNotFoundError(f"{root} has no vllm/ folder")
    existing = sys.modules.get("vllm")
    if existing is not None and not getattr(existing, "__gdn_ucache_shim__", False):
        raise RuntimeError("a real vllm package is already imported; not shimming it")
    for name in PACKAGES:
        if name in sys.modules:
            continue
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")))]  # type: ignore[attr-defined]
        module.__gdn_ucache_shim__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module


def pytest_configure(config: object) -> None:
    root = os.environ.get("GDN_SERIES_VLLM_ROOT")
    if not root:
        raise RuntimeError("set GDN_SERIES_VLLM_ROOT to the vLLM tree holding the series")
    install(root)
