"""A mixture-of-experts model that routes every token to every expert (num_experts_per_tok =
num_local_experts in its config.json): one expert's weights were read as the block's total less
its active weights over the experts a token skips, 0 / 0 there, and `planner solve` stopped on a
ZeroDivisionError traceback. And a catalog model routing a token to more experts than it has is
refused where it is stated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hostile_cli import run

from planner.estimator.perf import weight_params_touched_per_layer
from planner.estimator.prefill_path import routed_padding_params_per_layer
from planner.hf_config import load_hf_config
from planner.schema.catalog import ModelArch, MoE
from planner.schema.model_params import block_groups

# A small Mixtral-shaped config: 4 experts, all 4 active per token, 8 layers.
EVERY_EXPERT = {
    "model_type": "mixtral",
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "num_local_experts": 4,
    "num_experts_per_tok": 4,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
# One gated expert of width 2,048 over a hidden size of 1,024: 3 x 1,024 x 2,048 weights.
EXPERT = 3 * 1024 * 2048  # 6,291,456


def _model(tmp_path: Path) -> ModelArch:
    path = tmp_path / "every-expert" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(EVERY_EXPERT))
    return load_hf_config(path)


def test_every_expert_is_read_at_every_token_count(tmp_path: Path) -> None:
    m = _model(tmp_path)
    (block,) = block_groups(m)
    # Every token touches all 4 experts: one token reads the whole block, as a large batch does.
    touched = weight_params_touched_per_layer(m, np.array([1.0, 512.0]))
    assert touched == pytest.approx([block.params, block.params])


def test_every_expert_pays_whole_tiles_of_the_micro_batch(tmp_path: Path) -> None:
    m = _model(tmp_path)
    # 100 tokens, each expert takes all 100: MMQ runs one tile of 112 columns (ggml-cuda/mmq.cuh
    # mul_mat_q_case: of 8, 16, ... 128 in steps of 16 from 48, the first with one tile), so each
    # of the 4 experts a token uses computes 12 padding columns per 100: 4 x 6,291,456 x 0.12.
    pad = routed_padding_params_per_layer(m, np.array([100.0, 128.0]))
    assert pad == pytest.approx([4 * EXPERT * 0.12, 0.0])


def test_solve_plans_a_model_with_every_expert_active(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _model(tmp_path)
    (tmp_path / "problem.yaml").write_text(
        "name: every-expert\n"
        "workloads:\n"
        "  - {name: chat, model: every-expert/config.json, weights: q4_k_m, engine: llama.cpp,\n"
        "     context_tokens: 4096, prompt_tokens: 1024, output_tokens: 256, concurrency: 4}\n"
        "constraints: {allowed_devices: [rtx-4090]}\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out = run("solve", "problem.yaml", "--workers", "1", "--out", "plan.json")
    assert code == 0, out
    assert json.loads((tmp_path / "plan.json").read_text())["status"] == "OPTIMAL"


def test_more_experts_per_token_than_experts_is_refused() -> None:
    with pytest.raises(ValueError, match=r"experts_per_token \(5\) is more than the num_experts"):
        MoE(num_experts=4, experts_per_token=5, expert_intermediate_size=2048)
