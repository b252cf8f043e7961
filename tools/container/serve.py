"""The ``docker run`` line that serves Qwen3.5 with MTP speculative decoding on the ucache backend.

One source for the README, ``scripts/build-container.sh`` and the offline check (which parses
``serve_args`` with the installed, patched vLLM's own ``vllm serve`` parser).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

DEFAULT_MODEL = "Qwen/Qwen3.5-27B"
# Qwen3.5 checkpoints have one MTP layer; k = 3 re-runs it, so verify sees T = 1 + 3 = 4 tokens.
NUM_SPECULATIVE_TOKENS = 3
# ReplaySSM ring: the ucache kernel contract is written for 16 live rows (kernel-spec.md).
REPLAYSSM_BUFFER_LEN = 16
# Stock vLLM 0.33.0 turns `auto` into the checkpoint's float32 for Qwen3.5, which the ucache
# kernel cannot read; the series' patch "[Core] ucache dtype resolution" makes `auto` mean the
# kernel's checkpoint dtype (fp16 by default, GDN_UCACHE_STATE_DTYPE) on this backend. Passed
# explicitly so the command says where the state dtype comes from; `float16` also works.
SSM_CACHE_DTYPE = "auto"
SPEC_BACKEND = "flashinfer_ucache"
# Where the root user of the vllm-openai image keeps its Hugging Face cache.
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
CONTAINER_MODELS_DIR = "/models"


@dataclass(frozen=True)
class ServeOptions:
    image: str
    model: str = DEFAULT_MODEL  # a Hugging Face id, or a local directory (mounted read-only)
    port: int = 8000
    gpus: str = "all"
    hf_cache: str = "$HOME/.cache/huggingface"  # host side; left unexpanded for the shell
    num_speculative_tokens: int = NUM_SPECULATIVE_TOKENS


def is_local_model(model: str) -> bool:
    """A path (``/…``, ``./…``, ``~/…``) rather than a Hugging Face ``org/name`` id."""
    return model.startswith(("/", "./", "../", "~"))


def serve_arg_groups(
    model: str, num_speculative_tokens: int = NUM_SPECULATIVE_TOKENS
) -> list[list[str]]:
    """``vllm serve`` arguments (the image's entrypoint), one option and its value per group."""
    speculative = {"method": "mtp", "num_speculative_tokens": num_speculative_tokens}
    additional = {"gdn_spec_backend": SPEC_BACKEND}
    return [
        [model],
        ["--speculative-config", json.dumps(speculative, separators=(",", ":"))],
        ["--use-replayssm", "--replayssm-buffer-len", str(REPLAYSSM_BUFFER_LEN)],
        ["--mamba-ssm-cache-dtype", SSM_CACHE_DTYPE],
        ["--additional-config", json.dumps(additional, separators=(",", ":"))],
    ]


def serve_args(model: str, num_speculative_tokens: int = NUM_SPECULATIVE_TOKENS) -> list[str]:
    """The arguments after the image name in ``docker run``."""
    return [word for group in serve_arg_groups(model, num_speculative_tokens) for word in group]


def container_model(model: str) -> tuple[str, list[str]]:
    """(model argument inside the container, extra docker flags to make it reachable)."""
    if not is_local_model(model):
        return model, []
    # A bind mount needs an absolute host path (a bare name would be a docker volume).
    host_dir = os.path.abspath(os.path.expanduser(model)).rstrip("/")
    inside = f"{CONTAINER_MODELS_DIR}/{PurePosixPath(host_dir).name}"
    return inside, ["-v", f"{host_dir}:{inside}:ro"]


def docker_run_groups(options: ServeOptions) -> list[list[str]]:
    model, mount = container_model(options.model)
    groups = [
        [
            "docker",
            "run",
            "--rm",
            f"--gpus={options.gpus}",
            "--ipc=host",
            "-p",
            f"{options.port}:8000",
        ]
    ]
    if mount:
        groups.append(mount)
    else:
        groups.append(["-v", f"{options.hf_cache}:{CONTAINER_HF_CACHE}", "-e", "HF_TOKEN"])
    groups.append([options.image])
    groups += serve_arg_groups(model, options.num_speculative_tokens)
    return groups


def docker_run_argv(options: ServeOptions) -> list[str]:
    return [word for group in docker_run_groups(options) for word in group]


def _quote(word: str) -> str:
    # "$HOME/..." stays expandable by the user's shell; everything else is quoted literally.
    if word.startswith("$HOME/") and not re.search(r'[\\"`$]', word[1:]):
        return f'"{word}"'
    return shlex.quote(word)


def render(groups: list[list[str]]) -> str:
    """A copy-pastable shell command, one group per line."""
    return " \\\n    ".join(" ".join(_quote(word) for word in group) for group in groups)


def render_docker_run(options: ServeOptions) -> str:
    return render(docker_run_groups(options))
