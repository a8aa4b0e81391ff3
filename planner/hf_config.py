"""Read a Hugging Face `config.json` from disk into a ModelArch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InputError
from planner.estimator.architecture import total_params
from planner.schema.catalog import MLA, ModelArch, MoE

_GATED_ACTS = {"silu", "swiglu", "gelu_pytorch_tanh", "gelu_new", "geglu"}


def load_hf_config(path: Path) -> ModelArch:
    """Map the config keys of Llama/Mistral/Mixtral/Qwen2/Gemma2/DeepSeek-V3-style models.

    Long because each config.json field is read and checked where it is named.
    """
    try:
        cfg: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        cfg = {**cfg, **cfg["text_config"]}

    def need(*keys: str) -> Any:
        for k in keys:
            if k in cfg:
                return cfg[k]
        raise InputError(
            f"{path}: missing `{keys[0]}`; is this a decoder-only transformer's config.json?"
        )

    hidden = int(need("hidden_size", "n_embd", "d_model"))
    heads = int(need("num_attention_heads", "n_head"))
    model_type = str(cfg.get("model_type", "custom"))
    moe = None
    n_experts = (
        cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts")
    )
    if n_experts:
        moe = MoE(
            num_experts=int(n_experts),
            experts_per_token=int(need("num_experts_per_tok", "num_experts_per_token")),
            shared_experts=int(cfg.get("n_shared_experts") or 0),
            expert_intermediate_size=int(
                cfg.get("moe_intermediate_size") or need("intermediate_size")
            ),
            first_dense_layers=int(cfg.get("first_k_dense_replace") or 0),
            dense_intermediate_size=cfg.get("intermediate_size")
            if cfg.get("first_k_dense_replace")
            else None,
        )
    mla = None
    if cfg.get("kv_lora_rank"):
        mla = MLA(
            q_lora_rank=cfg.get("q_lora_rank"),
            kv_lora_rank=int(cfg["kv_lora_rank"]),
            qk_nope_head_dim=int(need("qk_nope_head_dim")),
            qk_rope_head_dim=int(need("qk_rope_head_dim")),
            v_head_dim=int(need("v_head_dim")),
        )
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu")
    bias = (
        "qkv"
        if model_type.startswith("qwen2")
        else ("all" if cfg.get("attention_bias") else "none")
    )
    fields: dict[str, Any] = {
        "id": path.parent.name.lower().replace("_", "-") or "custom-model",
        "name": str(cfg.get("_name_or_path") or path.parent.name or "custom model"),
        "family": model_type,
        "released": "unknown",
        "hidden_size": hidden,
        "num_layers": int(need("num_hidden_layers", "n_layer", "num_layers")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(cfg.get("num_key_value_heads") or heads),
        "head_dim": cfg.get("head_dim"),
        "intermediate_size": int(cfg.get("intermediate_size") or 4 * hidden),
        "vocab_size": int(need("vocab_size")),
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "mlp": "gated" if act in _GATED_ACTS else "plain",
        "attention_bias": bias,
        "extra_norms_per_layer": 2 if model_type == "gemma2" else 0,
        "moe": moe,
        "mla": mla,
        "max_context": int(cfg.get("max_position_embeddings") or 4096),
        "published_params": 1.0,
        "sources": {"spec": str(path)},
    }
    if not fields["id"][0].isalnum():
        fields["id"] = "custom-model"
    try:
        draft = ModelArch.model_validate(fields)
    except ValidationError as e:
        first = e.errors()[0]
        raise InputError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    # No published total for a local config: record the count computed from the architecture.
    return draft.model_copy(update={"published_params": float(total_params(draft))})
