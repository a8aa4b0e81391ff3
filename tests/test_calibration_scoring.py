"""Honest scoring of the calibration: held-out rows never inform their own prediction, every row
left out has a reason, and no category shrinks."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "calibration_fit", ROOT / "calibration" / "fit.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["calibration_fit"] = module
    spec.loader.exec_module(module)
    return module


# Rows per category when leave-one-source-out scoring was introduced (calibration/report.md of
# that commit): decode batch 1, prefill, training, llama.cpp layer split, batch > 1.
FLOOR = {"decode_b1": 67, "prefill": 25, "training": 40, "split": 5, "batched": 15}


def test_every_row_is_scored_or_left_out_with_a_reason(fit: ModuleType) -> None:
    rows, skipped = fit.load_rows()
    table = fit.load_measurements(fit.TABLE)
    reasons = [why for _, why in skipped] + [fit.unscorable(r) for r in rows if fit.unscorable(r)]
    scored = [r for r in rows if not fit.unscorable(r)]
    assert len(scored) + len(reasons) == len(table.measurements)
    assert all(isinstance(why, str) and len(why) > 20 for why in reasons)
    for key, floor in FLOOR.items():
        sel = next(s for _, k, s in fit.GROUPS if k == key)
        assert sum(sel(r) for r in scored) >= floor, key


def test_a_row_source_never_enters_its_own_fit(
    fit: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, _ = fit.load_rows()
    sources = ("geerling-ai-benchmarks", "llamacpp-apple-scoreboard", "llama3-herd-paper")
    rows = [r for r in rows if not fit.unscorable(r) and r.meas.source in sources]
    fits: list[set[str]] = []
    predicted: list[tuple[str, int]] = []
    real_fit, real_predict = fit.fit_all, fit.predict

    def spy_fit(train: Sequence[Any]) -> Any:
        fits.append({r.meas.source for r in train})
        return real_fit(train)

    def spy_predict(r: Any, params: Any) -> float:
        predicted.append((r.meas.source, len(fits) - 1))
        return float(real_predict(r, params))

    monkeypatch.setattr(fit, "fit_all", spy_fit)
    monkeypatch.setattr(fit, "predict", spy_predict)
    held = fit.leave_one_source_out(rows)
    assert set(held) == set(rows)
    assert len(fits) == len(sources)
    for source, which in predicted:
        assert source not in fits[which]
        assert fits[which] == set(sources) - {source}


def test_rows_added_after_the_shipped_fit_are_scored_by_the_shipped_factors(
    fit: ModuleType,
) -> None:
    assert fit.fitted_keys() is not None
    rows, _ = fit.load_rows()
    scored = [r for r in rows if not fit.unscorable(r)]
    # A fit of every scored row but the M2 Ultra's, as if those had been measured after it:
    # the report scores them, each by name, before any refit.
    later = {fit.row_key(r.meas) for r in scored if r.device.id == "m2-ultra"}
    assert later
    shipped = {fit.row_key(r.meas) for r in scored} - later
    new = [r for r in scored if fit.row_key(r.meas) not in shipped]
    text = "\n".join(fit._new_rows_section(scored, shipped))
    assert f"{len(new)} scored rows are not among the {len(shipped)} rows" in text
    for r in new:
        assert f"| {r.meas.model} | {r.device.id} |" in text
    # With every scored row in the fit the section says so (no empty table).
    every = {fit.row_key(r.meas) for r in scored}
    text = "\n".join(fit._new_rows_section(scored, every))
    assert f"None: every scored row is among the {len(every)} rows" in text
    assert "| model |" not in text


def test_a_training_only_write_keeps_every_other_shipped_factor(
    fit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fit.py --write --only training` rewrites the training MFU (per class and per
    generation) and the MoE routing factors, and leaves every other shipped factor, device
    entries included, as it was."""
    from planner.estimator.efficiency import load_efficiency

    target = tmp_path / "efficiency.yaml"
    target.write_text(fit.EFFICIENCY.read_text())
    monkeypatch.setattr(fit, "EFFICIENCY", target)
    before = load_efficiency(target)
    fitted = {
        c: {
            **fit.PRIORS[c],
            "bandwidth": 0.123,
            "training_mfu": 0.321,
            "moe_routed_ns": 0.321,
            "moe_fused_share": 0.5,
        }
        for c in fit.CLASSES
    }
    fitted["dgx-spark"] = {"bandwidth": 0.5, "training_mfu": 0.2}
    fitted["datacenter/hopper"] = {"training_mfu": 0.4}
    fitted["datacenter/volta"] = {"training_mfu": 0.3}
    try:
        fit.write_efficiency(fitted, "test", ["datacenter/hopper"], "training")
        after = load_efficiency(target)
    finally:
        load_efficiency.cache_clear()
    for c in fit.CLASSES:
        refit = fit.ONLY_GROUPS["training"]
        kept = {k: v for k, v in before.classes[c].model_dump().items() if k not in refit}
        assert {k: v for k, v in after.classes[c].model_dump().items() if k in kept} == kept
        assert after.classes[c].training_mfu == 0.321
        assert (after.classes[c].moe_routed_ns, after.classes[c].moe_fused_share) == (0.321, 0.5)
    assert after.devices["dgx-spark"] == {**before.devices["dgx-spark"], "training_mfu": 0.2}
    assert after.architectures == {
        "datacenter/hopper": {"training_mfu": 0.4},
        "datacenter/volta": {"training_mfu": 0.3},
    }
    assert "# training_mfu: no rows, datacenter/hopper's" in target.read_text()


