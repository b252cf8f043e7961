"""CPU reference for the constructed checkpoints: Hugging Face's Qwen3.5 model (the checkpoint
format's source of truth) runs the target; the MTP head is assembled from HF's own decoder layer
exactly as vLLM's `qwen3_5_mtp.py` wires it (norms, `fc` on [embedding, hidden], one
full-attention layer, final norm, shared LM head).

Used by tests/e2e (names and shapes load strictly; greedy output is not degenerate) and to
estimate the acceptance of a construction before spending GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ReferenceReport:
    tokens: list[int]  # greedy continuation
    distinct: int
    cycle_rate: float  # fraction of steps where next == perm[current]
    mtp_accept_first: float  # first-draft acceptance along the greedy trajectory
    expected_accepted: float  # p + p^2 + p^3 (3 drafts, independence assumed)


def hf_target(config: dict, weights: dict[str, torch.Tensor], dtype=torch.float32):
    """HF Qwen3_5ForCausalLM with `weights` loaded strictly (every non-MTP name and shape)."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    fields = {
        k: v
        for k, v in config.items()
        if k not in ("architectures", "model_type", "torch_dtype", "dtype")
    }
    hf_config = Qwen3_5TextConfig(**fields)
    model = Qwen3_5ForCausalLM(hf_config).to(dtype).eval()
    target = {k: v.to(dtype) for k, v in weights.items() if not k.startswith("mtp.")}
    model.load_state_dict(target, strict=True)
    return model


def hf_mtp_layer(config: dict, weights: dict[str, torch.Tensor], dtype=torch.float32):
    """The MTP decoder layer (full attention) as an HF decoder layer, weights loaded strictly."""
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

    fields = {
        k: v
        for k, v in config.items()
        if k not in ("architectures", "model_type", "torch_dtype", "dtype")
    }
    fields |= {"num_hidden_layers": 1, "layer_types": ["full_attention"]}
    layer = Qwen3_5DecoderLayer(Qwen3_5TextConfig(**fields), 0).to(dtype).eval()
    prefix = "mtp.layers.0."
    layer.load_state_dict(
        {k[len(prefix) :]: v.to(dtype) for k, v in weights.items() if k.startswith(prefix)},
        strict=True,
    )
    return layer


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


@torch.no_grad()
def run_reference(
    config: dict,
    weights: dict[str, torch.Tensor],
    perm: torch.Tensor,
    prompt: list[int],
    new_tokens: int = 48,
    dtype=torch.float32,
) -> ReferenceReport:
    model = hf_target(config, weights, dtype)
    ids = torch.tensor([prompt])
    for _ in range(new_tokens):  # full recompute: tiny model, no cache subtleties
        logits = model(input_ids=ids).logits[0, -1]
        ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    seq = ids[0].tolist()
    gen = seq[len(prompt) :]
    steps = list(zip(seq[len(prompt) - 1 : -1], gen, strict=True))
    cycle_rate = sum(int(perm[a]) == b for a, b in steps) / len(steps)

    # MTP first draft at every generated position t: input (embed(x_{t+1}), h_t) -> x_{t+2}.
    out = model.model(input_ids=ids, output_hidden_states=False)
    hidden = out.last_hidden_state[0]  # after the final norm, as vLLM passes it to MTP
    eps = config["rms_norm_eps"]
    wt = {k: v.to(dtype) for k, v in weights.items()}
    emb = wt["model.embed_tokens.weight"][ids[0, 1:]]
    h = hidden[:-1]
    x = (
        torch.cat(
            [
                _rms(emb, wt["mtp.pre_fc_norm_embedding.weight"], eps),
                _rms(h, wt["mtp.pre_fc_norm_hidden.weight"], eps),
            ],
            dim=-1,
        )
        @ wt["mtp.fc.weight"].T
    )
    layer = hf_mtp_layer(config, weights, dtype)
    positions = torch.arange(1, ids.shape[1]).unsqueeze(0)
    pos_emb = model.model.rotary_emb(x.unsqueeze(0), positions)
    mask = torch.full((x.shape[0], x.shape[0]), float("-inf")).triu(1)[None, None]
    y = layer(
        x.unsqueeze(0),
        position_embeddings=pos_emb,
        attention_mask=mask.to(dtype),
        position_ids=positions,
    )
    y = y[0] if isinstance(y, tuple) else y
    y = _rms(y[0], wt["mtp.norm.weight"], eps)
    draft = (y @ wt["lm_head.weight"].T).argmax(-1)  # draft for position t+2
    start = len(prompt) - 1  # drafts made once generation started
    hits = [int(draft[t]) == seq[t + 2] for t in range(start, len(seq) - 2)]
    p = sum(hits) / max(1, len(hits))
    return ReferenceReport(gen, len(set(gen)), cycle_rate, p, p + p * p + p**3)
