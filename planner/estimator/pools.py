"""Disaggregated serving pools (planner.estimator.serving, DistServe): the rate searches of a
prefill engine and of a decode engine, and a decode replica's own figures.

A `prefill` replica computes whole prompts in batches up to the prefill pool's token budget and
sends each prompt's KV cache to a decode replica over its ports; a `decode` replica decodes
prefilled sequences, whose iterations carry no prompt chunks. Each is held to its share of the
workload's latency ceilings (the prefill pool to the first-token budget, the decode pool to the
time per token and what the end-to-end ceiling leaves).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from planner.catalog import Catalog
from planner.estimator.designs import Design, Role
from planner.estimator.efficiency import load_serving
from planner.estimator.formats import kv_bytes
from planner.estimator.memory import handoff_bytes
from planner.estimator.replica import IterationTime, StageSpec, inference_replica
from planner.estimator.serving import (
    PERCENTILES,
    LoadedLatency,
    RateSearch,
    decode_latency,
    kv_transfer_s,
    prefill_latency,
    prefill_pool_budget,
    prefill_prompt,
)
from planner.estimator.support import engine_times
from planner.schema.catalog import Link
from planner.schema.problem import InferenceWorkload


def prefill_search(
    w: InferenceWorkload, it: IterationTime, stages: list[StageSpec], link: Link, P: float
) -> RateSearch:
    """Requests/s of one prefill engine (replica_rate): at most max_utilization of its prompt
    tokens/s and of its ports' bandwidth for the KV it sends, and the first-token budget met."""
    first = first_token_budget(w)
    k = 1.0 + load_serving().latency_margin
    pct = w.latency_percentile
    return prefill_engine_search(
        it,
        sum(st.tp for st in stages),
        len(stages),
        link,
        P,
        kv_bytes(w.kv),
        ceiling=lambda lat: first is None or lat.ttft_s[pct] * k <= first,
        utilization=w.max_utilization,
    )


def prefill_engine_search(
    it: IterationTime,
    devices: int,
    stages: int,
    link: Link,
    P: float,
    kv_bytes_per_value: float,
    *,
    ceiling: Callable[[LoadedLatency], bool],
    utilization: float,
) -> RateSearch:
    """The search (serving.RateSearch) for the requests/s of one prefill engine of `devices`
    over `stages` stages: it batches whole prompts of `P` tokens up to the prefill pool's token
    budget and sends each prompt's KV cache (and a hybrid model's recurrent state:
    memory.handoff_bytes) over one `link` port per device; at most `utilization` of its prompt
    tokens/s and of its ports' bandwidth, and `ceiling` met at that rate."""
    budget = prefill_pool_budget(P)
    ports = link.bandwidth_gb_s * 1e9 * devices
    kv = handoff_bytes(it.model, kv_bytes_per_value, P)
    transfer = kv_transfer_s(kv, ports, link.latency_us * 1e-6)
    full = min(budget / (P * it(0.0, budget)), ports / kv / stages)
    return RateSearch(
        lambda r: prefill_latency(it, rate=r, prompt=P, transfer_s=transfer),
        ceiling=ceiling,
        capacity=utilization * full,
    )


def decode_search(
    w: InferenceWorkload, it: IterationTime, batch: int, P: float, out: float
) -> RateSearch:
    """Requests/s of one decode engine (replica_rate): at most max_utilization of its full
    batch's, the time per token and what the end-to-end ceiling leaves after the prefill
    pool's first-token budget met."""
    first = first_token_budget(w)
    rest = None if w.max_e2e_s is None else w.max_e2e_s - (first or 0.0)
    k = 1.0 + load_serving().latency_margin
    pct = w.latency_percentile

    def meets(lat: LoadedLatency) -> bool:
        return (rest is None or lat.e2e_s[pct] * k <= rest) and (
            w.max_ms_per_token is None or lat.tpot_s * 1e3 * k <= w.max_ms_per_token
        )

    return decode_engine_search(
        it,
        batch,
        P,
        out,
        ceiling=meets,
        utilization=w.max_utilization,
        percentiles={pct: PERCENTILES[pct]},
    )


def decode_engine_search(
    it: IterationTime,
    batch: int,
    P: float,
    out: float,
    *,
    ceiling: Callable[[LoadedLatency], bool],
    utilization: float,
    percentiles: Mapping[int, float] = PERCENTILES,
) -> RateSearch:
    """The search (serving.RateSearch) for the requests/s of one decode engine of `batch` slots
    taking prompts of `P` tokens from a prefill pool and writing `out`: at most `utilization` of
    its full batch's, `ceiling` met (reading only `percentiles`, the latencies computed)."""
    return RateSearch(
        lambda r: decode_latency(
            it, slots=batch, rate=r, prompt=P, output=out, percentiles=percentiles
        ),
        ceiling=ceiling,
        capacity=utilization * (batch / (out * it(batch, 0.0))),
    )


def first_token_budget(w: InferenceWorkload) -> float | None:
    """The first-token latency a disaggregated prefill pool is held to: the first-token
    ceiling, else a share of the end-to-end one (serving.yaml), else none."""
    if w.max_ttft_s is not None:
        return w.max_ttft_s
    if w.max_e2e_s is not None:
        return w.max_e2e_s * load_serving().disaggregated_ttft_share
    return None


def in_role(
    d: Design, role: Role, sub: InferenceWorkload, cat: Catalog, spec: list[StageSpec], link: Link
) -> Design:
    """Design `d` as a replica of `role`. A decode replica's figures are its own: iterations of
    prefilled sequences with no prompt chunks (planner.estimator.replica.inference_replica's
    `decode_only`), so its time per token, tokens/s and power are those of the engine that
    serves its rate (decode_engine_search), as the plan and the verifier recompute them."""
    if role != "decode":
        return d if role == "both" else dataclasses.replace(d, role=role)
    fig = inference_replica(
        cat.model(sub.model), sub.weights, sub.kv, batch=d.batch, context=sub.context_tokens,
        prompt=prefill_prompt(sub.prompt_tokens, sub.prefix_cache_hit),
        output=sub.output_tokens, stages=spec, link=link, decode_only=True,
        **engine_times(cat, d.engine),
    )  # fmt: skip
    return dataclasses.replace(
        d,
        role=role,
        tokens_per_s=fig.tokens_per_s,
        ms_per_token=fig.ms_per_token,
        ttft_s=fig.ttft_s,
        power_w=fig.power_w,
    )
