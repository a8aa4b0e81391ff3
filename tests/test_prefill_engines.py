"""Which kernels a prompt's prefill runs on, by serving engine: llama.cpp's (prefill_path) for
llama.cpp's engines and their releases, the serving grid's batched rates for every other engine,
in `planner estimate` and in a plan alike. Figures by hand arithmetic (sources in comments)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ideal_factors import IDEAL
from typer.testing import CliRunner

from planner.catalog import load_catalog, use_overlays
from planner.cli import app
from planner.estimator.devices import device_table
from planner.estimator.formats import kv_bytes, weight_format
from planner.estimator.perf import (
    head_seconds,
    prefill_layer_seconds,
    serving_layer_seconds,
)
from planner.estimator.prefill_path import on_llama_cpp
from planner.estimator.prompt_time import serving_prefill_seconds
from planner.estimator.replica import StageSpec, inference_replica, layer_estimate
from planner.estimator.support import engine_kernels, engine_times

CAT = load_catalog()


def _prefill_s(*args: str) -> float:
    r = CliRunner().invoke(app, ["estimate", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return float(json.loads(r.output)["prefill_s"])


def test_llama_cpp_family_only() -> None:
    # support.yaml's `kernels`: llama.cpp (its RPC backend included) and its 2023-2024 builds
    # run llama.cpp's kernels; no engine named is the calibration rows' llama.cpp.
    assert engine_kernels(CAT, "llama.cpp") == "llama.cpp"
    assert engine_kernels(CAT, "llama.cpp-2024") == "llama.cpp-dequantizing"
    for engine in ("llama.cpp", "llama.cpp-2024", None):
        assert on_llama_cpp(engine_kernels(CAT, engine))
    for engine in ("vllm", "sglang", "tensorrt-llm", "vllm-0.5", "mlx", "distributed-llama"):
        assert engine_kernels(CAT, engine) == "serving-grid"
        assert not on_llama_cpp(engine_kernels(CAT, engine))


def test_a_vllm_block_at_the_batched_rate_by_hand() -> None:
    # Llama 3.1 8B in BF16 on an H100 SXM, one 2,048-token prompt, no decodes. Per block:
    # q and o 4096^2 each, k and v 4096 x 1024 each, MLP 3 x 4096 x 14336: 218.1 M weights,
    # 2,048 x 2 x 218.1e6 = 893.4 GFLOP at 989.4 TFLOP/s (BF16 dense, H100 datasheet) x 0.66
    # (serving.yaml batched_compute, datacenter) = 653.0 TFLOP/s: 1.368 ms; attention
    # 2,048 x 4 x 4096 x 1,024 (half the prompt) = 34.4 GFLOP at the same rate: 0.0527 ms.
    # 1.421 ms in all (the 436 MB of weights at 3.35 TB/s take 0.13 ms, less).
    # (A `compute` override would stand for the batched factor too: left out here.)
    m = CAT.model("llama-3.1-8b")
    free = {k: v for k, v in IDEAL.items() if k != "compute"}
    dev = device_table([CAT.accelerators["h100-sxm"]], {"h100-sxm": free})
    t = serving_layer_seconds(
        m, weight_format("bf16"), 2.0, dev, batch=0.0, context=2048, prefill_tokens=2048,
        prompt=2048,
    )  # fmt: skip
    assert float(t[0]) == pytest.approx(1.421e-3, rel=5e-3)
    whole = serving_prefill_seconds(m, weight_format("bf16"), 2.0, dev, prompt=2048)
    head = float(head_seconds(m, weight_format("bf16"), dev, 1.0)[0])
    assert float(whole[0]) == pytest.approx(32 * float(t[0]) + head, rel=1e-9)


def test_vllm_prefills_fp16_and_bf16_alike() -> None:
    # PyTorch's GEMMs accumulate FP16 and BF16 products in FP32: one rate for both (an RTX 4090
    # lists 165.2 TFLOP/s for each). llama.cpp multiplies FP16 weights with FP16 accumulation
    # at twice that on a GeForce part (prefill_path), BF16 at the listed rate.
    base = ["-m", "llama-3.1-8b", "-d", "rtx-4090", "--prompt", "2048"]
    fp16 = _prefill_s(*base, "--weights", "fp16", "--engine", "vllm")
    bf16 = _prefill_s(*base, "--weights", "bf16", "--engine", "vllm")
    assert fp16 == pytest.approx(bf16, rel=1e-9)
    cpp16 = _prefill_s(*base, "--weights", "fp16", "--engine", "llama.cpp")
    cppbf = _prefill_s(*base, "--weights", "bf16", "--engine", "llama.cpp")
    assert cppbf > 1.5 * cpp16  # twice the FLOP rate, less the share of fixed time


@pytest.mark.parametrize(
    ("device", "weights", "kv"),
    [
        ("h100-sxm", "fp8", "fp8"),
        ("rtx-4090", "fp16", "fp16"),
        ("a100-80gb-sxm", "awq-int4", "fp16"),
    ],
)
def test_an_estimate_times_a_prompt_as_the_serving_grid(device: str, weights: str, kv: str) -> None:
    # Under vLLM the estimate's first token is one iteration of the serving grid's block time
    # (replica.layer_estimate, what a plan's IterationTime and the verifier interpolate) with
    # the whole prompt and no decodes, x 32 blocks, plus the head on one token and the step
    # overhead: the same figure to the rounding of the JSON output.
    m, prompt = CAT.model("llama-3.1-8b"), 1024
    got = _prefill_s(
        "-m", m.id, "-d", device, "--weights", weights, "--kv", kv, "--engine", "vllm",
        "--prompt", str(prompt),
    )  # fmt: skip
    dev = device_table([CAT.accelerators[device]])
    fmt = weight_format(weights)
    layer = layer_estimate(
        m, fmt, kv_bytes(kv), dev, 1, 8192, (None, 5e-6), 0.0, kernels="serving-grid"
    )
    block = float(np.ravel(layer(0.0, float(prompt), float(prompt)))[0])
    head = float(head_seconds(m, fmt, dev, 1.0)[0]) + float(dev.step_overhead_s[0])
    assert got == pytest.approx(m.num_layers * block + head, rel=1e-3)


def test_the_old_release_keeps_its_rate_on_its_layer_split() -> None:
    # Llama 3.1 70B Q4_K_M on A100 40GB SXM needs two devices. The 2023-2024 builds had no
    # tensor split but the row split (--split-mode tensor is llama.cpp PR #19378, 2026), so
    # the estimate lays them out as a layer split by itself, the layout --tp 1 asks for: one
    # first-token time; --tp 2 is refused. The 2023-2024 builds dequantize GGUF weights to
    # FP16 cuBLAS at 312 TFLOP/s, where a current build's MMQ runs
    # 1 / (1 / 624e12 + 0.0625 / 19.5e12) = 208 TFLOP/s (A100 datasheet: int8 624, FP32 19.5),
    # so on the same layer split the old release's prompt is the faster one on this part: its
    # products alone run 312 / 208 = 1.5x as fast; the attention and the per-layer costs,
    # which both builds pay alike, dilute that, never below 1.2x.
    base = ["-m", "llama-3.1-70b", "-d", "a100-40gb-sxm", "--weights", "q4_k_m", "--prompt", "2048"]
    auto = _prefill_s(*base, "--engine", "llama.cpp-2024")
    given = _prefill_s(*base, "--engine", "llama.cpp-2024", "--tp", "1")
    assert auto == pytest.approx(given, rel=1e-9)
    current = _prefill_s(*base, "--engine", "llama.cpp", "--tp", "1")
    assert current > 1.2 * auto
    r = CliRunner().invoke(app, ["estimate", *base, "--engine", "llama.cpp-2024", "--tp", "2"])
    assert r.exit_code != 0 and "no tensor-parallel mode" in r.output


def test_a_serial_pool_prefills_at_its_release_rate_by_hand() -> None:
    # Llama 2 7B Q4_K_M on an RTX 4090, a llama.cpp-style pool (prompt processing stops
    # decode) prefilling one 2,048-token prompt, every single-prompt factor 1. Per block
    # 2,048 x 2 x 202.4e6 = 829.1 GFLOP of projections and MLP; the 2023-2024 builds run them
    # at 1 / 330.3e12 s per FLOP (FP16 cuBLAS, FP16 accumulate), current ones at
    # 1 / 660.6e12 + 0.0625 / 82.6e12 (MMQ; Ada whitepaper): 7.57e-16 s per FLOP more, so the
    # old release's block takes 829.1e9 x 7.57e-16 = 0.628 ms longer (compute-bound both ways:
    # 4 micro-batches x 114 MB at 1,008 GB/s is 0.45 ms, under the 1.9 ms of FLOPs), and the
    # old release first writes each micro-batch's weights out as FP16 (ggml_cuda_op_mul_mat_cublas,
    # to_fp16_cuda): 4 x 202.4e6 x (4.84 / 8 + 2) bytes = 2.109 GB at 1,008 GB/s = 2.092 ms.
    m = CAT.model("llama-2-7b")
    dev = device_table([CAT.accelerators["rtx-4090"]], {"rtx-4090": IDEAL})
    fmt = weight_format("q4_k_m")
    kw = {"batch": 1.0, "context": 4096, "prefill_tokens": 2048.0, "prompt": 2048.0}
    old, new = (
        float(serving_layer_seconds(m, fmt, 2.0, dev, serial=True, kernels=e, **kw)[0])  # type: ignore[arg-type]
        for e in ("llama.cpp-dequantizing", "llama.cpp")
    )
    rates = 829.1e9 * (1 / 330.3e12 - 1 / 660.6e12 - 0.0625 / 82.6e12)
    assert old - new == pytest.approx(rates + 4 * 202.4e6 * (4.84 / 8 + 2) / 1008e9, rel=1e-2)


def test_a_table_of_options_takes_one_engine_a_row() -> None:
    # The serving grid evaluates every option of a workload at once, each under its own engine:
    # row by row, the figures a table of that device alone gives under that engine.
    ids, engines = (
        ["rtx-4090", "l40s", "rtx-4090"],
        ["llama.cpp", "llama.cpp-dequantizing", "llama.cpp-dequantizing"],
    )
    m, fmt = CAT.model("llama-2-7b"), weight_format("q4_0")
    dev = device_table([CAT.accelerators[i] for i in ids])
    rows = prefill_layer_seconds(m, fmt, dev, batch=1, prompt=1024, kernels=engines)
    for i, (d, e) in enumerate(zip(ids, engines, strict=True)):
        one = prefill_layer_seconds(
            m, fmt, device_table([CAT.accelerators[d]]), batch=1, prompt=1024, kernels=e
        )
        assert float(rows[i]) == pytest.approx(float(one[0]), rel=1e-12)
    assert float(rows[2]) > float(rows[0])  # FP16 cuBLAS is slower than MMQ on a GeForce part


def test_a_replica_under_the_old_release_prefills_at_its_rate() -> None:
    # The verifier and a plan recompute a replica through inference_replica with the engine's
    # times (support.engine_times), its kernel family among them: the same fixed times on a
    # current build's kernels give a faster first token on an RTX 4090 (MMQ at 440 TFLOP/s
    # against FP16 cuBLAS at 330, test above).
    m = CAT.model("llama-2-7b")
    spec = [StageSpec(CAT.accelerators["rtx-4090"], 1, m.num_layers)]
    link = CAT.links["eth-100g"]  # one stage: no hop crosses it
    old = engine_times(CAT, "llama.cpp-2024")
    assert old["kernels"] == "llama.cpp-dequantizing"
    same_times_current = {**old, "kernels": "llama.cpp"}
    kw = {"batch": 4, "context": 4096, "prompt": 2048, "output": 256, "stages": spec, "link": link}
    a = inference_replica(m, "q4_k_m", "fp16", **kw, **old)  # type: ignore[arg-type]
    b = inference_replica(m, "q4_k_m", "fp16", **kw, **same_times_current)  # type: ignore[arg-type]
    assert a.ttft_s > b.ttft_s * 1.1


PROBLEM = """
name: gguf-release
description: Llama 3.1 8B Q4_K_M on RTX 4090s under one llama.cpp release, long prompts.
workloads:
  - name: chat
    model: llama-3.1-8b
    weights: q4_k_m
    kv: fp16
    context_tokens: 8192
    prompt_tokens: 4000
    output_tokens: 300
    concurrency: 8
    min_tokens_per_s: 300
    engine: {engine}