def test_an_end_to_end_row_is_predicted_with_its_prefill(fit: ModuleType) -> None:
    """OCI's MI300X rows (vLLM benchmark_latency.py, 128 in / 128 out) divide the output tokens
    by the whole request's time, the prefill included: the prediction is the batch's prefill
    plus 128 output steps, slower than the output steps alone, and more so at a larger batch
    (a prefill of 256 x 128 prompt tokens against 8 x 128)."""
    rows, _ = fit.load_rows()
    params = fit.fit_all([r for r in rows if not fit.unscorable(r)])
    oci = {
        r.meas.batch: r
        for r in rows
        if r.meas.source == "oci-mi300x-llama31-405b" and r.meas.batch is not None
    }
    assert set(oci) == {1, 2, 4, 8, 16, 32, 64, 128, 256}  # the post's whole latency table
    share = {}
    for batch, r in oci.items():
        found = fit.END_TO_END.search(r.meas.notes)
        assert found and (found["prompt"], found["output"]) == ("128", "128")
        steps_only = fit.decode_tps(
            fit.Row(r.meas.model_copy(update={"notes": ""}), r.model, r.device, r.context), params
        )
        share[batch] = fit.decode_tps(r, params) / steps_only
    assert all(0 < s < 1 for s in share.values())
    assert share[256] < share[8] < share[1]


def test_a_serving_engine_row_is_charged_the_serving_figures(fit: ModuleType) -> None:
    """A row of an engine on the serving grid (TensorRT-LLM here) is predicted as the planner
    with an efficiency file of the fitted factors predicts it: its products at catalog
    serving.yaml's batched figures, whatever single-prompt `compute` factor the fit tries (that
    factor is llama.cpp's); a llama.cpp row's prefill moves with it."""
    rows, _ = fit.load_rows()
    trt = next(r for r in rows if r.meas.source == "trtllm-perf-v061" and r.meas.batch == 768)
    low = {"datacenter": {"compute": 0.05}}
    assert fit.decode_tps(trt, low) == pytest.approx(fit.decode_tps(trt, {}), rel=1e-12)
    pre = next(r for r in rows if fit.is_prefill(r) and r.cls == "datacenter")
    assert fit.prefill_tps(pre, low) < 0.5 * fit.prefill_tps(pre, {})


def test_fixed_batch_throughputs_include_their_prompts(fit: ModuleType) -> None:
    """TensorRT-LLM's v0.6.1 (and v0.5) throughput tables come from gptSessionBenchmark, which
    times each whole generate() call, the batch's context phase included, and prints
    batch x output / latency (benchmarks/cpp/gptSessionBenchmark.cpp): each row says so and is
    predicted with its prompts' prefill. Llama 2 70B FP8 on two H100s at batch 1,024, 128 in
    and 128 out: 2,657 output tokens/s per GPU published (docs/source/performance.md, v0.6.1),
    5,314 for the pair; the prompts' 131,072 tokens take about as long as the 128 steps."""
    rows, _ = fit.load_rows()
    trt = [r for r in rows if r.meas.source == "trtllm-perf-v061"]
    assert len(trt) == 8
    for r in trt:
        found = fit.END_TO_END.search(r.meas.notes)
        assert found and f"input {found['prompt']} / output {found['output']}" in r.meas.notes
    big = next(r for r in trt if r.meas.batch == 1024)
    assert big.meas.value == 2 * 2657
    with_prompts = fit.decode_tps(big, {})
    steps_only = fit.decode_tps(
        fit.Row(big.meas.model_copy(update={"notes": ""}), big.model, big.device, big.context), {}
    )
    assert abs(with_prompts / big.meas.value - 1) < 0.15
    assert 1.7 < steps_only / with_prompts < 2.3


