"""Catalog contents, the estimate/catalog commands, and input errors, through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError
from planner.estimator.support import supported_devices
from planner.hf_config import load_hf_config
from planner.load import load_problem

runner = CliRunner()
CAT = load_catalog()

REQUIRED_DEVICES = [
    "rtx-4060-ti-16gb",
    "rtx-5060-ti-16gb",
    "rx-7900-xtx",
    "m4-pro-64gb",
    "m4-max-128gb",
    "dgx-spark",
    "p100",
    "v100-sxm2-32gb",
    "t4",
    "rtx-2080-ti",
    "rtx-3090",
    "rtx-4090",
    "a10g",
    "l4",
    "l40s",
    "rtx-6000-ada",
    "a100-40gb-sxm",
    "a100-80gb-sxm",
    "a100-40gb-pcie",
    "a100-80gb-pcie",
    "h100-sxm",
    "h100-pcie",
    "h200-sxm",
    "b200",
    "gb200",
    "mi300x",
    "gaudi2",
    "gaudi3",
    "tpu-v5e",
    "tpu-v5p",
    "trainium1",
    "inferentia2",
    "rtx-5090",
    "mi325x",
    "b300",
]


def test_catalog_has_the_devices_and_models_asked_for() -> None:
    assert len(CAT.accelerators) >= 35
    assert set(REQUIRED_DEVICES) <= set(CAT.accelerators)
    assert len(CAT.models) >= 20
    kinds = {m.id: ("mla" if m.mla else "moe" if m.moe else "dense") for m in CAT.models.values()}
    assert {"mla", "moe", "dense"} <= set(kinds.values())


def test_every_price_is_dated_and_every_source_resolves() -> None:
    for a in CAT.accelerators.values():
        assert a.price.purchase_usd is None or a.price.purchase_date
        for ref in a.sources.values():
            assert CAT.references[ref].title


def test_sparse_figures_are_not_used() -> None:
    # H100 SXM dense BF16 is 989.4 TFLOPS; 1,979 is the 2:4 sparsity figure (datasheet footnote).
    assert CAT.accelerator("h100-sxm").dense_tflops.bf16 == pytest.approx(989.4, rel=0.01)


def test_catalog_list_and_show() -> None:
    r = runner.invoke(app, ["catalog", "list", "devices"])
    assert r.exit_code == 0 and "h100-sxm" in r.output
    r = runner.invoke(app, ["catalog", "list", "models", "--format", "json"])
    assert r.exit_code == 0
    assert any(row["id"] == "llama-3.1-70b" for row in json.loads(r.output))
    r = runner.invoke(app, ["catalog", "show", "h100-sxm", "--format", "json"])
    assert r.exit_code == 0
    assert json.loads(r.output)["sources"]["spec"]["title"]


def test_unknown_device_suggests_the_nearest() -> None:
    r = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--device", "h100"])
    assert r.exit_code == 2
    assert "did you mean" in r.output and "`h100-sxm`" in r.output


def test_unknown_model_suggests_the_nearest() -> None:
    r = runner.invoke(app, ["estimate", "--model", "llama-3-70b", "--device", "h100-sxm"])
    assert r.exit_code == 2
    assert "llama-3.1-70b" in r.output


def test_estimate_table_and_json() -> None:
    r = runner.invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-70b",
            "--device",
            "h100-sxm",
            "--weights",
            "fp16",
            "--context",
            "8192",
            "--batch",
            "32",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "tokens/s" in r.output and "does NOT fit" in r.output  # 141 GB of weights > 80 GiB
    r = runner.invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--device",
            "rtx-4090",
            "--task",
            "qlora",
            "--seq",
            "4096",
            "--micro-batch",
            "1",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["fits_one_device"] and data["tokens_per_s"] > 0
    assert set(data["memory_bytes"]) >= {
        "weights",
        "activations",
        "gradients",
        "optimizer",
        "framework",
    }


def test_model_that_fits_nowhere_says_by_how_much() -> None:
    r = runner.invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-405b",
            "--device",
            "rtx-4060-ti-16gb",
            "--weights",
            "fp16",
        ],
    )
    assert "short by" in r.output


def test_estimate_all_devices_json() -> None:
    r = runner.invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--device",
            "all",
            "--weights",
            "q4_k_m",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0
    # Every device some engine runs Q4_K_M on (llama.cpp's GGUF: not Gaudi, TPU or Neuron).
    runs = supported_devices(CAT, list(CAT.accelerators.values()), "q4_k_m", "fp16")
    assert len(json.loads(r.output)) == len(runs) < len(CAT.accelerators)


def test_hf_config_json(tmp_path: Path) -> None:
    # The published Llama 3.1 8B config.json fields give 8.03e9 parameters.
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    }
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    m = load_hf_config(d / "config.json")
    assert m.published_params == pytest.approx(8.03e9, rel=1e-3)
    r = runner.invoke(
        app,
        [
            "estimate",
            "--model",
            str(d / "config.json"),
            "--device",
            "m4-max-128gb",
            "--weights",
            "q4_0",
        ],
    )
    assert r.exit_code == 0, r.output


def test_bad_config_json(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        load_hf_config(p)


def test_problem_errors_name_line_and_suggest(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(
        "name: x\nworkloads:\n  - name: chat\n    model: llama-3.1-8b\n    concurency: 4\n"
    )
    with pytest.raises(InputError) as e:
        load_problem(p)
    msg = str(e.value)
    assert "bad.yaml:5:5" in msg and "did you mean `concurrency`" in msg


def test_problem_unknown_model_is_located(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nworkloads:\n  - name: chat\n    model: llama-3-70b\n")
    with pytest.raises(
        InputError, match=r"bad.yaml:4:\d+: workloads\[0\].model: workload `chat`: unknown model"
    ):
        load_problem(p)


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    p = tmp_path / "evil.yaml"
    p.write_text("name: !!python/object/apply:os.system ['echo hi']\nworkloads: []\n")
    with pytest.raises(InputError):
        load_problem(p)


def test_solve_bad_input_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nworkloads: [\n")
    r = runner.invoke(app, ["solve", str(p)])
    assert r.exit_code == 2
    assert "invalid YAML" in r.output
