"""Import single patched vLLM modules without installing vLLM.

The series' Triton ops import only ``vllm.triton_utils`` from vLLM. vLLM's real
``vllm.triton_utils`` pulls in the whole config/platform stack (dozens of
packages) and, on a host without a GPU driver, replaces Triton with a
placeholder, so the ops could not run even under ``TRITON_INTERPRET=1``.
This module registers namespace packages for the parents of the requested
modules plus a ``vllm.triton_utils`` that exposes the real ``triton`` and
``triton.language``, then loads the requested files from the patched tree.

Used as a pytest plugin (``-p tests.series.vllm_triton_shim``) with
``GDN_SERIES_VLLM_ROOT`` pointing at the vLLM checkout, and by the benchmark
and the conformance adapter on the GPU host.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

SHIMMED_MODULES = ("vllm.model_executor.layers.mamba.ops.gdn_replayssm_spec_decode",)


def _package(name: str, path: Path) -> types.ModuleType:
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__path__ = [str(path)]  # type: ignore[attr-defined]
        sys.modules[name] = module
    return module


def install(vllm_root: str | os.PathLike[str]) -> None:
    """Register the shim packages for the checkout at ``vllm_root``."""
    import triton
    import triton.language as tl

    root = Path(vllm_root)
    if not (root / "vllm").is_dir():
        raise FileNotFoundError(f"{root} is not a vLLM checkout (no vllm/ folder)")
    existing = sys.modules.get("vllm")
    if existing is not None and not getattr(existing, "__gdn_series_shim__", False):
        raise RuntimeError("a real vllm package is already imported; not shimming it")
    top = _package("vllm", root / "vllm")
    top.__gdn_series_shim__ = True  # type: ignore[attr-defined]
    triton_utils = types.ModuleType("vllm.triton_utils")
    triton_utils.triton = triton  # type: ignore[attr-defined]
    triton_utils.tl = tl  # type: ignore[attr-defined]
    sys.modules["vllm.triton_utils"] = triton_utils
    for dotted in SHIMMED_MODULES:
        parts = dotted.split(".")
        for depth in range(2, len(parts)):
            name = ".".join(parts[:depth])
            _package(name, root.joinpath(*parts[:depth]))


def load(vllm_root: str | os.PathLike[str], dotted: str) -> types.ModuleType:
    """Load one shimmed module from the checkout at ``vllm_root``."""
    if dotted not in SHIMMED_MODULES:
        raise KeyError(f"{dotted} is not one of the shimmed modules {SHIMMED_MODULES}")
    if dotted in sys.modules:
        return sys.modules[dotted]
    install(vllm_root)
    path = Path(vllm_root).joinpath(*dotted.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(dotted, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = module
    spec.loader.exec_module(module)
    return module


def pytest_configure(config: object) -> None:
    root = os.environ.get("GDN_SERIES_VLLM_ROOT")
    if not root:
        raise RuntimeError("set GDN_SERIES_VLLM_ROOT to the patched vLLM checkout")
    for dotted in SHIMMED_MODULES:
        if Path(root).joinpath(*dotted.split(".")).with_suffix(".py").is_file():
            load(root, dotted)
