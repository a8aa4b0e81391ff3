"""Read a Hugging Face `config.json` from disk into a ModelArch."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import InputError
from planner.estimator.architecture import total_params
from planner.schema.catalog import MLA, LinearAttention, ModelArch, MoE
from planner.schema.files import read_json

_GATED_ACTS = {"silu", "swiglu", "gelu_pytorch_tanh", "gelu_new", "geglu"}


MAX_DIMENSION = 2**24  # 16,777,216: above every width, count and context of published models


def _whole(path: Path, key: str, value: Any) -> int:
    """A config.json count or width: a whole number (`4096` or `4096.0`) from 1 to MAX_DIMENSION."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and (not math.isfinite(value) or value != int(value)):
        ok = False
    if not ok or not 1 <= int(value) <= MAX_DIMENSION:
        got = json.dumps(value) if len(json.dumps(value)) <= 40 else type(value).__name__
        raise InputError(
            f"{path}: `{key}`: expected a whole number from 1 to {MAX_DIMENSION:,}, got {got}"
        )
    return int(value)


def _flag(path: Path, cfg: dict[str, Any], key: str, default: bool) -> bool:
    """A config.json switch: JSON true or false; absent or null is `default`. Text such as
    "false" is refused rather than read by Python's truth (a non-empty string is true)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        got = json.dumps(value) if len(json.dumps(value)) <= 40 else type(value).__name__
        raise InputError(
            f"{path}: `{key}`: expected true or false (JSON, without quotes), got {got}"
        )
    return value


def _read_json(path: Path) -> dict[str, Any]:
    cfg = read_json(path)
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    return cfg


def load_hf_config(path: Path) -> ModelArch:
    """Map the config keys of Llama/Mistral/Mixtral/Qwen2/Gemma2/DeepSeek-V3-style models."""
    try:
        draft = _arch(path, _read_json(path))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(f"{path}: {where}: {msg}; fix the config.json") from None
    # No published total for a local config: record the count computed from the architecture.
    return draft.model_copy(update={"published_params": float(total_params(draft))})


# Model types whose code alternates local and global layers when config.json does not list them:
# (every n-th layer global). Gemma 2: even layers local (Gemma2DecoderLayer, layer_idx % 2);
# Gemma 3: five local to one global (sliding_window_pattern 6, Gemma 3 technical report, sec. 2).
_DEFAULT_GLOBAL_EVERY = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6}

# The attention kinds transformers accepts in `layer_types` (configuration_utils.py,
# ALLOWED_LAYER_TYPES). "sliding_attention" keeps a window's worth of KV cache, "linear_attention"
# a fixed recurrent state (_linear_attention); the chunked kind is counted as full attention,
# which bounds its cache from above.
_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


def _layer_types(path: Path, cfg: dict[str, Any], layers: int) -> list[str] | None:
    """config.json's `layer_types` (one attention kind per layer), checked; None when absent."""
    types = cfg.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != layers:
        raise InputError(
            f"{path}: `layer_types`: expected a list of {layers} attention kinds (one per "
            f"layer, as num_hidden_layers says), got "
            f"{len(types) if isinstance(types, list) else type(types).__name__}"
            + (" entries" if isinstance(types, list) else "")
        )
    odd = [(j, t) for j, t in enumerate(types) if t not in _LAYER_TYPES]
    if odd:
        j, t = odd[0]
        raise InputError(
            f"{path}: `layer_types` entry {j + 1} of {layers}: {json.dumps(t)[:40]} is not an "
            f"attention kind; write one of {', '.join(_LAYER_TYPES)} for each layer"
        )
    return [str(t) for t in types]


# The dimensions of a Gated DeltaNet layer, config.json key -> LinearAttention field (Hugging Face
# transformers' Qwen3NextConfig and Qwen3_5TextConfig).
_LINEAR_KEYS = {
    "linear_num_key_heads": "num_key_heads",
    "linear_num_value_heads": "num_value_heads",
    "linear_key_head_dim": "key_head_dim",
    "linear_value_head_dim": "value_head_dim",
    "linear_conv_kernel_dim": "conv_kernel_dim",
}


