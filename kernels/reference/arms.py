"""Dtype arms: the storage dtypes a backend runs with, and the import-time env vars selecting them.

A kernel module picks its dtypes at import (kernel-spec 1.5), so every arm loads a private copy of
the module with `kernel_env()` set around the exec (see backends.load_module_by_path).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class DtypeArm:
    """io: q/k/v/a/b and output; state: checkpoint pool; ring: u and k rings (g is always fp32)."""

    name: str
    io: torch.dtype
    state: torch.dtype
    ring: torch.dtype
    description: str
    g: torch.dtype = torch.float32  # the g ring is fp32 in every kernel arm

    def kernel_env(self) -> dict[str, str]:
        """GDN_UCACHE_{IO,STATE,RING}_DTYPE values that make a kernel module import in this arm."""
        if self.name == "f64":
            raise ValueError("the f64 arm exists only for the oracle backend")
        return {
            "GDN_UCACHE_IO_DTYPE": _DTYPE_NAMES[self.io],
            "GDN_UCACHE_STATE_DTYPE": _DTYPE_NAMES[self.state],
            "GDN_UCACHE_RING_DTYPE": _DTYPE_NAMES[self.ring],
        }


ARMS: dict[str, DtypeArm] = {
    arm.name: arm
    for arm in (
        DtypeArm("bf16", torch.bfloat16, torch.bfloat16, torch.bfloat16, "bf16 everything"),
        DtypeArm(
            "serving",
            torch.bfloat16,
            torch.float16,
            torch.float16,
            "bf16 IO, fp16 checkpoint, fp16 u/k rings (vLLM's default)",
        ),
        DtypeArm("fp16_io", torch.float16, torch.float16, torch.float16, "fp16 everything"),
        DtypeArm(
            "f64",
            torch.float64,
            torch.float64,
            torch.float64,
            "float64 storage, g ring included (oracle only)",
            g=torch.float64,
        ),
    )
}

KERNEL_ARMS: tuple[str, ...] = ("serving", "bf16", "fp16_io")  # serving and bf16 are mandatory


def get_arm(name: str) -> DtypeArm:
    try:
        return ARMS[name]
    except KeyError:
        raise ValueError(f"unknown dtype arm {name!r}; known: {sorted(ARMS)}") from None