def test_prefill_rows_are_llama_cpps(fit: ModuleType) -> None:
    """The single-prompt compute factor is fitted on llama.cpp's kernels
    (planner.estimator.prefill_path): every scored prefill row is of a llama.cpp engine, and a
    prefill row of another engine is left out with its reason rather than fitted on them."""
    rows, _ = fit.load_rows()
    prefill = [r for r in rows if fit.is_prefill(r) and not fit.unscorable(r)]
    assert prefill and all(r.meas.engine in ("llama.cpp", "llama.cpp-2024") for r in prefill)
    r = prefill[0]
    vllm = fit.Row(r.meas.model_copy(update={"engine": "vllm"}), r.model, r.device, r.context)
    assert "llama.cpp's kernels" in (fit.unscorable(vllm) or "")


def test_a_main_run_reads_no_more_cache_than_its_context_window(fit: ModuleType) -> None:
    """The LLaMA 2 `main` runs of xd-gpu-bench-llama2 ran with main's default n_ctx of 512 (no -c
    on their command lines; the logs print "n_ctx = 512" and "prompt eval time = ... / 494
    tokens") and generated 1,024 tokens, so main's context swapping kept the cache between 257
    and 512 tokens. Hand: the 1,023 evaluations after the prompt's pass read 495..512 (18 of them,
    sum 9,063), then three cycles of 258..512 (255 each, 98,175 each) and 258..497 (240, sum
    90,600): 394,188 / 1,023 = 385.3 tokens on average, not the 494 + 512 = 1,006 of a cache that
    grows without bound."""
    assert fit.main_mean_context(494, 1024, 512) == pytest.approx(394_188 / 1_023)
    assert fit.main_mean_context(494, 1024, 4096) == pytest.approx(494 + 1 + 1022 / 2)
    rows, _ = fit.load_rows()
    main = [
        r
        for r in rows
        if r.meas.source == "xd-gpu-bench-llama2" and r.meas.metric == "decode_tokens_per_s"
    ]
    assert len(main) == 55 and all(r.context == pytest.approx(385.3, abs=0.05) for r in main)


# The README's LLaMA 2 eval table (GPU-Benchmarks-on-LLM-Inference, Dec 2023 snapshots), every row
# on more than one GPU: GPUs -> (7B_q4_0, 7B_f16, 70B_q4_0, 70B_f16), tokens/s, None for OOM.
XD_LLAMA2_MULTI_GPU = {
    ("rtx-4000-ada", 2): (60.68, 31.83, None, None),
    ("rtx-3090", 2): (53.25, 38.73, 14.28, None),
    ("rtx-4090", 2): (66.26, 49.2, 18.5, None),
    ("rtx-3090", 3): (46.14, 35.83, 13.64, None),
    ("rtx-4090", 3): (62.14, 50.39, 14.92, None),
    ("rtx-4000-ada", 4): (55.41, 40.52, 15.48, None),
    ("rtx-a6000", 2): (74.43, 47.08, 17.31, None),
    ("rtx-3090", 6): (27.71, 27.37, 10.15, 7.54),
    ("rtx-4090", 6): (38.19, 37.5, 15.59, 10.24),
}


def test_xd_llama2_multi_gpu_rows_are_the_whole_table(fit: ModuleType) -> None:
    """A source is used whole: each of the 28 multi-GPU figures of xd-gpu-bench-llama2's eval
    table is a row, read as a row split (the Dec 2023 build predates llama.cpp PR #4766), the
    GeForce cards without peer access, and none is left out of scoring."""
    rows, _ = fit.load_rows()
    got = {
        (r.meas.device, r.meas.devices, r.meas.model, r.meas.weights): r
        for r in rows
        if r.meas.source == "xd-gpu-bench-llama2" and r.meas.devices > 1
    }
    want = {
        (dev, n, model, w): v
        for (dev, n), vals in XD_LLAMA2_MULTI_GPU.items()
        for (model, w), v in zip(
            [
                ("llama-2-7b", "q4_0"),
                ("llama-2-7b", "fp16"),
                ("llama-2-70b", "q4_0"),
                ("llama-2-70b", "fp16"),
            ],
            vals,
            strict=True,
        )
        if v is not None
    }
    assert len(want) == 28 and set(got) == set(want)
    for key, r in got.items():
        assert r.meas.value == want[key] and fit.is_row_split(r) and fit.unscorable(r) is None
        peer = fit.NO_PEER_ACCESS.search(r.meas.notes or "") is None
        assert peer == (r.meas.device not in ("rtx-3090", "rtx-4090"))