def _linear_count(path: Path, cfg: dict[str, Any], layers: int) -> int:
    """How many layers are linear attention: `layer_types`' "linear_attention" entries, or,
    without the list, every layer but each `full_attention_interval`-th. Where the file gives
    both they must agree layer by layer: transformers reads the list and ignores the interval,
    so a file whose two keys disagree was written by hand, and which one the author meant is
    not ours to guess."""
    types = _layer_types(path, cfg, layers)
    interval = cfg.get("full_attention_interval")
    every = None if interval is None else _whole(path, "full_attention_interval", interval)
    if types is None:
        return 0 if every is None else layers - layers // every
    if every is not None:
        for i, t in enumerate(types):
            full = (i + 1) % every == 0
            if full == (t == "linear_attention"):
                said = "full attention" if full else "linear attention"
                raise InputError(
                    f"{path}: `layer_types` entry {i + 1} of {layers} is {json.dumps(t)}, but "
                    f"`full_attention_interval` {every} makes layer {i + 1} {said}; the two "
                    "keys disagree: correct one, or remove `full_attention_interval` (the list "
                    "says it layer by layer)"
                )
    return sum(1 for t in types if t == "linear_attention")


def _linear_attention(path: Path, cfg: dict[str, Any], layers: int) -> LinearAttention | None:
    """The linear-attention layers of a hybrid model: those `layer_types` names
    "linear_attention", or, without the list, every layer but each `full_attention_interval`-th
    (transformers' Qwen3NextConfig: layer i is full attention when (i + 1) % interval == 0).
    None when no layer is linear attention."""
    linear = _linear_count(path, cfg, layers)
    if not linear:
        return None
    if linear == layers:
        # A hybrid's full-attention layers carry its attention keys (heads, KV heads, head
        # width); with none left they describe nothing, and Qwen3-Next, Qwen3.5 and Qwen3.6 keep
        # one layer in four. An interval past the last layer is the usual slip.
        said = (
            f'all {layers} `layer_types` entries are "linear_attention"'
            if cfg.get("layer_types") is not None
            else f"`full_attention_interval` {cfg['full_attention_interval']} is more than the "
            f"{layers} layers, so every layer is linear attention"
        )
        raise InputError(
            f"{path}: {said}, leaving no full-attention layer; a hybrid model keeps at least "
            "one (Qwen3-Next and Qwen3.5 one in four, `full_attention_interval` 4): mark its "
            "full-attention layers"
        )
    missing = [k for k in _LINEAR_KEYS if cfg.get(k) is None]
    if missing:
        raise InputError(
            f"{path}: {linear} of {layers} layers are linear attention, but `{missing[0]}` is "
            f"missing; a Gated DeltaNet layer needs {', '.join(_LINEAR_KEYS)}: add them as the "
            "model's published config.json gives them"
        )
    dims = {field: _whole(path, k, cfg[k]) for k, field in _LINEAR_KEYS.items()}
    if dims["num_value_heads"] % dims["num_key_heads"]:
        raise InputError(
            f"{path}: `linear_num_value_heads`: {dims['num_value_heads']} value heads are no "
            f"whole multiple of the {dims['num_key_heads']} of `linear_num_key_heads`; fix one "
            "of the two"
        )
    return LinearAttention(layers=linear, **dims)


def _shared_experts(path: Path, cfg: dict[str, Any], expert_width: int) -> int:
    """Shared experts: `n_shared_experts` (DeepSeek), or `shared_expert_intermediate_size` in
    routed experts' widths (Qwen2-MoE, Qwen3-Next, Qwen3.5: one shared expert of that width)."""
    n = cfg.get("n_shared_experts")
    if n not in (None, 0, False):
        return _whole(path, "n_shared_experts", n)
    width = cfg.get("shared_expert_intermediate_size")
    if width in (None, 0, False):
        return 0
    w = _whole(path, "shared_expert_intermediate_size", width)
    if w % expert_width:
        raise InputError(
            f"{path}: `shared_expert_intermediate_size`: {w} is no whole number of routed "
            f"experts of width {expert_width} (`moe_intermediate_size`); the catalog counts the "
            "shared expert in routed experts' widths: fix one of the two"
        )
    return w // expert_width


