"""The planner's serving figures beside published serving results, scored leave-one-source-out.

Rows come from benchmarks/serving/published.yaml (each with its source and quote). The metric of
each row type was chosen before any fitting:

- prefill (batch 1, no decodes): time to first token = one iteration carrying the whole prompt.
- offline (saturated throughput at a stated input/output length): output tokens/s of the
  planner's best single-stage design of the row's tensor-parallel degree that fits memory,
  times the row's replicas (devices / tensor parallel).
- server at a fixed concurrency: output tokens/s of that many sequences (closed load).
- decode at concurrency 1: time per output token.
- sizing (a published configurator's aggregated plan): output tokens/s per GPU of the stated
  replica (tensor parallel, batch) at that request shape.

The two fitted factors are the batched serving compute efficiencies of datacenter devices on
16-bit and on 8/4-bit tensor paths (catalog serving.yaml). For each source, they are fitted on
the other sources' rows (the pair minimizing their median |log(planner / measured)|, on a grid of
0.20-0.90 in steps of 0.02 each), then that source's rows are scored with them. Rows the planner cannot express are listed with the
reason. KV-cache format: FP8 where the weights are FP8 (TensorRT-LLM's FP8 recipes), else FP16
(an assumption; the sources do not state it).

Run: python benchmarks/serving/run.py   (about a minute; prints a Markdown table)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import planner.estimator.devices as devices_module
import planner.estimator.replica as replica_module
from planner.catalog import load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.replica import IterationTime, StageSpec
from planner.estimator.serving import chunk_mix
from planner.hf_config import load_hf_config
from planner.schema.catalog import ModelArch
from planner.schema.problem import InferenceWorkload, Problem

HERE = Path(__file__).resolve().parent
MODELS = {
    "llama-2-70b": "llama-2-70b",
    "llama-2-7b": "llama-2-7b",
    "llama_70b (as published)": "llama-2-70b",
    "Llama-3.3-70B-Instruct": "llama-3.1-70b",  # the same architecture as Llama 3.1 70B
    "Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "Qwen3-32B": "qwen3-32b",  # config.json in benchmarks/serving/models
}
DEVICES = {
    "H100-SXM-80GB (DGX H100)": "h100-sxm",
    "H100 (H100-HBM3-80GB)": "h100-sxm",
    "H100 80G": "h100-sxm",
    "H200-SXM-141GB (DGX H200)": "h200-sxm",
    "H200": "h200-sxm",
    "h200_sxm": "h200-sxm",
    "B200-180GB (DGX B200)": "b200",
    "A100": "a100-80gb-sxm",
    "L40S": "l40s",
}
WEIGHTS = {"fp8": "fp8", "fp16": "fp16", "fp4": "nvfp4"}  # TensorRT-LLM's FP4 on B200 is NVFP4
GRID = np.round(np.arange(0.20, 0.901, 0.02), 2)


@dataclass
class Row:
    id: str
    kind: str
    source: str
    measured: float
    metric: str
    predict: Callable[[], float] | None
    why_not: str = ""


def _model(name: str) -> ModelArch | None:
    mid = MODELS.get(name)
    if mid is None:
        return None
    if mid == "qwen3-32b":
        return load_hf_config(HERE / "models" / "qwen3-32b" / "config.json")
    return load_catalog().model(mid)


def _problem(m: ModelArch, dev: str, tp: int, weights: str, prompt: int, output: int) -> Problem:
    return Problem.model_validate(
        {
            "name": "published-row",
            "workloads": [
                {
                    "name": "w",
                    "model": m.id,
                    "weights": weights,
                    "kv": "fp8" if weights == "fp8" else "fp16",
                    "context_tokens": prompt + output,
                    "prompt_tokens": prompt,
                    "output_tokens": output,
                    "concurrency": "unbounded",
                }
            ],
            "constraints": {"allowed_devices": [dev], "max_stages": 1, "max_tensor_parallel": tp},
        }
    )


def _iteration(
    m: ModelArch, dev: str, tp: int, weights: str, batch: int, prompt: int, output: int
) -> IterationTime:
    cat = load_catalog()
    return IterationTime(
        m,
        weights,
        "fp8" if weights == "fp8" else "fp16",
        batch=batch,
        context=prompt + output,
        prompt=prompt,
        output=output,
        stages=[StageSpec(cat.accelerator(dev), tp, m.num_layers)],
        link=cat.link("eth-100g"),
    )


def _mean_iteration(it: IterationTime, batch: int, prompt: int, output: int) -> float:
    c, f = chunk_mix(batch, prompt, output, batch * prompt / output)
    return (1 - f) * it(batch, 0) + f * it(batch, c)


def _row(r: dict[str, Any]) -> Row:
    src = r["source"]["title"]
    kind, meas = r["kind"], r["measured"]
    m = _model(r.get("model", ""))
    dev = DEVICES.get(str(r.get("device")))
    weights = WEIGHTS.get(str(r.get("weights")))
    tp = r.get("tensor_parallel")
    prompt, output = r.get("prompt_tokens"), r.get("output_tokens")
    base = Row(r["id"], kind, src, math.nan, "", None)
    if m is None or dev is None or weights is None or not (tp and prompt and output):
        base.why_not = (
            "model, device, weight format, tensor parallelism or request shape not in the "
            "catalog or not stated"
        )
        return base
    if kind == "prefill" and "ttft_s" in meas and prompt:
        it_args = (m, dev, int(tp), str(weights), 1, int(prompt), 1)
        return Row(
            r["id"], kind, src, meas["ttft_s"], "TTFT s",
            lambda: _iteration(*it_args)(0, it_args[5]),
        )  # fmt: skip
    if kind == "offline" and prompt and output and tp:
        total = meas.get("tokens_per_s")
        if total is None and "tokens_per_s_per_gpu" in meas:
            total = meas["tokens_per_s_per_gpu"] * r["devices"]
        replicas = r["devices"] // int(tp)
        prob = _problem(m, dev, int(tp), str(weights), int(prompt), int(output))

        def offline() -> float:
            cat = load_catalog()  # offline rows name catalog models only
            w = prob.workloads[0]
            assert isinstance(w, InferenceWorkload)
            ds = inference_designs(w, prob, cat, allowed_devices(prob, cat), prune=False)
            best = max((d.tokens_per_s for d in ds if d.stages[0].tp == int(tp)), default=0.0)
            return best * replicas

        return Row(r["id"], kind, src, float(total), "output tokens/s", offline)
    if kind == "server" and "max_concurrency" in meas and "tokens_per_s" in meas:
        n = int(meas["max_concurrency"])
        args = (m, dev, int(tp), str(weights), n, int(prompt), int(output))
        return Row(
            r["id"], kind, src, meas["tokens_per_s"], "output tokens/s",
            lambda: n / _mean_iteration(_iteration(*args), n, args[5], args[6]),
        )  # fmt: skip
    if kind == "decode" and "tpot_s" in meas:
        args = (m, dev, int(tp), str(weights), 1, int(prompt), int(output))
        return Row(r["id"], kind, src, meas["tpot_s"], "TPOT s", lambda: _iteration(*args)(1, 0))
    if kind == "sizing" and "tokens_per_s_per_gpu" in meas:
        n = int(meas["batch_size_per_replica"])
        args = (m, dev, int(tp), str(weights), n, int(prompt), int(output))
        return Row(
            r["id"], kind, src, meas["tokens_per_s_per_gpu"], "output tokens/s per GPU",
            lambda: n / _mean_iteration(_iteration(*args), n, args[5], args[6]) / args[2],
        )  # fmt: skip
    base.why_not = {
        "disaggregated": "disaggregated prefill/decode pools are not yet a design option",
        "server": "input length or concurrency not stated",
        "offline": "input length not stated",
    }.get(kind, "no metric for this row type")
    return base


PAIRS = [(hi, lo) for hi in GRID.tolist() for lo in GRID.tolist()]


def predictions(rows: list[Row]) -> dict[str, list[float]]:
    """Each expressible row's planner figure at every (16-bit, 8/4-bit) efficiency pair."""
    out: dict[str, list[float]] = {r.id: [] for r in rows if r.predict}
    real = devices_module.batched_compute_for

    def trial(hi: float, lo: float) -> Callable[..., float]:
        def fn(cls: str, fallback: float, *, low_precision: bool = False) -> float:
            if cls != "datacenter":
                return real(cls, fallback, low_precision=low_precision)  # type: ignore[arg-type]
            return lo if low_precision else hi

        return fn

    try:
        for hi, lo in PAIRS:
            devices_module.batched_compute_for = trial(hi, lo)
            replica_module._TABLES.clear()
            for r in rows:
                if r.predict:
                    out[r.id].append(float(r.predict()))
    finally:
        devices_module.batched_compute_for = real
        replica_module._TABLES.clear()
    return out


