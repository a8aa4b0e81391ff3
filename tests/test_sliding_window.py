"""Sliding-window (local) attention in KV memory and attention FLOPs, and the model's maximum
context checked where the problem states the context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError
from planner.estimator.architecture import attended_tokens, causal_attended_tokens
from planner.estimator.formats import weight_format
from planner.estimator.memory import inference_memory
from planner.estimator.perf import training_flops_per_token
from planner.hf_config import load_hf_config

ROOT = Path(__file__).resolve().parent.parent

# google/gemma-3-27b-it config.json (text_config): 62 layers, 16 KV heads of 128, a 1,024-token
# window on five layers of every six (sliding_window_pattern 6), 131,072 positions.
GEMMA3_27B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 5376,
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "intermediate_size": 21504,
        "vocab_size": 262208,
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 131072,
    },
}


def _config(tmp_path: Path, cfg: dict[str, object], name: str = "model") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d / "config.json"


def test_gemma3_27b_kv_cache_at_32k_by_8(tmp_path: Path) -> None:
    m = load_hf_config(_config(tmp_path, GEMMA3_27B))
    assert (m.sliding_window, m.local_layers) == (1024, 62 - 62 // 6)
    mem = inference_memory(m, weight_format("bf16"), 2.0, batch=8, context=32768)
    # Per token per layer 2 x 16 heads x 128 x 2 bytes = 8,192 B. Ten global layers hold 32,768
    # tokens, 52 local layers 1,024: (10 x 32,768 + 52 x 1,024) x 8,192 B x 8 sequences.
    assert mem.kv_cache == pytest.approx((10 * 32768 + 52 * 1024) * 8192 * 8)  # 24.96 GB
    every_layer_global = 62 * 32768 * 8192 * 8  # 133 GB, what the window-blind count gave
    assert every_layer_global / mem.kv_cache == pytest.approx(62 * 32 / (10 * 32 + 52))  # 5.33


def test_layer_types_and_the_qwen2_switch(tmp_path: Path) -> None:
    # gpt-oss style: a kind per layer. Qwen2 style: a window that `use_sliding_window` turns off.
    base = {
        "hidden_size": 2880,
        "num_hidden_layers": 4,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 2880,
        "vocab_size": 201088,
        "max_position_embeddings": 131072,
        "sliding_window": 128,
    }
    kinds = ["sliding_attention", "full_attention"] * 2
    m = load_hf_config(_config(tmp_path, {**base, "layer_types": kinds}, "oss"))
    assert (m.sliding_window, m.local_layers) == (128, 2)
    q = load_hf_config(_config(tmp_path, {**base, "use_sliding_window": False}, "qwen"))
    assert q.sliding_window is None and q.local_layers == 0
    mistral = load_hf_config(_config(tmp_path, base, "mistral"))  # no pattern: every layer
    assert mistral.local_layers == 4
    with pytest.raises(InputError, match=r"layer_types.*4 attention kinds"):
        load_hf_config(_config(tmp_path, {**base, "layer_types": kinds[:3]}, "bad"))


def test_catalog_models_declare_their_windows() -> None:
    cat = load_catalog()
    # config.json of each (sliding_window; layer_types for gpt-oss; alternating for Gemma 2).
    for mid, window, local in (
        ("mistral-7b", 4096, 32),
        ("gemma-2-9b", 4096, 21),
        ("gemma-2-27b", 4096, 23),
        ("gpt-oss-120b", 128, 18),
        ("gpt-oss-20b", 128, 12),
    ):
        m = cat.models[mid]
        assert (m.sliding_window, m.local_layers) == (window, local), mid
    assert cat.models["llama-3.1-8b"].sliding_window is None


def test_attention_flops_follow_the_window() -> None:
    m = load_catalog().models["mistral-7b"]
    # Every layer local with w = 4,096: decode attends to min(ctx, w); a causal prompt of P > w
    # attends on average to w - w^2 / (2P) tokens, P / 2 while P <= w.
    assert attended_tokens(m, 32768) == 4096
    assert attended_tokens(m, 1000) == 1000
    assert causal_attended_tokens(m, 2048) == 1024
    assert causal_attended_tokens(m, 32768) == pytest.approx(4096 - 4096**2 / (2 * 32768))
    full = m.model_copy(update={"sliding_window": None, "local_layers": 0})
    assert training_flops_per_token(m, 32768, "full", "none") < training_flops_per_token(
        full, 32768, "full", "none"
    )
    assert training_flops_per_token(m, 2048, "full", "none") == training_flops_per_token(
        full, 2048, "full", "none"
    )


def test_context_beyond_the_model_maximum_is_a_located_error() -> None:
    r = CliRunner().invoke(
        app,
        [
            "solve",
            str(ROOT / "problems" / "chat-70b.yaml"),
            "--set",
            "workloads.chat.context_tokens=1M",
        ],
    )
    assert r.exit_code == 2
    out = " ".join(r.output.split())
    assert "workloads.chat.context_tokens=1M" in out
    assert "longer than llama-3.1-70b's maximum context of 131,072 tokens" in out
    assert "Traceback" not in out


def test_config_json_oddities_are_refused_by_field(tmp_path: Path) -> None:
    # A zero pattern is no pattern (read once as every layer local: a cache an eighth of the
    # true one), a kind no transformers version knows, a zero maximum context (read once as the
    # 4,096 default): each refused, the file and the field named.
    base = {**dict(GEMMA3_27B["text_config"]), "model_type": "llama"}  # type: ignore[call-overload]
    for name, change, field in (
        ("pattern0", {"sliding_window_pattern": 0}, "`sliding_window_pattern`"),
        ("kinds", {"layer_types": ["foo"] * 62}, '`layer_types` entry 1 of 62: "foo"'),
        ("maxpos0", {"max_position_embeddings": 0}, "`max_position_embeddings`"),
    ):
        path = _config(tmp_path, {**base, **change}, name)
        with pytest.raises(InputError) as e:
            load_hf_config(path)
        assert str(e.value).startswith(f"{path}: {field}"), str(e.value)
    # The kinds transformers accepts still read: chunked attention counted as full.
    kinds = ["sliding_attention", "chunked_attention"] * 31
    m = load_hf_config(_config(tmp_path, {**base, "layer_types": kinds}, "chunked"))
    assert m.local_layers == 31


def test_configs_side_by_side_are_named_after_their_files(tmp_path: Path) -> None:
    """A folder's config.json is the folder's model (the Hub's layout); other .json files in
    one folder are as many models, each named after its file (all took the folder's name)."""
    one = tmp_path / "configs"
    one.mkdir()
    (one / "gemma-3-27b.json").write_text(json.dumps(GEMMA3_27B))
    assert load_hf_config(one / "gemma-3-27b.json").id == "gemma-3-27b"
    assert load_hf_config(_config(tmp_path, GEMMA3_27B, "Gemma_3")).id == "gemma-3"
