"""Hybrid models of linear-attention (Gated DeltaNet) and full-attention layers: the recurrent
state and the KV cache they keep, their parameters, their config.json import, a plan for one,
and a model that attends in every layer left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError
from planner.estimator.architecture import (
    RECURRENT_STATE_BYTES,
    attended_tokens,
    causal_attended_tokens,
    linear_attention_flops_per_token_per_layer,
    recurrent_state_bytes_per_layer,
    recurrent_state_elements,
)
from planner.estimator.formats import weight_format
from planner.estimator.memory import (
    handoff_bytes,
    inference_memory,
    kv_bytes_per_token,
    state_shards,
)
from planner.estimator.perf import state_traffic_per_layer
from planner.hf_config import load_hf_config
from planner.schema.model_params import block_groups, total_params

ROOT = Path(__file__).resolve().parent.parent

# Qwen/Qwen3.6-35B-A3B config.json, text_config (the catalog entry's source): 40 layers, three
# Gated DeltaNet layers to one gated full-attention layer, 256 experts of 512 with 8 per token
# and one shared expert of 512.
QWEN36_35B = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "text_config": {
        "model_type": "qwen3_5_moe_text",
        "hidden_size": 2048,
        "num_hidden_layers": 40,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "full_attention_interval": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "attn_output_gate": True,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "float32",
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "vocab_size": 248320,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 262144,
    },
}
QWEN36_35B["text_config"]["layer_types"] *= 10  # type: ignore[index]

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: no layer_types, full_attention_interval 4, and
# no attn_output_gate (Qwen3NextAttention always gates).
QWEN3_NEXT_80B = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "full_attention_interval": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "intermediate_size": 5120,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "decoder_sparse_step": 1,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "max_position_embeddings": 262144,
    "use_sliding_window": False,
}


def _config(tmp_path: Path, cfg: dict[str, object], name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d / "config.json"


def test_recurrent_state_of_qwen36_35b_by_hand() -> None:
    m = load_catalog().model("qwen3.6-35b-a3b")
    # Per linear layer: 32 value heads x 128 x 128 state = 524,288, plus the convolution's last
    # 3 inputs of conv_dim 2 x 16 x 128 + 32 x 128 = 8,192: 24,576 (vLLM's
    # gated_delta_net_state_shape). 548,864 numbers, in fp32 2,195,456 bytes.
    assert recurrent_state_elements(m) == 32 * 128 * 128 + 3 * 8192 == 548_864
    assert RECURRENT_STATE_BYTES == 4.0
    # 30 of the 40 layers keep one: 65,863,680 bytes per sequence, averaged over 40 layers.
    assert recurrent_state_bytes_per_layer(m) * 40 == pytest.approx(30 * 548_864 * 4)


@pytest.mark.parametrize("context", [4096, 65536])
def test_hybrid_kv_and_state_at_two_contexts(context: int) -> None:
    m = load_catalog().model("qwen3.6-35b-a3b")
    # KV per token: 10 full-attention layers x 2 (K, V) x 2 KV heads x 256 x 2 bytes = 20,480 B
    # (the 30 linear layers keep none: 81,920 B if every layer cached).
    assert kv_bytes_per_token(m, 2.0) == 10 * 2 * 2 * 256 * 2 == 20_480
    state = 30 * 548_864 * 4  # 65,863,680 B per sequence, whatever the context
    mem = inference_memory(m, weight_format("bf16"), 2.0, batch=3, context=context)
    # 4,096: 3 x (83,886,080 + 65,863,680) = 449.2 MB; 65,536: 3 x (1,342,177,280 + state).
    assert mem.kv_cache == pytest.approx(3 * (context * 20_480 + state))
    # On two tensor-parallel devices both halve (2 KV heads, 16 key heads).
    half = inference_memory(m, weight_format("bf16"), 2.0, batch=3, context=context, tp=2)
    assert half.kv_cache == pytest.approx(mem.kv_cache / 2)
    assert attended_tokens(m, context) == pytest.approx(context * 10 / 40)


def test_decode_reads_and_writes_the_state() -> None:
    m = load_catalog().model("qwen3.6-27b")
    # 48 value heads x 128 x 128 + 3 x (2 x 16 x 128 + 48 x 128) = 786,432 + 30,720 numbers per
    # linear layer; 48 of 64 layers; fp32; read and written back each token.
    per_layer = 48 * (786_432 + 30_720) * 4 / 64
    assert state_traffic_per_layer(m, 1) == pytest.approx(2 * per_layer)
    assert state_traffic_per_layer(m, 4) == pytest.approx(2 * per_layer / 4)
    assert float(state_shards(m, 64)) == 16.0  # split no finer than its 16 key heads
    # Recurrent step, 7 dk dv per value head (torch_recurrent_gated_delta_rule), plus the
    # convolution's 2 x 4 x conv_dim, on 48 of 64 layers.
    step = 48 * 7 * 128 * 128 + 2 * 4 * (2 * 16 * 128 + 48 * 128)
    assert linear_attention_flops_per_token_per_layer(m, prefill=False) == pytest.approx(
        step * 48 / 64
    )
    # Chunked prefill: 2 C (3 dk + 2 dv) + 6 dk dv per value head with C = 64.
    chunk = 48 * (2 * 64 * (3 * 128 + 2 * 128) + 6 * 128 * 128) + 2 * 4 * (2 * 16 * 128 + 48 * 128)
    assert linear_attention_flops_per_token_per_layer(m, prefill=True) == pytest.approx(
        chunk * 48 / 64
    )
    # Softmax attention on the 16 full layers only: a prompt of 1,000 attends 500 on average there.
    assert causal_attended_tokens(m, 1000) == pytest.approx(500 * 16 / 64)


def test_hybrid_parameters_by_hand() -> None:
    m = load_catalog().model("qwen3.6-27b")
    h = 5120
    # Gated DeltaNet: in_proj_qkvz h x (2 x 2048 + 2 x 6144), in_proj_ba h x 96, conv1d
    # 10,240 x 4, dt_bias and A_log 48 each, norm 128, out_proj 6144 x h.
    linear = h * (4096 + 12288) + h * 96 + 10240 * 4 + 96 + 128 + 6144 * h
    # Gated attention: q_proj h x (24 x 256 x 2), k and v h x (4 x 256), o_proj 6144 x h.
    full = h * 12288 + 2 * h * 1024 + 6144 * h
    mlp, norms = 3 * h * 17408, 2 * h
    groups = block_groups(m)
    assert sorted((g.count, g.params) for g in groups) == [
        (16, full + mlp + norms),
        (48, linear + mlp + norms),
    ]
    # 26.90B with the untied 248,320-token embedding and head: the card's 27B.
    assert total_params(m) == pytest.approx(26.896e9, rel=1e-4)


def test_config_json_import_reads_the_hybrid(tmp_path: Path) -> None:
    cat = load_catalog()
    m = load_hf_config(_config(tmp_path, QWEN36_35B, "Qwen3.6-35B-A3B"))
    la = m.linear_attention
    assert la is not None
    assert (la.layers, la.num_key_heads, la.num_value_heads) == (30, 16, 32)
    assert (la.key_head_dim, la.value_head_dim, la.conv_kernel_dim) == (128, 128, 4)
    assert m.attention_output_gate and m.moe is not None and m.moe.shared_experts == 1
    # The import counts what the catalog entry, typed from the same file, counts.
    assert total_params(m) == total_params(cat.model("qwen3.6-35b-a3b"))
    nxt = load_hf_config(_config(tmp_path, QWEN3_NEXT_80B, "Qwen3-Next-80B-A3B"))
    assert nxt.linear_attention is not None and nxt.linear_attention.layers == 48 - 48 // 4
    assert nxt.attention_output_gate
    assert total_params(nxt) == total_params(cat.model("qwen3-next-80b-a3b"))


def test_config_json_hybrid_mistakes_are_located(tmp_path: Path) -> None:
    text = dict(QWEN36_35B["text_config"])  # type: ignore[call-overload]
    cases = (
        ("nokeys", {"linear_num_value_heads": None}, "`linear_num_value_heads` is missing"),
        ("odd", {"linear_num_value_heads": 24}, "`linear_num_value_heads`: 24 value heads"),
        ("shared", {"shared_expert_intermediate_size": 700}, "`shared_expert_intermediate_size`"),
    )
    for name, change, needle in cases:
        path = _config(tmp_path, {**QWEN36_35B, "text_config": {**text, **change}}, name)
        with pytest.raises(InputError) as e:
            load_hf_config(path)
        assert str(e.value).startswith(str(path)) and needle in str(e.value), str(e.value)


def test_a_plan_for_a_hybrid_model_is_verified() -> None:
    # Two DGX Sparks serving Qwen3.6-35B-A3B at 64k context, each sequence's state and its
    # 10 layers of KV: the solve re-checks the plan with the verifier before printing it.
    r = CliRunner().invoke(
        app,
        [
            "solve",
            str(ROOT / "problems" / "two-sparks.yaml"),
            "--set",
            "workloads.chat.model=qwen3.6-35b-a3b",
            "--set",
            "workloads.chat.context_tokens=65536",
            "--set",
            "workloads.chat.concurrency=8",
        ],
    )
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "qwen3.6-35b-a3b" in out and "tokens/s" in out


def test_models_that_attend_in_every_layer_are_unchanged() -> None:
    m = load_catalog().model("llama-3.1-70b")
    assert m.linear_attention is None and not m.attention_output_gate
    # Llama 3.1 70B at fp16: 80 x 2 x 8 x 128 x 2 = 327,680 bytes per token; no state.
    assert kv_bytes_per_token(m, 2.0) == 327_680
    assert recurrent_state_bytes_per_layer(m) == 0.0
    assert state_traffic_per_layer(m, 8) == 0.0
    assert linear_attention_flops_per_token_per_layer(m, prefill=True) == 0.0
    mem = inference_memory(m, weight_format("bf16"), 2.0, batch=4, context=8192, tp=4)
    assert mem.kv_cache == pytest.approx(4 * 8192 * 327_680 / 4)
    assert attended_tokens(m, 8192) == 8192 and causal_attended_tokens(m, 8192) == 4096
    assert len(block_groups(m)) == 1


def test_catalog_list_names_the_linear_layers() -> None:
    r = CliRunner().invoke(app, ["catalog", "list", "models"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "qwen3.6-35b-a3b" in line)
    assert "GQA + 30 linear" in row
    llama = next(line for line in r.output.splitlines() if "llama-3.1-70b " in line)
    assert "linear" not in llama


def test_a_prefill_engine_hands_over_the_state_too() -> None:
    m = load_catalog().model("qwen3.6-35b-a3b")
    # 1,000 prompt tokens of BF16 KV on 10 layers (20,480 B each) and one sequence's state,
    # 30 x 548,864 x 4 B: 20.48 MB + 65.86 MB.
    assert handoff_bytes(m, 2.0, 1000) == pytest.approx(1000 * 20_480 + 30 * 548_864 * 4)
    llama = load_catalog().model("llama-3.1-70b")
    assert handoff_bytes(llama, 2.0, 1000) == 1000 * 327_680


def test_a_decoding_sequence_moves_its_state_twice_and_its_kv_once() -> None:
    """The bytes that keep a device's memory busy (the power model's, memory.
    sequence_traffic_per_layer) are those the step's time charges (perf: the KV read once, the
    recurrent state read and written back), not the bytes kept (sequence_bytes_per_layer, which
    counted the state once). Qwen3.6-35B-A3B at 4,096 tokens, one device, BF16 KV, per layer
    averaged over its 40: KV 2 x 2 heads x 256 x 2 bytes x 4,096 tokens x 10 / 40 = 2,097,152;
    state 30 / 40 x (32 x 128 x 128 + 3 x (2 x 16 x 128 + 32 x 128)) x 4 bytes = 1,646,592,
    moved twice: 5,390,336 bytes."""
    from planner.estimator.memory import sequence_bytes_per_layer, sequence_traffic_per_layer
    from planner.estimator.perf import state_traffic_per_layer

    m = load_catalog().model("qwen3.6-35b-a3b")
    kept = sequence_bytes_per_layer(m, 2.0, 4096, 1)
    moved = sequence_traffic_per_layer(m, 2.0, 4096, 1)
    assert kept == pytest.approx(2_097_152 + 1_646_592)
    assert moved == pytest.approx(2_097_152 + 2 * 1_646_592)
    assert moved - 2_097_152 == pytest.approx(float(state_traffic_per_layer(m, 1)))
    # Split over 4 devices (16 key heads): each moves a quarter of the state, twice.
    four = sequence_traffic_per_layer(m, 2.0, 4096, 4) - sequence_bytes_per_layer(m, 2.0, 4096, 4)
    assert four == pytest.approx(1_646_592 / 4)
    # A model without linear attention moves what it keeps.
    dense = load_catalog().model("llama-3.1-8b")
    assert sequence_traffic_per_layer(dense, 2.0, 4096, 2) == sequence_bytes_per_layer(
        dense, 2.0, 4096, 2
    )