def test_a_one_token_request_is_its_prompts_pass_alone(fit: ModuleType) -> None:
    """A fixed-batch latency row's prefill samples each sequence's first output token (vLLM's
    benchmark_serving.py: TPOT = (latency - TTFT) / (output_len - 1)), so output N costs the
    prompts' pass and N - 1 decode steps: with output 1 the throughput is batch / prefill time,
    and the steps of outputs 2 and 128 follow from it by hand."""
    rows, _ = fit.load_rows()
    oci = next(r for r in rows if r.meas.source == "oci-mi300x-llama31-405b" and r.meas.batch == 4)

    def with_output(n: int) -> float:
        notes = (oci.meas.notes or "").replace("output 128", f"output {n}", 1)
        meas = oci.meas.model_copy(update={"notes": notes})
        return fit.decode_tps(fit.Row(meas, oci.model, oci.device, oci.context), {})

    dev = fit.engine_table(oci, {})
    prefill = fit.engine_prefill_seconds(
        oci.model, fit.weight_format("fp8"), fit.kv_bytes("fp16"), dev, prompt=128, tp=8,
        kernels=fit.kernels_of(oci.meas.engine), prompts=4.0,
    )[0]  # fmt: skip
    assert 4 / with_output(1) == pytest.approx(prefill, rel=1e-12)
    step = 4 * 2 / with_output(2) - prefill
    assert 0 < step < prefill
    assert with_output(128) == pytest.approx(4 * 128 / (prefill + 127 * step), rel=1e-9)
    assert fit.decode_tps(oci, {}) == pytest.approx(with_output(128), rel=1e-12)


def test_a_first_prompt_evaluation_leaves_prefill_scoring_with_its_reason(fit: ModuleType) -> None:
    """llama.cpp's `main` of late 2023 timed its one prompt right after a 2-token warm-up
    (common/common.cpp, llama_init_from_gpt_params), llama-bench after a warm-up of up to 32
    tokens and over 5 repetitions (examples/llama-bench/llama-bench.cpp): the LLaMA 2 `main` rows
    of xd-gpu-bench-llama2 pay the first prompt-sized batch's one-time costs. Hand, FP16 Llama 2
    7B on the same RTX 3090: main 3,075.37 tokens/s over 494 tokens is 160.6 ms, llama-bench
    pp512 of PR #4766 4,185 tokens/s is 118.0 ms for 494 tokens, 42.6 ms more in main."""
    rows, _ = fit.load_rows()
    pre = [r for r in rows if fit.is_prefill(r)]
    first = [r for r in pre if fit.FIRST_EVALUATION.search(r.meas.notes or "")]
    assert {r.meas.source for r in first} == {"xd-gpu-bench-llama2"} and len(first) == 5
    assert all("first prompt evaluation" in (fit.unscorable(r) or "") for r in first)
    by = {(r.meas.source, r.device.id, r.meas.weights): r.meas.value for r in pre}
    main = by[("xd-gpu-bench-llama2", "rtx-3090", "fp16")]
    bench = by[("llamacpp-pr-4766", "rtx-3090", "fp16")]
    assert (494 / main - 494 / bench) * 1e3 == pytest.approx(42.6, abs=0.05)
    # a llama-bench row is no first evaluation, and stays scored
    bench_rows = [r for r in pre if r.meas.source == "llamacpp-pr-4766"]
    assert bench_rows and not any(fit.unscorable(r) for r in bench_rows)


