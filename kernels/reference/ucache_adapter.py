"""Conformance backend `ucache_adapter`: the suite's kernel calls go through vLLM's adapter.

The series' `vllm/model_executor/layers/mamba/ops/gdn_ucache_spec.py` (issue #5) is what vLLM
calls per layer and step: it pads the batch with -1 rows, slices q/k/v and a/b out of packed
buffers as strided views, writes the output in place and loads/configures the kernel module. This
backend turns each harness call (kernel keyword contract) into the layer's view of the same data
(packed [N*T, 2*H*K + HV*V] q|k|v rows, a [b|a] projection, request-keyed cursors) and calls the
adapter with it, so the conformance checks judge "kernel + adapter" as vLLM runs them.

Environment:
  GDN_UCACHE_ADAPTER_FILE    path to gdn_ucache_spec.py (default: the series tree, see
                             `adapter_file`)
  GDN_UCACHE_ADAPTER_KERNEL  inner kernel: flashinfer (default on CUDA), ours, oracle (CPU default)
  GDN_UCACHE_ADAPTER_PAD     extra pad rows the adapter adds past the harness batch (default 3)

File kernels (flashinfer, ours) are loaded by the adapter's own loader
(`VLLM_GDN_UCACHE_MODULE` = the inner backend's file), so its dtype/import-order logic runs too.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

from kernels.reference import replay
from kernels.reference.arms import DtypeArm

ADAPTER_RELPATH = "vllm/model_executor/layers/mamba/ops/gdn_ucache_spec.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
_ADAPTER: types.ModuleType | None = None


def _from_patches() -> Path | None:
    """Materialise the adapter file from the committed series (git apply --include)."""
    series = REPO_ROOT / "patches" / "series"
    if not series.is_file():
        return None
    names = [
        line.strip()
        for line in series.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    patches = [REPO_ROOT / "patches" / n for n in names]
    holding = [p for p in patches if p.is_file() and ADAPTER_RELPATH in p.read_text()]
    if not holding:
        return None
    dest = Path(tempfile.mkdtemp(prefix="ucache-adapter-"))
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    for patch in holding:
        subprocess.run(
            ["git", "apply", f"--include={ADAPTER_RELPATH}", str(patch)],
            cwd=dest,
            check=True,
            capture_output=True,
        )
    path = dest / ADAPTER_RELPATH
    return path if path.is_file() else None


def adapter_file() -> tuple[Path | None, str]:
    """(path or None, reason). Order: GDN_UCACHE_ADAPTER_FILE, GDN_SERIES_VLLM_ROOT, the vllm/
    submodule checkout, the ucache worktree of the session, the committed patches."""
    explicit = os.environ.get("GDN_UCACHE_ADAPTER_FILE")
    if explicit:
        path = Path(explicit)
        return (path, "") if path.is_file() else (None, f"GDN_UCACHE_ADAPTER_FILE={path} missing")
    roots = [os.environ.get("GDN_SERIES_VLLM_ROOT"), REPO_ROOT / "vllm", "/work/vllm-ucache"]
    for root in roots:
        if root and (Path(root) / ADAPTER_RELPATH).is_file():
            return Path(root) / ADAPTER_RELPATH, ""
    try:
        path = _from_patches()
    except (OSError, subprocess.CalledProcessError) as exc:
        return None, f"cannot materialise {ADAPTER_RELPATH} from patches/: {exc}"
    if path is not None:
        return path, ""
    return None, f"{ADAPTER_RELPATH} not found (set GDN_UCACHE_ADAPTER_FILE)"


def load_adapter() -> types.ModuleType:
    """The adapter as a private module (it needs only torch; vllm.envs is optional)."""
    global _ADAPTER
    if _ADAPTER is None:
        path, why = adapter_file()
        if path is None:
            raise RuntimeError(why)
        name = "_gdn_conformance_vllm_ucache_adapter"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _ADAPTER = module
    return _ADAPTER


def oracle_kernel(arm: DtypeArm) -> types.ModuleType:
    """The float64 oracle dressed as a kernel module (CPU runs of the adapter path)."""
    module = types.ModuleType("_gdn_conformance_oracle_kernel")
    module.W_RING = replay.W_RING  # type: ignore[attr-defined]
    module.RING_SLOTS = replay.RING_SLOTS  # type: ignore[attr-defined]
    module.IO_TORCH = arm.io  # type: ignore[attr-defined]
    module.ST_TORCH = arm.state  # type: ignore[attr-defined]
    module.RING_TORCH = arm.ring  # type: ignore[attr-defined]
    module.gated_delta_rule_mtp_ucache_flush = (  # type: ignore[attr-defined]
        replay.gated_delta_rule_mtp_ucache_flush
    )
    return module


def _packed_rows(parts: list[torch.Tensor], rows: int) -> torch.Tensor:
    """[rows, sum(widths)] over the parts' common buffer when they are adjacent last-dim
    slices of one packed tensor (the "vllm" layout), else a packed copy."""
    first = parts[0]
    widths = [p.shape[-2] * p.shape[-1] if p.dim() == 4 else p.shape[-1] for p in parts]
    size = first.element_size()
    token_stride = first.stride(1)
    adjacent = all(p.stride(1) == token_stride and p.stride(-1) == 1 for p in parts) and all(
        parts[i + 1].data_ptr() - parts[i].data_ptr() == widths[i] * size
        for i in range(len(parts) - 1)
    )
    batch_ok = first.stride(0) == first.shape[1] * token_stride
    if adjacent and batch_ok and token_stride == sum(widths):
        return first.as_strided((rows, sum(widths)), (token_stride, 1))
    return torch.cat([p.reshape(rows, w) for p, w in zip(parts, widths, strict=True)], dim=-1)


class AdapterCall:
    """A kernel-contract callable that runs vLLM's adapter around `kernel`."""

    def __init__(self, adapter: types.ModuleType, kernel: types.ModuleType, extra_pad: int):
        self.adapter = adapter
        self.kernel = kernel
        self.extra_pad = extra_pad
        self.out_rows: torch.Tensor | None = None

    def __call__(
        self,
        A_log: torch.Tensor,
        a: torch.Tensor,
        dt_bias: torch.Tensor,
        *,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        b: torch.Tensor,
        initial_state_source: torch.Tensor,
        initial_state_indices: torch.Tensor,
        scale: float,
        output: torch.Tensor,
        k_cache: torch.Tensor,
        u_cache: torch.Tensor,
        g_cache: torch.Tensor,
        hist_len: torch.Tensor,
        cache_base: torch.Tensor,
        flush_min: int | None = None,
        restart_hist_on_flush: bool = False,
        **unused: object,
    ) -> torch.Tensor:
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        lazy = self.adapter.ucache_flush_min(T)
        if flush_min is not None and flush_min != lazy:
            raise ValueError(
                f"vLLM's adapter always flushes lazily (flush_min {lazy} for T={T}); "
                f"this case asks for flush_min {flush_min}"
            )
        if restart_hist_on_flush:
            raise ValueError("vLLM's adapter never restarts cursors (the builder commits them)")
        rows = B * T
        mixed_qkv = _packed_rows([q, k, v], rows)
        ba = _packed_rows([b, a], rows)
        padded = B + self.extra_pad
        # vLLM's core_attn_out has rows past the batch; the harness output has exactly B rows.
        # A larger buffer carrying the harness output's current content keeps "pad rows are not
        # written" checkable while the adapter writes in place into a padded batch.
        if self.out_rows is None or self.out_rows.shape != (padded * T, HV, V):
            self.out_rows = torch.empty(padded * T, HV, V, dtype=output.dtype, device=output.device)
        self.out_rows[:rows].copy_(output.reshape(rows, HV, V))
        self.adapter.gdn_ucache_spec_verify(
            mixed_qkv=mixed_qkv,
            a=ba[:, HV:],
            b=ba[:, :HV],
            A_log=A_log,
            dt_bias=dt_bias,
            ssm_state=initial_state_source,
            u_cache=u_cache,
            k_cache=k_cache,
            g_cache=g_cache,
            state_indices=initial_state_indices,
            hist_len=hist_len,
            cache_base=cache_base,
            num_spec_decodes=B,
            num_tokens_per_request=T,
            num_k_heads=H,
            num_v_heads=HV,
            head_k_dim=K,
            head_v_dim=V,
            scale=scale,
            pad_to=padded,
            output=self.out_rows,
            kernel=self.kernel,
        )
        output.copy_(self.out_rows[:rows].view(B, T, HV, V))
        return output


def make_kernel(inner: str, arm: DtypeArm, adapter: types.ModuleType) -> types.ModuleType:
    """The inner kernel: the oracle, or a file kernel loaded by the adapter's own loader."""
    if inner == "oracle":
        return oracle_kernel(arm)
    from kernels.reference.backends import get_backend

    backend = get_backend(inner)
    ok, why = backend.available()
    if not ok:
        raise RuntimeError(f"inner kernel {inner!r} unavailable: {why}")
    path, why, extra = backend.module_path()  # type: ignore[attr-defined]
    if path is None:
        raise RuntimeError(why)
    if extra is not None and str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
    os.environ["VLLM_GDN_UCACHE_MODULE"] = str(Path(path).resolve())
    dtypes = adapter.UcacheKernelDtypes(io=arm.io, state=arm.state, ring=arm.ring)
    return adapter.load_ucache_kernel_module(dtypes, strided_qkv=True)