def score(rows: list[Row], pred: dict[str, list[float]]) -> list[tuple[Row, int, float]]:
    """(row, index of the efficiency pair fitted without its source, deviation) for every
    expressible row."""
    out = []
    usable = [r for r in rows if r.predict]
    for src in sorted({r.source for r in usable}):
        train = [r for r in usable if r.source != src]

        def loss(i: int, train: list[Row] = train) -> tuple[float, float]:
            # A factor no training row depends on (16-bit, when the left-out source holds
            # every 16-bit row) is not fitted: ties go to the pair closest to equal.
            err = statistics.median(abs(math.log(pred[r.id][i] / r.measured)) for r in train)
            return round(err, 12), abs(PAIRS[i][0] - PAIRS[i][1])

        best = min(range(len(PAIRS)), key=loss)
        for r in usable:
            if r.source == src:
                out.append((r, best, pred[r.id][best] / r.measured - 1))
    return out


def fit_all(rows: list[Row], pred: dict[str, list[float]]) -> tuple[float, float]:
    """The pair fitted on every row (what catalog serving.yaml ships)."""
    usable = [r for r in rows if r.predict]
    best = min(
        range(len(PAIRS)),
        key=lambda i: statistics.median(abs(math.log(pred[r.id][i] / r.measured)) for r in usable),
    )
    return PAIRS[best]


