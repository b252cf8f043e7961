"""The series' GDN state-shape calculator, loaded without vLLM's dependencies (#9, #10).

`vllm/model_executor/layers/mamba/mamba_utils.py` (patch 2 of the series) holds
`MambaStateShapeCalculator.gated_delta_net_replayssm_spec_state_shape`, which sizes each
request's page: conv state, checkpoint, u/k/g rings, per tensor-parallel rank. Importing that
module pulls in half of vLLM, so this loader takes the file's source (the vLLM base file with
`patches/` applied, i.e. exactly what is committed), extracts the calculator's methods with
`ast` and runs them against two tiny stand-ins: vLLM's `divide` (exact division or error) and
the ring depth `GDN_REPLAYSSM_RING_SLOTS` read from the series' kernel module.

Also: GDN state bytes per request (the e2e speed table's memory column).
"""

from __future__ import annotations

import ast
import builtins
import subprocess
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

from tools.series.patchfile import parse_patch, read_series

MAMBA_UTILS = "vllm/model_executor/layers/mamba/mamba_utils.py"
REPLAY_OPS = "vllm/model_executor/layers/mamba/ops/gdn_replayssm_spec_decode.py"
METHODS = (
    "_orient_conv_shape",
    "gated_delta_net_state_shape",
    "gated_delta_net_replayssm_spec_state_shape",
)


class SeriesSourceError(RuntimeError):
    """The patched sources cannot be produced (vllm/ not populated, patch does not apply)."""


def patched_sources(root: Path, paths: tuple[str, ...], base_ref: str = "") -> dict[str, str]:
    """Contents of `paths` after applying patches/ onto the vLLM base in vllm/ (read with
    `git show`, so vllm/'s checkout is never touched)."""
    vllm = root / "vllm"
    if not base_ref:
        pin = dict(
            line.split("=", 1)
            for line in (root / "vllm.pin").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        base_ref = f"vllm-{pin['VLLM_VERSION'].strip()}"
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp)
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
        for path in paths:
            shown = subprocess.run(
                ["git", "-C", str(vllm), "show", f"{base_ref}:{path}"], capture_output=True
            )
            if shown.returncode == 0:
                (dest / path).parent.mkdir(parents=True, exist_ok=True)
                (dest / path).write_bytes(shown.stdout)
            elif not (vllm / ".git").exists():
                raise SeriesSourceError(f"{vllm} is not populated (scripts/setup.sh)")
        for patch in read_series(root / "patches"):
            changed = set(parse_patch(patch).changed_paths()) & set(paths)
            if not changed:
                continue
            includes = [f"--include={p}" for p in sorted(changed)]
            done = subprocess.run(
                ["git", "apply", *includes, str(patch)], cwd=dest, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise SeriesSourceError(f"{patch.name} does not apply: {done.stderr.strip()}")
        return {p: (dest / p).read_text() for p in paths if (dest / p).is_file()}


def ring_slots_from_source(source: str) -> int:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if "GDN_REPLAYSSM_RING_SLOTS" in names and isinstance(node.value, ast.Constant):
                return int(node.value.value)
    raise SeriesSourceError("GDN_REPLAYSSM_RING_SLOTS not found in the series' kernel module")


def divide(numerator: int, denominator: int) -> int:
    """vLLM's `vllm.distributed.divide`: exact division, else an error."""
    if numerator % denominator != 0:
        raise AssertionError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


def load_shape_calculator(
    mamba_utils_source: str, ring_slots: int, conv_dim_first: bool = True
) -> type:
    """The series' MambaStateShapeCalculator with only METHODS, runnable without vLLM."""
    tree = ast.parse(mamba_utils_source)
    cls = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.ClassDef) and n.name == "MambaStateShapeCalculator"
        ),
        None,
    )
    if cls is None:
        raise SeriesSourceError("MambaStateShapeCalculator not found in mamba_utils.py")
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in METHODS]
    missing = set(METHODS) - {m.name for m in methods}
    if missing:
        raise SeriesSourceError(f"the series' calculator lacks {sorted(missing)}")
    new_cls = ast.ClassDef(
        name="MambaStateShapeCalculator",
        bases=[],
        keywords=[],
        body=methods,
        decorator_list=[],
        type_params=[],
    )
    module = ast.fix_missing_locations(ast.Module(body=[new_cls], type_ignores=[]))
    ops = types.ModuleType("gdn_replayssm_spec_decode")
    ops.GDN_REPLAYSSM_RING_SLOTS = ring_slots  # type: ignore[attr-defined]

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if name.endswith("gdn_replayssm_spec_decode"):
            return ops
        return builtins.__import__(name, globals, locals, fromlist, level)

    namespace: dict = {
        "__builtins__": {**vars(builtins), "__import__": fake_import},
        "divide": divide,
        "is_conv_state_dim_first": lambda: conv_dim_first,
    }
    exec(compile(module, MAMBA_UTILS, "exec"), namespace)  # noqa: S102
    return namespace["MambaStateShapeCalculator"]


def series_calculator(root: Path, conv_dim_first: bool = True) -> type:
    sources = patched_sources(root, (MAMBA_UTILS, REPLAY_OPS))
    if REPLAY_OPS not in sources:
        raise SeriesSourceError("the series does not create " + REPLAY_OPS)
    return load_shape_calculator(
        sources[MAMBA_UTILS], ring_slots_from_source(sources[REPLAY_OPS]), conv_dim_first
    )


BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def gdn_state_bytes_per_request(
    calc: type,
    cfg: dict,
    mode: str,
    tp: int = 1,
    num_spec: int = 3,
    state_dtype: str = "float32",
    io_dtype: str = "bfloat16",
) -> int:
    """GDN state bytes one request holds on one rank over all GDN layers.

    mode: "nospec" (conv + one state), "native" (conv + 1 + num_spec states: vLLM's native spec
    path keeps one recurrent state per draft position), "replay" (conv + checkpoint + u/k rings
    in the activation's 16-bit dtype + fp32 g ring; the series' layout, also the ucache one)."""
    args = (
        tp,
        cfg["linear_num_key_heads"],
        cfg["linear_num_value_heads"],
        cfg["linear_key_head_dim"],
        cfg["linear_value_head_dim"],
        cfg["linear_conv_kernel_dim"],
    )
    prod: Callable[[tuple[int, ...]], int] = lambda s: __import__("math").prod(s)  # noqa: E731
    io, st = BYTES[io_dtype], BYTES[state_dtype]
    if mode == "replay":
        conv, ckpt, u, k, g = calc.gated_delta_net_replayssm_spec_state_shape(*args, num_spec)
        per_layer = prod(conv) * io + prod(ckpt) * st + (prod(u) + prod(k)) * 2 + prod(g) * 4
    else:
        spec = 0 if mode == "nospec" else num_spec
        conv, state = calc.gated_delta_net_state_shape(*args, spec)
        per_layer = prod(conv) * io + prod(state) * st * (1 + spec)
    n_gdn = sum(t == "linear_attention" for t in cfg["layer_types"])
    return per_layer * n_gdn
