"""Generate Qwen3.5 text checkpoints with constructed (not trained) weights for the e2e runs (#10).

    python3 -m tools.e2e.make_models OUT_DIR [--models tiny,geom-35b,...] [--seed 0]

Writes OUT_DIR/<model>-<acceptance>/{config.json, model.safetensors, construction.json} with the
real Qwen3.5 config class and field names (`model_type: qwen3_5_text`, `layer_types` 3 GDN : 1
full attention, K = V = 128, `mtp_num_hidden_layers: 1`, `mamba_ssm_dtype: float32` as the
official checkpoints set it) and the Hugging Face parameter names that vLLM 0.33.0's
`qwen3_5.py` / `qwen3_5_mtp.py` load (`model.layers.N.linear_attn.in_proj_qkv`, ...,
`mtp.fc`, `mtp.layers.0.*`). No tokenizer: serve with `skip_tokenizer_init=True` and token-id
prompts.

## The construction (why greedy decoding is neither degenerate nor random)
- Embeddings `E` are random Gaussian rows (RMS 1). A random *single-cycle* permutation `perm` of
  the vocabulary is written into the LM head: `lm_head[perm[x]] = E[x] * LOGIT_SCALE / hidden`.
  A residual stream pointing along `E[x]` therefore predicts `perm[x]`: greedy output walks a
  cycle through the whole vocabulary (never one repeated token).
- Every decoder layer (GDN and full attention, with their MLPs) has random weights whose
  output projections are scaled by `target_noise`. Their sum is a context-dependent
  perturbation of the residual stream: where it wins, the next token is not `perm[x]` but
  depends on the GDN recurrent state and the attention history. So a wrong state in a spec
  backend changes tokens (the correctness check can see it), and the target deviates from the
  cycle at a rate set by `target_noise`.
- The MTP head sees `(embedding of x_{t+1}, target hidden h_t)`. The **acceptance knob** is its
  `mtp.fc` matrix:
  - `agree`: `fc = [I, 0] + mtp_noise * R`: it predicts `perm[x_{t+1}]`, i.e. what the target
    does wherever the target follows the cycle. Per-draft acceptance ~ (1 - target deviation
    rate) x (1 - MTP flip rate from `mtp_noise`): with the defaults about 0.8-0.9, i.e. 2-3
    accepted tokens per step at 3 speculative tokens.
  - `reject`: `fc = [0, I]`: it re-predicts `perm[x_t] = x_{t+1}`, a token the target never
    emits next (the permutation has no fixed points): every draft is rejected (n = 1).
  `construction.json` records the knobs and, for the tiny model, a CPU estimate of the
  acceptance (`tools.e2e.reference`); the e2e run reports the acceptance vLLM measured.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

LOGIT_SCALE = 12.0  # logit of the cycle's token (others ~ N(0, LOGIT_SCALE^2 / hidden))
GDN_HEAD_DIM = 128  # K = V = 128: what the ucache kernel and FlashInfer's GDN need


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int  # H
    linear_num_value_heads: int  # HV
    vocab_size: int
    purpose: str


# tiny: correctness (fast); geom-*: the per-layer GDN geometry of real models for speed runs.
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("tiny", 256, 512, 4, 2, 1, 256, 2, 4, 2048, "correctness"),
        ModelSpec("tiny-wide", 512, 1024, 4, 4, 1, 256, 4, 8, 2048, "correctness, HV/H=2"),
        # Qwen3.5-35B-A3B: hidden 2048, attention 16/2, GDN H=16 HV=32; dense small MLP.
        ModelSpec("geom-35b", 2048, 1024, 8, 16, 2, 256, 16, 32, 4096, "speed, 35B-A3B GDN"),
        # The same layers at the real depth (40 layers: 30 GDN, 10 attention), so that the GDN
        # state traffic weighs in a decode step as in the real model (8 layers are host-bound).
        ModelSpec(
            "geom-35b-deep", 2048, 1024, 40, 16, 2, 256, 16, 32, 4096, "speed, 35B-A3B depth"
        ),
        # Qwen3.5-27B: hidden 5120, attention 24/4, GDN H=16 HV=48.
        ModelSpec("geom-27b", 5120, 2048, 8, 24, 4, 256, 16, 48, 4096, "speed, 27B GDN"),
        # geom-27b's layers, 12 of them (9 GDN, 3 attention). The real 27B has 64 (48 GDN, 16
        # attention), but at hidden 5120 every 4 layers add 0.58 G parameters (1.08 GiB bf16):
        # 64 layers are 9.5 G / 17.7 GiB per checkpoint, too slow to build inside one device
        # call. 12 is the deepest near the ~3.5 GiB budget (checkpoint_numel: 1.97 G, 3.66 GiB,
        # ~60 s to build like geom-35b-deep's 2.97 GiB in ~50 s; 16 layers would be 4.74 GiB).
        # Its GDN state per request is 1.5x the 8-layer geom-27b's and 0.45x geom-35b-deep's
        # (9 x HV 48 vs 30 x HV 32 head-layers). Estimate, from geom-35b-deep's measured 36 ms
        # native / 17 ms ucache steps at B=256: native's state traffic is about half of this
        # model's step there (GPU-bound), where the 8-layer models' steps were host-bound.
        ModelSpec(
            "geom-27b-deep", 5120, 2048, 12, 24, 4, 256, 16, 48, 4096, "speed, 27B GDN, 12 layers"
        ),
    )
}
ACCEPTANCE = ("agree", "reject")


@dataclass(frozen=True)
class Knobs:
    # Scale of every layer's output projections at hidden 256 and 4 layers (rescaled for other
    # sizes in make_weights). 2.5 gives the tiny model a ~25 % deviation rate from the cycle
    # (CPU reference, 40 tokens).
    target_noise: float = 2.5
    mtp_noise: float = 0.15  # agree mode: random part of mtp.fc (MTP flip rate)


def layer_types(num_layers: int) -> list[str]:
    """Qwen3.5's pattern: every 4th layer full attention (full_attention_interval 4)."""
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]


