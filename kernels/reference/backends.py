"""Backend registry: the same conformance suite runs against every GDN spec backend.

A backend is anything callable with the exact `gated_delta_rule_mtp_ucache_flush` keyword contract
(kernel-spec 1.3). The harness always calls it with `restart_hist_on_flush=False` and commits the
cursors itself. Registered names:
  oracle       kernels.reference.replay (float64 math, any device; CPU in CI)
  flashinfer   flashinfer 0.7.2.post1's gdn_decode_bf16_wy_ucache_flush.py. Found via env
               GDN_FLASHINFER_UCACHE_MODULE (path to the .py file), else FI_DIR (folder holding
               flashinfer/gdn_kernels/{__init__,device_target,gdn_decode_bf16_wy_ucache_flush}.py),
               else the installed flashinfer package.
  ours         kernels/gdn_ucache_flush.py by path (env GDN_UCACHE_OURS_MODULE overrides)
  emulated     the oracle with upstream's rounding points emulated (emulation.py), CPU calibration
  ucache_adapter  vLLM's ucache adapter (series #5) driving an inner kernel (flashinfer, ours or the
               oracle): the suite runs "through the adapter"; see ucache_adapter.py
  triton_vllm  the patched vLLM Triton ReplaySSM baseline behind a contract shim: env
               GDN_TRITON_BASELINE_MODULE = path to a module exposing
               `gated_delta_rule_mtp_ucache_flush` (default tests/series/triton_baseline_adapter.py)
               (optional attributes: G_RING_FORMAT = "per_token", SUPPORTED_T, PAD_OUTPUT_POLICY)

Each arm (and layout) loads a private copy of a kernel module under a unique name with the dtype
env vars set around the exec, because kernel modules choose dtypes at import.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Literal

import torch

from kernels.reference import replay
from kernels.reference.arms import ARMS, KERNEL_ARMS, DtypeArm, get_arm
from kernels.reference.gating import TokenInputs

Layout = Literal["compact", "vllm"]
PadOutputPolicy = Literal["untouched", "untouched_or_zero"]

REPO_ROOT = Path(__file__).resolve().parents[2]
FLASHINFER_KERNEL_FILE = "gdn_decode_bf16_wy_ucache_flush.py"
_LOAD_LOCK = threading.Lock()
_MODULE_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], ModuleType] = {}


@dataclass
class KernelHandle:
    """What the harness drives: `fn` with the kernel keyword contract, plus the backend's promises.

    pad_output_policy: "untouched" (ucache kernels leave pad output rows alone) or
    "untouched_or_zero" (vLLM's Triton path writes zeros there); g_ring_format: see replay.py.
    """

    backend: str
    arm: DtypeArm
    layout: Layout
    fn: Callable[..., torch.Tensor]
    device: str
    supported_t: tuple[int, ...]
    pad_output_policy: PadOutputPolicy = "untouched"
    g_ring_format: replay.GRingFormat = "cumulative"
    module: ModuleType | None = None
    notes: list[str] = field(default_factory=list)


class Backend:
    """Base class: override `available`, `arms`, `_load`."""

    name: str = "?"
    device: str = "cuda"
    layouts: tuple[Layout, ...] = ("compact", "vllm")

    def available(self) -> tuple[bool, str]:
        raise NotImplementedError

    def arms(self) -> tuple[str, ...]:
        return KERNEL_ARMS

    def load(self, arm: str, layout: Layout = "compact") -> KernelHandle:
        ok, reason = self.available()
        if not ok:
            raise RuntimeError(f"backend {self.name!r} unavailable: {reason}")
        if arm not in self.arms():
            raise ValueError(f"backend {self.name!r} has no arm {arm!r}; it supports {self.arms()}")
        if layout not in self.layouts:
            raise ValueError(
                f"backend {self.name!r} has no layout {layout!r}; it supports {self.layouts}"
            )
        return self._load(get_arm(arm), layout)

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        raise NotImplementedError


class OracleBackend(Backend):
    """The float64 oracle as a backend: proves the harness and its checks on CPU.

    In the kernel arms it stores in the arm's dtypes (rounding once per store), which emulates a
    kernel that keeps float64 everywhere except in memory.
    """

    name = "oracle"

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def available(self) -> tuple[bool, str]:
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            return False, "oracle on cuda requested but no CUDA device"
        return True, ""

    def arms(self) -> tuple[str, ...]:
        return tuple(ARMS)

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        return KernelHandle(
            backend=self.name,
            arm=arm,
            layout=layout,
            fn=replay.gated_delta_rule_mtp_ucache_flush,
            device=self.device,
            supported_t=tuple(range(1, replay.MAX_T + 1)),
        )


class EmulatedBackend(OracleBackend):
    """Upstream rounding points emulated in float64 (emulation.py), to calibrate tolerances."""

    name = "emulated"

    def arms(self) -> tuple[str, ...]:
        return KERNEL_ARMS

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        from kernels.reference.emulation import verify_flush_emulated

        def step(
            checkpoint: torch.Tensor,
            window: replay.RingWindow,
            tokens: TokenInputs,
            flush_min: int,
        ) -> replay.StepResult:
            return verify_flush_emulated(checkpoint, window, tokens, flush_min, arm)

        return KernelHandle(
            backend=self.name,
            arm=arm,
            layout=layout,
            fn=functools.partial(replay.gated_delta_rule_mtp_ucache_flush, step_impl=step),
            device=self.device,
            supported_t=tuple(range(1, replay.MAX_T + 1)),
        )


@contextmanager
def _env_set(env: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_module_by_path(
    path: Path, env: dict[str, str], tag: str, extra_sys_path: Path | None = None
) -> ModuleType:
    """Exec `path` as a private module `<stem>__<tag>` with `env` set around the exec (cached)."""
    key = (str(path.resolve()), tuple(sorted(env.items())))
    with _LOAD_LOCK:
        if key in _MODULE_CACHE:
            return _MODULE_CACHE[key]
        if extra_sys_path is not None and str(extra_sys_path) not in sys.path:
            sys.path.insert(0, str(extra_sys_path))
        name = f"_gdn_conformance_{path.stem}__{tag}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load a module from {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and friends look the module up while it executes
        try:
            with _env_set(env):
                spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _MODULE_CACHE[key] = module
        return module


def check_ucache_module(module: ModuleType, arm: DtypeArm, where: str) -> None:
    """Check the attributes vLLM and upstream tests read (kernel-spec 1.1); RuntimeError if off."""
    slots, window = getattr(module, "RING_SLOTS", None), getattr(module, "W_RING", None)
    if slots != replay.RING_SLOTS or window != replay.W_RING:
        raise RuntimeError(
            f"{where}: RING_SLOTS={slots}, W_RING={window}; the contract needs 32 and 16 "
            "(pre-ring kernel build?)"
        )
    for attr, want in (("IO_TORCH", arm.io), ("ST_TORCH", arm.state), ("RING_TORCH", arm.ring)):
        got = getattr(module, attr, None)
        if got is not None and got != want:
            raise RuntimeError(
                f"{where}: {attr}={got} but arm {arm.name!r} needs {want} "
                "(dtype env vars not applied at import?)"
            )
    if not callable(getattr(module, "gated_delta_rule_mtp_ucache_flush", None)):
        raise RuntimeError(f"{where}: no callable gated_delta_rule_mtp_ucache_flush")


def _cuda_reason() -> str:
    return "" if torch.cuda.is_available() else "no CUDA device"


class FileKernelBackend(Backend):
    """A CuTe-DSL ucache kernel file loaded by path (flashinfer's or ours)."""

    pad_output_policy: PadOutputPolicy = "untouched"

    def module_path(self) -> tuple[Path | None, str, Path | None]:
        """(kernel file or None, reason if None, folder to put on sys.path)."""
        raise NotImplementedError

    def available(self) -> tuple[bool, str]:
        reason = _cuda_reason()
        if reason:
            return False, reason
        path, why, _ = self.module_path()
        if path is None:
            return False, why
        if importlib.util.find_spec("cutlass") is None:
            return False, "CuTe-DSL (nvidia-cutlass-dsl, module `cutlass`) is not importable"
        return True, ""

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        path, why, extra = self.module_path()
        if path is None:
            raise RuntimeError(why)
        env = dict(arm.kernel_env())
        env["SGLANG_GDN_WY_STRIDED_QKV"] = "1" if layout == "vllm" else "0"
        module = load_module_by_path(path, env, f"{self.name}_{arm.name}_{layout}", extra)
        check_ucache_module(module, arm, str(path))
        supported = tuple(getattr(module, "SUPPORTED_T", (4, 8)))
        return KernelHandle(
            backend=self.name,
            arm=arm,
            layout=layout,
            fn=module.gated_delta_rule_mtp_ucache_flush,
            device="cuda",
            supported_t=supported,
            pad_output_policy=self.pad_output_policy,
            module=module,
        )


class FlashinferBackend(FileKernelBackend):
    name = "flashinfer"

    def module_path(self) -> tuple[Path | None, str, Path | None]:
        explicit = os.environ.get("GDN_FLASHINFER_UCACHE_MODULE")
        if explicit:
            path = Path(explicit)
            if not path.is_file():
                return None, f"GDN_FLASHINFER_UCACHE_MODULE={explicit} is not a file", None
            # .../flashinfer/gdn_kernels/<file>: loaded by path, the file falls back to an absolute
            # `flashinfer.gdn_kernels.device_target` import, so its package root goes on sys.path
            root = path.resolve().parents[2] if path.parent.name == "gdn_kernels" else None
            return path, "", root
        fi_dir = os.environ.get("FI_DIR")
        if fi_dir:
            path = Path(fi_dir) / "flashinfer" / "gdn_kernels" / FLASHINFER_KERNEL_FILE
            if path.is_file():
                return path, "", Path(fi_dir)
            return (
                None,
                f"FI_DIR={fi_dir} has no flashinfer/gdn_kernels/{FLASHINFER_KERNEL_FILE}",
                None,
            )
        spec = importlib.util.find_spec("flashinfer")
        if spec is not None and spec.submodule_search_locations:
            path = (
                Path(list(spec.submodule_search_locations)[0])
                / "gdn_kernels"
                / FLASHINFER_KERNEL_FILE
            )
            if path.is_file():
                return path, "", None
        return (
            None,
            "flashinfer's ucache kernel not found (set GDN_FLASHINFER_UCACHE_MODULE or FI_DIR)",
            None,
        )


class OursBackend(FileKernelBackend):
    name = "ours"

    def module_path(self) -> tuple[Path | None, str, Path | None]:
        path = Path(
            os.environ.get("GDN_UCACHE_OURS_MODULE", REPO_ROOT / "kernels" / "gdn_ucache_flush.py")
        )
        if not path.is_file():
            return None, f"{path} does not exist yet", None
        return path, "", REPO_ROOT


class TritonVllmBackend(Backend):
    """vLLM's Triton ReplaySSM baseline (two launches) behind a contract shim module."""

    name = "triton_vllm"
    layouts = ("compact", "vllm")

    default_shim = REPO_ROOT / "tests" / "series" / "triton_baseline_adapter.py"

    def module_path(self) -> Path | None:
        explicit = os.environ.get("GDN_TRITON_BASELINE_MODULE")
        if explicit:
            return Path(explicit)
        return self.default_shim if self.default_shim.is_file() else None

    def available(self) -> tuple[bool, str]:
        reason = _cuda_reason()
        if reason:
            return False, reason
        path = self.module_path()
        if path is None:
            return (
                False,
                "patched vLLM Triton baseline not wired yet "
                "(set GDN_TRITON_BASELINE_MODULE to its contract shim)",
            )
        if not path.is_file():
            return False, f"GDN_TRITON_BASELINE_MODULE={path} is not a file"
        try:  # the shim loads the patched vLLM op at import: absent series -> clear reason
            load_module_by_path(path, {}, f"{self.name}_probe", REPO_ROOT)
        except Exception as exc:
            return False, f"{path.name} does not load: {type(exc).__name__}: {exc}"
        return True, ""

    def arms(self) -> tuple[str, ...]:
        return ("serving", "bf16", "fp16_io")

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        path = self.module_path()
        assert path is not None
        module = load_module_by_path(
            path, arm.kernel_env(), f"{self.name}_{arm.name}_{layout}", REPO_ROOT
        )
        if not callable(getattr(module, "gated_delta_rule_mtp_ucache_flush", None)):
            raise RuntimeError(f"{path}: no callable gated_delta_rule_mtp_ucache_flush")
        return KernelHandle(
            backend=self.name,
            arm=arm,
            layout=layout,
            fn=module.gated_delta_rule_mtp_ucache_flush,
            device="cuda",
            supported_t=tuple(getattr(module, "SUPPORTED_T", (4, 8))),
            pad_output_policy=getattr(module, "PAD_OUTPUT_POLICY", "untouched_or_zero"),
            g_ring_format=getattr(module, "G_RING_FORMAT", "per_token"),
            module=module,
        )


class UcacheAdapterBackend(Backend):
    """vLLM's ucache adapter (series issue #5) around an inner kernel; see ucache_adapter.py.

    Inner kernel: env GDN_UCACHE_ADAPTER_KERNEL (flashinfer | ours | oracle); default flashinfer
    when CUDA is available, else the oracle on CPU (which checks the adapter's plumbing in CI).
    """

    name = "ucache_adapter"

    def inner(self) -> str:
        default = "flashinfer" if torch.cuda.is_available() else "oracle"
        return os.environ.get("GDN_UCACHE_ADAPTER_KERNEL", default)

    @property
    def device(self) -> str:  # type: ignore[override]
        return "cpu" if self.inner() == "oracle" else "cuda"

    def available(self) -> tuple[bool, str]:
        from kernels.reference import ucache_adapter

        path, why = ucache_adapter.adapter_file()
        if path is None:
            return False, why
        inner = self.inner()
        if inner == "oracle":
            return True, ""
        if inner not in ("flashinfer", "ours"):
            return False, f"GDN_UCACHE_ADAPTER_KERNEL={inner!r}: use flashinfer, ours or oracle"
        return get_backend(inner).available()

    def arms(self) -> tuple[str, ...]:
        return KERNEL_ARMS

    def _load(self, arm: DtypeArm, layout: Layout) -> KernelHandle:
        from kernels.reference import ucache_adapter

        adapter = ucache_adapter.load_adapter()
        kernel = ucache_adapter.make_kernel(self.inner(), arm, adapter)
        extra_pad = int(os.environ.get("GDN_UCACHE_ADAPTER_PAD", "3"))
        return KernelHandle(
            backend=self.name,
            arm=arm,
            layout=layout,
            fn=ucache_adapter.AdapterCall(adapter, kernel, extra_pad),
            device=self.device,
            supported_t=tuple(adapter.UCACHE_SUPPORTED_T),
            module=kernel,
            notes=[f"inner kernel: {self.inner()}"],
        )


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        OracleBackend(),
        EmulatedBackend(),
        FlashinferBackend(),
        OursBackend(),
        TritonVllmBackend(),
        UcacheAdapterBackend(),
    )
}
KERNEL_BACKENDS: tuple[str, ...] = ("flashinfer", "ours", "triton_vllm")


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; registered: {sorted(BACKENDS)}") from None
