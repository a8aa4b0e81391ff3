"""The serving model's latency under load against a replay of the same engine.

For a fixed set of engine cases (models, devices, batch sizes and request shapes spanning short
and long prompts, slot-bound small batches, compute-bound large ones, and KV-bound engines whose
cache holds fewer sequences than their batch) at 30, 60 and 90 % of each engine's maximum planned
rate (max_utilization, 90 %, of its full-batch capacity: the planner never loads an engine
further), this sets the analytic p95 time to first token and end-to-end latency
(planner.estimator.serving.open_latency) beside an iteration-level replay of Poisson arrivals
(planner.simulate.simulate_engine: 20 replays of 10,000 requests each, seeds 7 to 26, the
first 1,000 of each not counted, pooled). Why 20: near saturation one replay's p95 moves by +-15 %
or more from seed to seed (at 90 % load on the L40S batch-16 case, 2.95 to 5.41 s over seeds 1 to
20), so three replays would leave the replay itself about as uncertain as the 15 % it is held to;
pooled over 20 its standard error is about 3 %. About 3 minutes.

Run: python benchmarks/serving/model_vs_replay.py [--markdown]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from planner.catalog import load_catalog
from planner.estimator.efficiency import load_serving
from planner.estimator.formats import kv_bytes
from planner.estimator.memory import kv_bytes_per_token
from planner.estimator.replica import IterationTime, StageSpec
from planner.estimator.serving import (
    chunk_mix,
    decode_latency,
    kv_transfer_s,
    open_latency,
    prefill_latency,
    prefill_pool_budget,
    token_budget,
)
from planner.simulate import simulate_disaggregated, simulate_engine
from planner.simulate.engine import EngineResult

# (model, device, tensor parallel, batch, prompt tokens, output tokens, sequences the KV cache
# holds: None = the whole batch)
CASES: list[tuple[str, str, int, int, int, int, int | None]] = [
    ("llama-3.1-8b", "h100-sxm", 1, 128, 1000, 200, None),
    ("llama-3.1-8b", "h100-sxm", 1, 32, 24576, 800, None),
    ("llama-3.1-8b", "l40s", 1, 16, 2000, 300, None),
    ("llama-3.1-8b", "l4", 1, 8, 500, 200, None),
    ("llama-3.1-70b", "h100-sxm", 4, 64, 1500, 256, None),
    ("llama-3.1-70b", "mi300x", 2, 64, 1000, 200, None),
    ("qwen2.5-72b", "h200-sxm", 2, 32, 4000, 500, None),
    ("llama-3.1-8b", "l40s", 1, 64, 3000, 400, 24),  # KV-bound
    ("llama-3.1-70b", "h100-sxm", 2, 128, 2000, 300, 40),  # KV-bound
]
# Disaggregated pairs: (model, prefill device, its tensor parallel, decode device, its tensor
# parallel, decode batch, prompt, output, link carrying the KV cache)
DISAGGREGATED: list[tuple[str, str, int, str, int, int, int, int, str]] = [
    ("llama-3.1-70b", "h100-sxm", 4, "h100-sxm", 4, 128, 3000, 300, "ib-ndr"),
    ("llama-3.1-8b", "h100-sxm", 1, "l40s", 1, 64, 2000, 250, "eth-100g"),
    ("qwen2.5-72b", "mi300x", 2, "h200-sxm", 2, 64, 8000, 500, "ib-ndr"),
    ("llama-3.1-70b", "mi300x", 1, "mi300x", 2, 128, 1000, 200, "infinity-fabric-mi300"),
]
LOADS = (0.3, 0.6, 0.9)
REQUESTS, WARMUP, FIRST_SEED, REPLAYS = 10_000, 1_000, 7, 20


@dataclass(frozen=True)
class Row:
    case: str
    load: float
    sim_ttft: float
    model_ttft: float
    sim_e2e: float
    model_e2e: float

    @property
    def ttft_error(self) -> float:
        return self.model_ttft / self.sim_ttft - 1

    @property
    def e2e_error(self) -> float:
        return self.model_e2e / self.sim_e2e - 1


def engine(
    model: str,
    device: str,
    tp: int,
    batch: int,
    prompt: int,
    output: int,
    budget: float | None = None,
) -> IterationTime:
    cat = load_catalog()
    m = cat.model(model)
    return IterationTime(
        m,
        "fp16",
        "fp16",
        batch=batch,
        context=prompt + output,
        prompt=prompt,
        output=output,
        stages=[StageSpec(cat.accelerator(device), tp, m.num_layers)],
        link=cat.link("eth-100g"),
        budget=budget,
    )


def replay(
    rate: float,
    run: Callable[..., EngineResult],
    prompt: int,
    output: int,
) -> tuple[float, float]:
    """Pooled p95 first-token and end-to-end times of REPLAYS replays of Poisson arrivals at
    `rate` (see the module's docstring); `run`: the simulator with all but `requests` bound."""
    ttft: list[float] = []
    e2e: list[float] = []
    for seed in range(FIRST_SEED, FIRST_SEED + REPLAYS):
        rng = np.random.default_rng(seed)
        times = np.cumsum(rng.exponential(1 / rate, size=REQUESTS))
        res = run(requests=[(float(t), prompt, output) for t in times])
        ttft += res.ttft
        e2e += res.e2e
    return float(np.percentile(ttft, 95)), float(np.percentile(e2e, 95))


def capacity(it: IterationTime, batch: int, prompt: int, output: int, held: int) -> float:
    """Requests/s of the engine with `held` of its `batch` slots in use (Little's law at the
    mean iteration; the token budget is the batch's)."""
    c, f = chunk_mix(batch, prompt, output, held * prompt / output, decoding=held)
    return held / (output * ((1 - f) * it(held, 0) + f * it(held, c)))


def rows() -> list[Row]:
    util = load_serving_limits()
    out = []
    for model, device, tp, batch, prompt, output, kv_seqs in CASES:
        it = engine(model, device, tp, batch, prompt, output)
        held = batch if kv_seqs is None else kv_seqs
        kv = held * (prompt + output)
        cap = util * capacity(it, batch, prompt, output, held)
        for u in LOADS:
            rate = u * cap

            run = partial(
                simulate_engine,
                it,
                slots=batch,
                kv_tokens=kv,
                budget=token_budget(batch, prompt, output),
                warmup=WARMUP,
            )
            sim_ttft, sim_e2e = replay(rate, run, prompt, output)
            lat = open_latency(
                it, slots=batch, rate=rate, prompt=prompt, output=output, kv_tokens=kv
            )
            kv_note = "" if kv_seqs is None else f" KV {kv_seqs} seqs"
            out.append(
                Row(
                    f"{model} {device}x{tp} b{batch} {prompt}/{output}{kv_note}",
                    u,
                    sim_ttft,
                    lat.ttft_s[95],
                    sim_e2e,
                    lat.e2e_s[95],
                )
            )
    return out


def load_serving_limits() -> float:
    """The planner's default max_utilization (the problem schema's default)."""
    from planner.schema.problem import InferenceWorkload

    return float(InferenceWorkload.model_fields["max_utilization"].default)


def disaggregated_rows() -> list[Row]:
    """Prefill engine -> KV transfer -> decode engine, at 30-90 % of the pair's planned maximum
    rate (max_utilization of the slower pool's capacity)."""
    util = load_serving_limits()
    cat = load_catalog()
    out = []
    for model, pdev, ptp, ddev, dtp, batch, prompt, output, link_id in DISAGGREGATED:
        budget = prefill_pool_budget(prompt)
        it_p = engine(model, pdev, ptp, batch, prompt, output, budget=budget)
        it_d = engine(model, ddev, dtp, batch, prompt, output)
        link = cat.link(link_id)
        kv = kv_bytes_per_token(cat.model(model), kv_bytes("fp16")) * prompt
        transfer = kv_transfer_s(kv, link.bandwidth_gb_s * 1e9 * ptp, link.latency_us * 1e-6)
        cap_p = budget / (prompt * it_p(0, budget))
        cap_d = batch / (output * it_d(batch, 0))
        cap = util * min(cap_p, cap_d)
        for u in LOADS:
            rate = u * cap

            run = partial(
                simulate_disaggregated,
                it_p,
                it_d,
                slots=batch,
                kv_tokens=batch * (prompt + output),
                prefill_budget=budget,
                transfer_s=transfer,
                warmup=WARMUP,
            )
            sim_ttft, sim_e2e = replay(rate, run, prompt, output)
            pre = prefill_latency(it_p, rate=rate, prompt=prompt, transfer_s=transfer)
            dec = decode_latency(it_d, slots=batch, rate=rate, prompt=prompt, output=output)
            out.append(
                Row(
                    f"{model} {pdev}x{ptp} -> {ddev}x{dtp} b{batch} {prompt}/{output} "
                    f"disaggregated",
                    u,
                    sim_ttft,
                    pre.ttft_s[95],
                    sim_e2e,
                    pre.ttft_s[95] + dec.e2e_s[95],
                )
            )
    return out


def report(table: list[Row]) -> str:
    lines = [
        "| case | load | p95 TTFT replay s | p95 TTFT model s | error | p95 e2e replay s | "
        "p95 e2e model s | error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        lines.append(
            f"| {r.case} | {r.load:.0%} | {r.sim_ttft:.3f} | {r.model_ttft:.3f} | "
            f"{r.ttft_error:+.1%} | {r.sim_e2e:.2f} | {r.model_e2e:.2f} | {r.e2e_error:+.1%} |"
        )
    te = sorted(abs(r.ttft_error) for r in table)
    ee = sorted(abs(r.e2e_error) for r in table)
    margin = load_serving().latency_margin
    # The margin covers a case where the model's figure raised by it reaches the replay's.
    covered = sum(
        (1 + margin) * (1 + r.ttft_error) >= 1 and (1 + margin) * (1 + r.e2e_error) >= 1
        for r in table
    )
    lines.append("")
    lines.append(
        f"{len(table)} cases. p95 TTFT: median |error| {te[len(te) // 2]:.1%}, worst "
        f"{te[-1]:.1%}, within 15 %: {sum(e <= 0.15 for e in te)}. p95 end to end: median "
        f"{ee[len(ee) // 2]:.1%}, worst {ee[-1]:.1%}, within 15 %: {sum(e <= 0.15 for e in ee)}. "
        f"Below the replay by no more than the ceilings' margin (latency_margin {margin:g}, "
        f"both figures): {covered} of {len(table)}."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(rows() + disaggregated_rows()))
    sys.exit(0)