def checkpoint_numel(spec: ModelSpec) -> int:
    """Parameters of one checkpoint (either acceptance level: the same tensors), counted by
    running make_weights on the meta device (no memory, no time). x 2 bytes: its bf16 size."""
    with torch.device("meta"):
        weights, _ = make_weights(spec, "reject", Knobs(), seed=0)
    return sum(t.numel() for t in weights.values())


def make_config(spec: ModelSpec) -> dict:
    """config.json with the field names of the official Qwen3.5 text checkpoints."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "layer_types": layer_types(spec.num_hidden_layers),
        "full_attention_interval": 4,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "linear_num_key_heads": spec.linear_num_key_heads,
        "linear_num_value_heads": spec.linear_num_value_heads,
        "linear_key_head_dim": GDN_HEAD_DIM,
        "linear_value_head_dim": GDN_HEAD_DIM,
        "linear_conv_kernel_dim": 4,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "mamba_ssm_dtype": "float32",
        "attn_output_gate": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "initializer_range": 0.02,
    }


def single_cycle_permutation(n: int, gen: torch.Generator) -> torch.Tensor:
    """perm with one cycle through all n values (no fixed points, no short loops)."""
    order = torch.randperm(n, generator=gen)
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = torch.roll(order, -1)
    return perm


def _randn(gen: torch.Generator, *shape: int, fan_in: int, gain: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * (gain / math.sqrt(fan_in))


def decoder_layer_weights(
    prefix: str, spec: ModelSpec, kind: str, gen: torch.Generator, out_gain: float
) -> dict[str, torch.Tensor]:
    """One decoder layer in HF Qwen3.5 names; output projections scaled by out_gain."""
    h, w = spec.hidden_size, {}
    if kind == "linear_attention":
        nk, nv, d = spec.linear_num_key_heads, spec.linear_num_value_heads, GDN_HEAD_DIM
        conv_dim = 2 * nk * d + nv * d
        a = f"{prefix}.linear_attn"
        w[f"{a}.in_proj_qkv.weight"] = _randn(gen, conv_dim, h, fan_in=h)
        w[f"{a}.in_proj_z.weight"] = _randn(gen, nv * d, h, fan_in=h)
        w[f"{a}.in_proj_b.weight"] = _randn(gen, nv, h, fan_in=h)
        w[f"{a}.in_proj_a.weight"] = _randn(gen, nv, h, fan_in=h)
        w[f"{a}.conv1d.weight"] = _randn(gen, conv_dim, 1, 4, fan_in=4)
        # Decay rates like the real init: A in [1, 16], dt ~ 1e-3..1e-1 (memory over many tokens).
        w[f"{a}.A_log"] = torch.log(torch.empty(nv).uniform_(1, 16, generator=gen))
        dt = torch.exp(torch.empty(nv).uniform_(math.log(1e-3), math.log(1e-1), generator=gen))
        w[f"{a}.dt_bias"] = dt + torch.log(-torch.expm1(-dt))  # inverse softplus
        w[f"{a}.norm.weight"] = torch.ones(d)
        w[f"{a}.out_proj.weight"] = _randn(gen, h, nv * d, fan_in=nv * d, gain=out_gain)
    else:
        nh, nkv, d = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
        a = f"{prefix}.self_attn"
        w[f"{a}.q_proj.weight"] = _randn(gen, 2 * nh * d, h, fan_in=h)  # query + output gate
        w[f"{a}.k_proj.weight"] = _randn(gen, nkv * d, h, fan_in=h)
        w[f"{a}.v_proj.weight"] = _randn(gen, nkv * d, h, fan_in=h)
        w[f"{a}.o_proj.weight"] = _randn(gen, h, nh * d, fan_in=nh * d, gain=out_gain)
        w[f"{a}.q_norm.weight"] = torch.zeros(d)  # zero-centred RMSNorm: scale 1 + w
        w[f"{a}.k_norm.weight"] = torch.zeros(d)
    i = spec.intermediate_size
    w[f"{prefix}.mlp.gate_proj.weight"] = _randn(gen, i, h, fan_in=h)
    w[f"{prefix}.mlp.up_proj.weight"] = _randn(gen, i, h, fan_in=h)
    w[f"{prefix}.mlp.down_proj.weight"] = _randn(gen, h, i, fan_in=i, gain=out_gain)
    w[f"{prefix}.input_layernorm.weight"] = torch.zeros(h)
    w[f"{prefix}.post_attention_layernorm.weight"] = torch.zeros(h)
    return w


def output_gain(spec: ModelSpec, knobs: Knobs) -> float:
    """Gain of every decoder layer's output projections. Deviation from the cycle needs the
    perturbation to beat the best spurious alignment with another token's embedding,
    ~ sqrt(2 ln V / hidden); the sum of the layers' perturbations grows like sqrt(layers)."""
    return (
        knobs.target_noise
        * math.sqrt(spec.hidden_size / 256)
        * math.sqrt(4 / spec.num_hidden_layers)
    )