constraints:
  allowed_devices: [rtx-4090]
horizon:
  lifetime_years: 3
  utilization: 0.6
objective:
  goal: min_cost
"""


def test_a_plan_under_the_old_release_prefills_at_its_rate(tmp_path: Path) -> None:
    # A llama.cpp pool stops decoding to process each prompt; 4,000-token prompts make the
    # prefill most of its work. The 2023-2024 builds run it on FP16 cuBLAS at 330 TFLOP/s on an
    # RTX 4090 against a current build's MMQ at 440 (tests above), so the same demand costs at
    # least as much under them, and the verifier, recomputing with the plan's engine, agrees.
    cost = {}
    for engine in ("llama.cpp", "llama.cpp-2024"):
        problem, plan = tmp_path / f"{engine}.yaml", tmp_path / f"{engine}.json"
        problem.write_text(PROBLEM.format(engine=engine))
        r = CliRunner().invoke(app, ["solve", str(problem), "--out", str(plan)])
        assert r.exit_code == 0, r.output
        cost[engine] = float(json.loads(plan.read_text())["objective"])
        r = CliRunner().invoke(app, ["verify", str(plan)])
        assert r.exit_code == 0, r.output
    assert cost["llama.cpp-2024"] > cost["llama.cpp"]


def _overlay(tmp_path: Path, kernels: str) -> Path:
    """A user catalog whose `llama.cpp-2024` entry names `kernels` (every other field as
    shipped)."""
    import yaml

    doc = yaml.safe_load((Path(__file__).parents[1] / "catalog" / "support.yaml").read_text())
    entry = next(e for e in doc["engines"] if e["id"] == "llama.cpp-2024")
    entry["kernels"] = kernels
    d = tmp_path / "cat"
    d.mkdir()
    body = {"references": doc["references"], "engines": [entry], "support": []}
    (d / "support.yaml").write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return d


def test_the_kernel_family_is_read_from_the_catalog(tmp_path: Path) -> None:
    # The same engine id, its entry saying `llama.cpp` instead of `llama.cpp-dequantizing`:
    # Llama 2 7B Q4_K_M on an RTX 4090 then prefills at MMQ's rate, 1 / (1 / 660.6e12 +
    # 0.0625 / 82.6e12) = 440 TFLOP/s, not FP16 cuBLAS's 330 (Ada whitepaper figures), so
    # the estimate's first token is faster: the estimator reads the field, no list of names.
    base = ["-m", "llama-2-7b", "-d", "rtx-4090", "--weights", "q4_k_m", "--prompt", "2048"]
    shipped = _prefill_s(*base, "--engine", "llama.cpp-2024")
    _overlay(tmp_path, "llama.cpp")
    args = ["--catalog", str(tmp_path / "cat"), "estimate", "--format", "json", *base]
    r = CliRunner().invoke(app, [*args, "--engine", "llama.cpp-2024"])
    assert r.exit_code == 0, r.output
    assert float(json.loads(r.output)["prefill_s"]) < 0.9 * shipped
    use_overlays([])


def test_an_unknown_kernel_family_is_refused_where_it_is_written(tmp_path: Path) -> None:
    d = _overlay(tmp_path, "llamacpp")
    r = CliRunner().invoke(app, ["--catalog", str(d), "catalog", "list", "engines"])
    assert r.exit_code == 2, r.output
    # The file and line, the entry's place and field, and the values it may take.
    assert "support.yaml:" in r.output and "engines[0].kernels" in r.output
    assert "llama.cpp, llama.cpp-dequantizing, serving-grid" in r.output
    use_overlays([])


def test_an_engine_without_a_kernel_family_is_told_the_values(tmp_path: Path) -> None:
    # A user catalog's engine written before `kernels` existed: the error names the file, the
    # entry and the line to add with the values it may take, not only "missing required key".
    d = tmp_path / "cat"
    d.mkdir()
    entry = "{id: my-engine, name: Mine, rank: 20, tensor_parallel: true, "
    entry += "pipeline_parallel: true, sources: {spec: vllm-gpu-install}}"
    (d / "support.yaml").write_text(f"engines:\n  - {entry}\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["--catalog", str(d), "catalog", "list", "engines"])
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert "support.yaml:2:" in flat and "engines[0].kernels" in flat
    assert "add `kernels: ...` with one of: llama.cpp, llama.cpp-dequantizing, serving-grid" in flat
    use_overlays([])