def main() -> None:
    data = yaml.safe_load((HERE / "published.yaml").read_text(encoding="utf-8"))
    rows = [_row(r) for r in data["rows"]]
    pred = predictions(rows)
    scored = score(rows, pred)
    print(
        "| row | metric | measured | planner | deviation | 16-bit / 8-bit efficiency "
        "(fit without the row's source) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for r, i, err in scored:
        hi, lo = PAIRS[i]
        print(
            f"| {r.id} | {r.metric} | {r.measured:,.4g} | {pred[r.id][i]:,.4g} | {err:+.1%} | "
            f"{hi:.2f} / {lo:.2f} |"
        )
    errs = sorted(abs(e) for *_, e in scored)
    print()
    print(
        f"{len(scored)} rows from {len({r.source for r, *_ in scored})} sources, scored "
        f"leave-one-source-out: median |deviation| {errs[len(errs) // 2]:.1%}, worst "
        f"{errs[-1]:.1%}."
    )
    hi, lo = fit_all(rows, pred)
    print(
        f"Fitted on every row (shipped in catalog serving.yaml): 16-bit {hi:.2f}, 8/4-bit {lo:.2f}."
    )
    print()
    print("Not expressible:")
    for r in rows:
        if not r.predict:
            print(f"- {r.id}: {r.why_not}")


if __name__ == "__main__":
    main()