def _sliding_window(path: Path, cfg: dict[str, Any], model_type: str) -> dict[str, int]:
    """sliding_window and local_layers from `sliding_window` with `layer_types` (a kind per layer,
    "sliding_attention" local), or `sliding_window_pattern` (every n-th layer global), or the
    model type's fixed pattern; otherwise every layer is local (Mistral 7B v0.1, Phi-3 mini).
    `use_sliding_window: false` (Qwen2) or a null window means none."""
    window = cfg.get("sliding_window")
    if window in (None, 0, False) or cfg.get("use_sliding_window") is False:
        return {}
    w = _whole(path, "sliding_window", window)
    layers = _whole(
        path, "num_hidden_layers", cfg.get("num_hidden_layers") or cfg.get("num_layers") or 1
    )
    types = _layer_types(path, cfg, layers)
    if types is not None:
        local = sum(1 for t in types if t == "sliding_attention")
    elif cfg.get("sliding_window_pattern") is not None:
        # 0 or false is no pattern at all, not "none of the layers global": refused, not read
        # as every layer local (a 32-layer Llama's cache at an eighth of its size).
        every = _whole(path, "sliding_window_pattern", cfg["sliding_window_pattern"])
        local = layers - layers // every
    elif model_type in _DEFAULT_GLOBAL_EVERY:
        local = layers - layers // _DEFAULT_GLOBAL_EVERY[model_type]
    else:
        local = layers
    return {"sliding_window": w, "local_layers": local} if local else {}


def _windowed_linear(path: Path, cfg: dict[str, Any], fields: dict[str, Any]) -> None:
    """A sliding window read without `layer_types` windows layers by rule (every layer, or all
    but every n-th), which knows nothing of a hybrid's linear-attention layers: where the
    windowed and the linear layers together outnumber the layers, the file must say which
    layer is which rather than be read one way or the other."""
    linear = fields["linear_attention"].layers if fields["linear_attention"] else 0
    local = fields.get("local_layers", 0)
    if linear and local + linear > fields["num_layers"]:
        raise InputError(
            f"{path}: `sliding_window` {fields['sliding_window']} without `layer_types` makes "
            f"{local} of the {fields['num_layers']} layers sliding-window attention, but "
            f"{linear} are linear attention (`full_attention_interval`): give `layer_types` "
            'with each layer\'s kind ("sliding_attention" for the windowed ones), or set '
            "`use_sliding_window: false` if the model attends in full"
        )


def _max_context(path: Path, cfg: dict[str, Any]) -> int:
    """`max_position_embeddings`, or 4,096 when the file leaves it out (or null); 0 or false is
    no context at all, refused rather than read as the default."""
    value = cfg.get("max_position_embeddings")
    return 4096 if value is None else _whole(path, "max_position_embeddings", value)