def make_weights(
    spec: ModelSpec, acceptance: str, knobs: Knobs, seed: int
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """All tensors (float32) of the checkpoint, and the permutation the LM head encodes.
    The target weights depend only on (spec, knobs.target_noise, seed): the `agree` and
    `reject` checkpoints of one model have the same target model, so their greedy tokens match."""
    if acceptance not in ACCEPTANCE:
        raise ValueError(f"acceptance {acceptance!r}: choose one of {ACCEPTANCE}")
    gen = torch.Generator().manual_seed(seed)
    h, v = spec.hidden_size, spec.vocab_size
    embed = torch.randn(v, h, generator=gen)
    embed /= embed.pow(2).mean(dim=1, keepdim=True).sqrt()
    perm = single_cycle_permutation(v, gen)
    lm_head = torch.empty(v, h)
    lm_head[perm] = embed * (LOGIT_SCALE / h)
    w = {"model.embed_tokens.weight": embed, "lm_head.weight": lm_head}
    out_gain = output_gain(spec, knobs)
    for idx, kind in enumerate(layer_types(spec.num_hidden_layers)):
        w |= decoder_layer_weights(f"model.layers.{idx}", spec, kind, gen, out_gain)
    w["model.norm.weight"] = torch.zeros(h)
    # MTP head: its own generator, so the target is identical across acceptance levels.
    mgen = torch.Generator().manual_seed(seed + 1_000_003)
    eye, zero = torch.eye(h), torch.zeros(h, h)
    if acceptance == "agree":
        fc = torch.cat([eye, zero], dim=1) + _randn(
            mgen, h, 2 * h, fan_in=2 * h, gain=knobs.mtp_noise
        )
    else:
        fc = torch.cat([zero, eye], dim=1)
    w["mtp.fc.weight"] = fc
    w["mtp.pre_fc_norm_embedding.weight"] = torch.zeros(h)
    w["mtp.pre_fc_norm_hidden.weight"] = torch.zeros(h)
    w["mtp.norm.weight"] = torch.zeros(h)
    w |= decoder_layer_weights("mtp.layers.0", spec, "full_attention", mgen, knobs.mtp_noise)
    return w, perm


def write_model(
    out: Path,
    spec: ModelSpec,
    acceptance: str,
    knobs: Knobs | None = None,
    seed: int = 0,
    extra: dict | None = None,
) -> Path:
    from safetensors.torch import save_file

    knobs = knobs or Knobs()
    weights, perm = make_weights(spec, acceptance, knobs, seed)
    path = out / f"{spec.name}-{acceptance}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(make_config(spec), indent=1) + "\n")
    save_file(
        {k: t.to(torch.bfloat16).contiguous() for k, t in weights.items()},
        str(path / "model.safetensors"),
        metadata={"format": "pt"},
    )
    info = {
        "spec": asdict(spec),
        "acceptance": acceptance,
        "knobs": asdict(knobs),
        "seed": seed,
        "logit_scale": LOGIT_SCALE,
        "perm_sha": hash(tuple(perm[:64].tolist())) & 0xFFFFFFFF,
    } | (extra or {})
    (path / "construction.json").write_text(json.dumps(info, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default="tiny", help=f"comma list of {sorted(MODELS)}")
    parser.add_argument("--acceptance", default="agree,reject")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-noise", type=float, default=Knobs.target_noise)
    parser.add_argument("--mtp-noise", type=float, default=Knobs.mtp_noise)
    args = parser.parse_args(argv)
    knobs = Knobs(args.target_noise, args.mtp_noise)
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; choose from {sorted(MODELS)}")
        for acc in args.acceptance.split(","):
            path = write_model(args.out, MODELS[name], acc, knobs, args.seed)
            size = (path / "model.safetensors").stat().st_size
            print(f"{path} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
