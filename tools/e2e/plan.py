"""What the e2e run (#10) runs: backends, engine modes, prompts, and the list of jobs per suite.

A *job* is one engine (one model, backend, mode) in its own process, doing one or more
measurements. Everything here is plain data, so the CPU tests can check the plan and the
engine arguments without vLLM.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUM_SPEC = 3  # T = 1 + 3 = 4: the ucache kernel's T


@dataclass(frozen=True)
class Backend:
    name: str
    spec: bool  # MTP speculation on
    replay: bool = False  # --use-replayssm (the series' ReplaySSM state layout)
    gdn_spec_backend: str | None = None  # additional_config gdn_spec_backend
    kernel: str | None = None  # ucache kernel module: "flashinfer" | "ours"
    label: str = ""


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("nospec", spec=False, label="no speculation"),
        Backend("native", spec=True, label="native GDN spec (MTP, fp32 state)"),
        Backend(
            "replay_triton",
            spec=True,
            replay=True,
            gdn_spec_backend="triton",
            label="ReplaySSM Triton",
        ),
        Backend(
            "ucache_flashinfer",
            spec=True,
            replay=True,
            gdn_spec_backend="flashinfer_ucache",
            kernel="flashinfer",
            label="ucache, flashinfer kernel",
        ),
        Backend(
            "ucache_ours",
            spec=True,
            replay=True,
            gdn_spec_backend="flashinfer_ucache",
            kernel="ours",
            label="ucache, kernels/ module",
        ),
    )
}

# Engine modes of the correctness suite (compilation / caching / scheduling variations).
MODES: dict[str, dict] = {
    "eager": {"enforce_eager": True},
    # FULL CUDA graphs for decode, no torch.compile (fast start).
    "full_graphs": {
        "compilation_config": {
            "mode": 0,
            "cudagraph_mode": "FULL_DECODE_ONLY",
            "max_cudagraph_capture_size": 512,
        }
    },
    # torch.compile (vLLM's default mode) with piecewise CUDA graphs.
    "piecewise_compile": {
        "compilation_config": {"cudagraph_mode": "PIECEWISE", "max_cudagraph_capture_size": 512}
    },
    # Shared prompt prefixes with prefix caching on (ReplaySSM refuses it at init: recorded).
    "prefix_caching": {"enforce_eager": True, "enable_prefix_caching": True},
    # A KV budget too small for the batch: the scheduler preempts and recomputes.
    "preemption": {"enforce_eager": True, "num_gpu_blocks_override": 64},
}
SPEED_BATCHES = (1, 8, 32, 64, 128, 256)
SPEED_PROMPT_TOKENS = 128  # one prompt length: comparable per-step work across backends
# Output tokens per timed speed run (`bench/e2e.py run --speed-max-tokens`). At 128 a timed run
# of the 8-layer geom-35b lasts 0.4-2.6 s and its samples spread up to 1.7x (session 7).
SPEED_MAX_TOKENS = 128
SPEED_MAX_MODEL_LEN = 1024  # the speed engines' max_model_len, unless prompt + output is longer
# Correctness engines are small and run several at a time on one GPU: a fixed KV budget skips
# vLLM's memory profiling (which other processes' allocations would disturb).
SHARED_GPU = {"gpu_memory_utilization": 0.1, "kv_cache_memory_bytes": 2 << 30}


def speed_mode(batches: tuple[int, ...]) -> dict:
    """FULL CUDA graphs for uniform decode batches, captured exactly at the sizes the sweep
    uses (B tokens without speculation, B * T with it): decode steps replay one graph each, and
    the engine starts in under a minute (no torch.compile, few captures)."""
    sizes = sorted({b for b in batches} | {b * (1 + NUM_SPEC) for b in batches})
    return {
        "compilation_config": {
            "mode": 0,
            "cudagraph_mode": "FULL_DECODE_ONLY",
            "cudagraph_capture_sizes": sizes,
        }
    }


@dataclass
class Job:
    """One engine in one process."""

    suite: str  # correctness | speed | badconfig
    model: str  # directory name under the models dir (e.g. tiny-agree)
    backend: str
    mode: str
    engine: dict = field(default_factory=dict)  # LLM(**engine) besides model/backend
    env: dict = field(default_factory=dict)
    prompts: str = "mixed"  # mixed | shared_prefix | speed
    num_requests: int = 64
    max_tokens: int = 256
    batches: tuple[int, ...] = ()  # speed suite
    # speed: timed generate() calls per batch, median reported (5 since session 6: with 3, one
    # B=128 point's samples spread 1.5x and the median moved with a single slow run)
    repeats: int = 5
    expect_error: str | None = None  # badconfig: regex the init error must match
    timeout_s: int = 420

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.model}/{self.mode}/{self.backend}"

    def to_dict(self) -> dict:
        return asdict(self)


def backend_engine_args(backend: Backend, tp: int = 1) -> tuple[dict, dict]:
    """(LLM kwargs, environment) that select a backend."""
    engine: dict = {
        "additional_config": {"gdn_prefill_backend": "triton"},
        "tensor_parallel_size": tp,
        "enable_prefix_caching": False,
    }
    env: dict = {}
    if backend.spec:
        engine["speculative_config"] = {"method": "mtp", "num_speculative_tokens": NUM_SPEC}
    if backend.replay:
        engine["use_replayssm"] = True
        engine["replayssm_buffer_len"] = 16
    if backend.gdn_spec_backend:
        engine["additional_config"]["gdn_spec_backend"] = backend.gdn_spec_backend
    if backend.kernel == "ours":
        env["VLLM_GDN_UCACHE_MODULE"] = str(ROOT / "kernels/gdn_ucache_flush.py")
    elif backend.kernel == "flashinfer":
        env["VLLM_GDN_UCACHE_MODULE"] = "${GDN_FLASHINFER_UCACHE_MODULE}"  # from host env.sh
    return engine, env


def merge_engine(*parts: dict) -> dict:
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = {**out[key], **value}
            else:
                out[key] = value
    return out


def make_prompts(kind: str, n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """Deterministic token-id prompts (ids >= 3: 0-2 are special)."""
    rng = random.Random(seed)
    ids = lambda k: [rng.randrange(3, vocab) for _ in range(k)]  # noqa: E731
    if kind == "mixed":  # short and long, so batches mix prefill chunks and decodes
        lengths = [rng.choice((8, 17, 33, 64, 100, 190, 301, 512)) for _ in range(n)]
        return [ids(k) for k in lengths]
    if kind == "shared_prefix":  # four families sharing long prefixes (prefix-cache hits)
        prefixes = [ids(rng.choice((272, 544))) for _ in range(4)]
        return [prefixes[i % 4] + ids(rng.randrange(1, 40)) for i in range(n)]
    if kind == "speed":
        return [ids(SPEED_PROMPT_TOKENS) for _ in range(n)]
    raise ValueError(f"unknown prompt kind {kind!r}")


def correctness_jobs(
    backends: list[str],
    modes: list[str],
    models: list[str],
    tp: int = 1,
    num_requests: int = 64,
    max_tokens: int = 256,
    suite: str = "correctness",
) -> list[Job]:
    jobs = []
    for model in models:
        for mode in modes:
            for name in backends:
                engine, env = backend_engine_args(BACKENDS[name], tp)
                engine = merge_engine(
                    engine, MODES[mode], SHARED_GPU, {"max_num_seqs": 64, "max_model_len": 2048}
                )
                jobs.append(
                    Job(
                        suite,
                        model,
                        name,
                        mode,
                        engine,
                        env,
                        prompts="shared_prefix" if mode == "prefix_caching" else "mixed",
                        num_requests=num_requests,
                        max_tokens=max_tokens,
                        # The series refuses prefix caching with ReplaySSM at init (by design).
                        expect_error=(
                            r"does not support prefix caching"
                            if mode == "prefix_caching" and BACKENDS[name].replay
                            else None
                        ),
                    )
                )
    return jobs


def speed_jobs(
    backends: list[str],
    models: list[str],
    tp: int = 1,
    batches=SPEED_BATCHES,
    max_tokens: int = SPEED_MAX_TOKENS,
) -> list[Job]:
    jobs = []
    max_model_len = max(SPEED_MAX_MODEL_LEN, SPEED_PROMPT_TOKENS + max_tokens)
    for model in models:
        for name in backends:
            sibling = model.removesuffix("-reject") + "-agree"
            if name == "nospec" and model.endswith("-reject") and sibling in models:
                continue  # same target model as the -agree checkpoint: one nospec run serves both
            engine, env = backend_engine_args(BACKENDS[name], tp)
            engine = merge_engine(
                engine,
                speed_mode(tuple(batches)),
                {
                    "max_num_seqs": max(batches),
                    "max_model_len": max_model_len,
                    "gpu_memory_utilization": 0.85,
                },
            )
            jobs.append(
                Job(
                    "speed",
                    model,
                    name,
                    "graphs",
                    engine,
                    env,
                    prompts="speed",
                    num_requests=max(batches),
                    max_tokens=max_tokens,
                    batches=tuple(batches),
                    timeout_s=540,
                )
            )
    return jobs


def badconfig_jobs(model: str, tmp_dir: str) -> list[Job]:
    """Starting the ucache backend with an unsupported setting must fail at init with the
    designed message (spec_backend.py's problem list)."""
    ucache, env = backend_engine_args(BACKENDS["ucache_ours"])
    ucache = merge_engine(ucache, SHARED_GPU, {"max_model_len": 2048})
    t3 = merge_engine(
        ucache, {"speculative_config": {"method": "mtp", "num_speculative_tokens": 2}}
    )
    return [
        Job(
            "badconfig",
            model,
            "ucache_ours",
            "T=3",
            t3,
            env,
            expect_error=r"1 \+ num_speculative_tokens is 3; the kernel supports T in",
        ),
        Job(
            "badconfig",
            model,
            "ucache_ours",
            "missing-module",
            ucache,
            {"VLLM_GDN_UCACHE_MODULE": f"{tmp_dir}/no_such_kernel.py"},
            expect_error=r"no_such_kernel\.py'? does not exist",
        ),
        Job(
            "badconfig",
            model,
            "ucache_ours",
            "pre-ring-module",
            ucache,
            {"VLLM_GDN_UCACHE_MODULE": f"{tmp_dir}/pre_ring/gdn_ucache_flush.py"},
            expect_error=r"no top-level RING_SLOTS|RING_SLOTS = 16",
        ),
        Job(
            "badconfig",
            model,
            "ucache_ours",
            "float32-state",
            merge_engine(ucache, {"mamba_ssm_cache_dtype": "float32"}),
            env,
            expect_error=r"--mamba-ssm-cache-dtype float32 is not a ucache",
        ),
    ]


SUITES = ("smoke", "correctness", "speed", "badconfig")


def suite_jobs(
    suite: str,
    backends: list[str],
    modes: list[str] | None,
    tp: int,
    tmp_dir: str,
    speed_models: list[str] | None = None,
    correctness_models: list[str] | None = None,
    batches=SPEED_BATCHES,
    speed_max_tokens: int = SPEED_MAX_TOKENS,
) -> list[Job]:
    """The jobs of one suite, in the order they run (cheap and most telling first)."""
    correctness_models = correctness_models or ["tiny-agree"]
    if suite == "smoke":  # eager, both acceptance levels, short outputs: a few minutes
        return correctness_jobs(
            backends,
            modes or ["eager"],
            ["tiny-agree", "tiny-reject"],
            tp,
            num_requests=16,
            max_tokens=64,
            suite="smoke",
        )
    if suite == "correctness":
        return correctness_jobs(backends, modes or list(MODES), correctness_models, tp)
    if suite == "speed":
        models = speed_models or ["geom-35b-agree", "geom-35b-reject"]
        return speed_jobs(backends, models, tp, batches, speed_max_tokens)
    if suite == "badconfig":
        return badconfig_jobs(correctness_models[0], tmp_dir)
    raise ValueError(f"unknown suite {suite!r}; choose from {SUITES}")