@pytest.mark.parametrize(
    ("source", "device", "recompute"),
    [
        # torchtitan's Llama 3 8B: "selective op activation checkpointing", its per-op policy.
        ("torchtitan-performance", "a100-80gb-sxm", "op"),
        # llm-foundry's MPT-7B on A100 40GB: the table's "Activation Checkpointing" column is
        # True (HFU 67.89 % against MFU 50.92 %); on the 80 GB parts it is False.
        ("llm-foundry-benchmarks", "a100-40gb-sxm", "full"),
        ("llm-foundry-benchmarks", "a100-80gb-sxm", "none"),
    ],
)
def test_training_rows_are_read_with_the_recomputation_their_source_states(
    fit: ModuleType, source: str, device: str, recompute: str
) -> None:
    rows, _ = fit.load_rows()
    mine = [
        r
        for r in rows
        if fit.is_training(r)
        and r.meas.source == source
        and r.device.id == device
        and r.model.id in ("llama-3.1-8b", "mpt-7b")
    ]
    assert mine
    for r in mine:
        got = fit.training_setup(r)[1]
        assert got == recompute or (recompute == "none" and got == "selective"), r.meas.notes


def test_deepep_runs_route_through_the_fused_dispatcher(fit: ModuleType) -> None:
    """The MoE rows whose notes name DeepEP (NeMo AutoModel's, the Megatron-Core model zoo's)
    fit moe_fused_share; Megatron-Bridge's and DGX Cloud's, Megatron-Core's default `alltoall`
    dispatcher, fit moe_routed_ns."""
    rows, _ = fit.load_rows()
    moe = [r for r in rows if fit.is_training(r) and r.model.moe is not None]
    fused = {r.meas.source for r in moe if fit.dispatch_fused(r)}
    plain = {r.meas.source for r in moe if not fit.dispatch_fused(r)}
    assert fused == {"nemo-automodel-perf-20251002", "megatron-moe-modelzoo-qwen3"}
    assert plain == {"megatron-bridge-perf-2511", "dgxc-benchmarking-25.05.04"}


def test_a_weak_scaling_series_counts_once_in_the_training_fits(fit: ModuleType) -> None:
    # DGX Cloud Benchmarking 25.05.04, deepseek_v3/pretraining/README.md: DeepSeek-V3 BF16 on
    # GB200 at 128 GPUs (TP2 PP4 EP32, GBS 1024), 256 (EP64, GBS 2048) and 512 (EP64, GBS 4096);
    # 959.0, 958.3 and 956.1 tokens/s per GPU. The 256 and 512 runs differ only in data parallel
    # replicas (64 sequences per replica each): one series, half a row each. The 128-GPU run has
    # another expert-parallel size, a run of its own.
    rows, _ = fit.load_rows()
    gb200 = sorted(
        (
            r
            for r in rows
            if r.meas.source == "dgxc-benchmarking-25.05.04" and r.device.id == "gb200"
        ),
        key=lambda r: r.meas.devices,
    )
    assert [r.meas.devices for r in gb200] == [128, 256, 512]  # the source's table, whole
    assert [r.meas.value for r in gb200] == [959.0, 958.3, 956.1]
    assert fit.weak_scaling_weights(gb200) == [1.0, 0.5, 0.5]
    # A run whose global batch is not stated is in no series: torchtune's single-GPU rows of one
    # model and part (LoRA and full fine-tuning) each weigh a whole row.
    tune = [
        r
        for r in rows
        if r.meas.source == "torchtune-readme-llama31" and r.meas.metric.startswith("train")
    ]
    assert len(tune) >= 2
    assert fit.weak_scaling_weights(tune) == [1.0] * len(tune)


def test_a_weighted_fit_reads_a_half_row_as_half(fit: ModuleType) -> None:
    # fit_nonnegative minimizes the weighted sum of |log(predicted / measured)|: with rows that
    # want 1 and 3 (the factor is the predicted value itself), weights 1 and 0.5 put the optimum
    # at 1 (the L1 optimum sits at the heavier row), weights 0.5 and 1 at 3.
    rows = [_Stub(1.0), _Stub(3.0)]
    params: dict[str, dict[str, float]] = {"c": {"f": 1.0}}

    def value(r: Any, ps: dict[str, dict[str, float]]) -> float:
        return ps["c"]["f"]

    got = fit.fit_nonnegative(rows, params, "c", "f", value, [1.0, 0.5], lower=0.5, upper=4.0)
    assert got == pytest.approx(1.0, abs=0.02)
    got = fit.fit_nonnegative(rows, params, "c", "f", value, [0.5, 1.0], lower=0.5, upper=4.0)
    assert got == pytest.approx(3.0, abs=0.05)


class _Stub:
    """A row as fit_nonnegative reads it: its measured value."""

    def __init__(self, value: float) -> None:
        self.meas = type("M", (), {"value": value})()