def _arch(path: Path, cfg: dict[str, Any]) -> ModelArch:
    """The architecture a config.json describes (pydantic errors left to the caller).

    Long because each config.json field is read and checked where it is named.
    """
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        cfg = {**cfg, **cfg["text_config"]}

    def need(*keys: str) -> int:
        for k in keys:
            if k in cfg:
                return _whole(path, k, cfg[k])
        raise InputError(
            f"{path}: missing `{keys[0]}`; is this a decoder-only transformer's config.json?"
        )

    def opt(key: str, default: int | None = None) -> int | None:
        """An optional count: absent, null, 0 or false mean the default."""
        value = cfg.get(key)
        return default if value in (None, 0, False) else _whole(path, key, value)

    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    if cfg.get("num_key_value_heads") in (0, False):
        # Absent or null means one KV head per query head; zero heads is no model at all.
        raise InputError(
            f"{path}: `num_key_value_heads`: {json.dumps(cfg['num_key_value_heads'])}; a model "
            "has at least one KV head. Remove the key "
            "(or set null) when every query head has its own, as `num_attention_heads` says"
        )
    kv_heads = opt("num_key_value_heads", heads) or heads
    if heads % kv_heads:
        # Grouped-query attention shares each KV head among a whole number of query heads
        # (Ainslie et al. 2023, GQA); a KV head count that does not divide them is no model.
        raise InputError(
            f"{path}: `num_key_value_heads`: {kv_heads} KV heads do not divide the {heads} "
            "query heads of `num_attention_heads`; each KV head serves a whole number of query "
            "heads: fix one of the two"
        )
    model_type = str(cfg.get("model_type", "custom"))
    moe = None
    n_experts = opt("n_routed_experts") or opt("num_local_experts") or opt("num_experts")
    if n_experts == 1:
        # One routed expert that every token takes is a dense feed-forward layer; the catalog's
        # MoE needs two or more (its message would name its own `num_experts`).
        key = next(k for k in ("n_routed_experts", "num_local_experts", "num_experts") if opt(k))
        raise InputError(
            f"{path}: `{key}`: 1 routed expert is no mixture of experts; fix one of the two: "
            f"remove `{key}` for a dense model (its `intermediate_size` then sizes the "
            "feed-forward layers), or give the expert count the model has"
        )
    if n_experts:
        per_token = need("num_experts_per_tok", "num_experts_per_token")
        if per_token > n_experts:
            raise InputError(
                f"{path}: `num_experts_per_tok`: {per_token} experts per token, more than the "
                f"{n_experts} experts there are"
            )
        dense_layers = opt("first_k_dense_replace", 0) or 0
        layers = need("num_hidden_layers", "n_layer", "num_layers")
        if dense_layers > layers:
            raise InputError(
                f"{path}: `first_k_dense_replace`: {dense_layers} dense layers first, more than "
                f"the {layers} layers there are (`num_hidden_layers`): fix one of the two"
            )
        expert_width = opt("moe_intermediate_size") or need("intermediate_size")
        moe = MoE(
            num_experts=n_experts,
            experts_per_token=per_token,
            shared_experts=_shared_experts(path, cfg, expert_width),
            expert_intermediate_size=expert_width,
            first_dense_layers=dense_layers,
            dense_intermediate_size=opt("intermediate_size") if dense_layers else None,
        )
    mla = None
    kv_rank = opt("kv_lora_rank")
    if kv_rank:
        mla = MLA(
            q_lora_rank=opt("q_lora_rank"),
            kv_lora_rank=kv_rank,
            qk_nope_head_dim=need("qk_nope_head_dim"),
            qk_rope_head_dim=need("qk_rope_head_dim"),
            v_head_dim=need("v_head_dim"),
        )
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu")
    bias = (
        "qkv"
        if model_type.startswith("qwen2")
        else ("all" if cfg.get("attention_bias") else "none")
    )
    # A model folder's config.json takes the folder's name (as the Hub lays them out); a file
    # named otherwise its own, so two configs side by side are two models.
    stem = path.parent.name if path.name == "config.json" else path.stem
    fields: dict[str, Any] = {
        "id": stem.lower().replace("_", "-") or "custom-model",
        "name": str(cfg.get("_name_or_path") or stem or "custom model"),
        "family": model_type,
        "released": "unknown",
        "hidden_size": hidden,
        "num_layers": need("num_hidden_layers", "n_layer", "num_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": opt("head_dim"),
        "intermediate_size": opt("intermediate_size", 4 * hidden),
        "vocab_size": need("vocab_size"),
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "mlp": "gated" if act in _GATED_ACTS else "plain",
        "attention_bias": bias,
        "extra_norms_per_layer": 2 if model_type == "gemma2" else 0,
        "moe": moe,
        "mla": mla,
        # Qwen3-Next's attention always gates its output (Qwen3NextAttention); Qwen3.5 says so.
        "attention_output_gate": _flag(path, cfg, "attn_output_gate", model_type == "qwen3_next"),
        "linear_attention": _linear_attention(
            path, cfg, need("num_hidden_layers", "n_layer", "num_layers")
        ),
        "max_context": _max_context(path, cfg),
        **_sliding_window(path, cfg, model_type),
        "published_params": 1.0,
        "sources": {"spec": str(path)},
    }
    _windowed_linear(path, cfg, fields)
    fields["id"] = re.sub(r"[^a-z0-9.\-]", "-", fields["id"])
    if not fields["id"][0].isalnum():
        fields["id"] = "custom-model"
    return ModelArch.model_validate(fields)
