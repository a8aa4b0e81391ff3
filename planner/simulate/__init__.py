"""Replay a plan: an iteration-level, seeded discrete-event simulation of its serving engines.

Each replica of S pipeline stages is S engines of `batch` sequence slots (one per micro-batch in
flight), whose iteration takes S x the slowest stage (planner.estimator.replica.IterationTime,
the estimator's own figure at the iteration's token mix). An iteration advances every decoding
sequence by one token and processes up to the token budget of prompt tokens, first come first
served, in chunks (continuous batching with chunked prefill, as vLLM, SGLang and TensorRT-LLM
schedule). A request is admitted when a slot is free and the KV cache has room for its whole
length (prompt + output tokens; the engine's KV holds `batch` sequences of the workload's
context), so no admitted sequence is ever preempted; requests wait in arrival order.

Arrivals: Poisson at each engine's share of the plan's request rate (request mixes), or a
trace; fixed-rate workloads with a concurrency are closed: every sequence that ends is replaced
at once by a new request of the workload's shape.

Engines of one replica group are statistically alike, so one engine per group is simulated
with a number of requests in proportion to the group's share of the traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.economics import demand_periods
from planner.estimator.measured import measured_classes
from planner.estimator.replica import IterationTime
from planner.estimator.serving import (
    PERCENTILES,
    chunk_mix,
    closed_ttft,
    decode_latency,
    open_latency,
    prefill_latency,
    prefill_prompt,
)
from planner.plan.types import WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem
from planner.simulate.engine import EngineResult, simulate_disaggregated, simulate_engine
from planner.simulate.groups import arrivals, engine_of, launched_context, shape_of, transfer_of
from planner.simulate.plan_file import check_groups, check_same_fleet, workloads_from_json
from planner.simulate.pools import pool_factor, replay_pools

__all__ = [
    "EngineResult",
    "GroupReport",
    "SimulationReport",
    "analytic",
    "check_groups",
    "check_same_fleet",
    "engine_of",
    "simulate_disaggregated",
    "simulate_engine",
    "simulate_plan",
    "transfer_of",
    "workloads_from_json",
]


@dataclass
class GroupReport:
    plan_index: int  # the replica group's place in the plan's workload list
    workload: str
    label: str  # devices of the replica group
    engines: int
    requests_per_s: float  # into the group (open arrivals) or made (closed)
    result: EngineResult
    # A disaggregated prefill pool's figures are first tokens only; the decode pools' results
    # carry whole requests (their prefill drawn from these), so only they are pooled.
    role: str = "both"


@dataclass
class SimulationReport:
    seed: int
    requests: int
    groups: list[GroupReport]

    def _pooled(self, attr: str) -> list[float]:
        """Per-request samples over groups, each group's weighted by its traffic share."""
        out: list[float] = []
        for g in self.groups:
            if g.role != "prefill":
                out.extend(getattr(g.result, attr))
        return out

    def percentiles(self, attr: str) -> dict[int, float]:
        xs = self._pooled(attr)
        if not xs:
            return {p: math.nan for p in PERCENTILES}
        return {p: float(np.percentile(xs, p)) for p in PERCENTILES}

    @property
    def tokens_per_s(self) -> float:
        """Output tokens/s of the fleet: each engine's rate over its steady window
        (EngineResult.tokens_per_s) times its group's engines; a prefill pool's first tokens
        are its decode pools' (which count each request's output whole)."""
        return sum(g.engines * g.result.tokens_per_s for g in self.groups if g.role != "prefill")


def period_scale(problem: Problem, period: str | None) -> float:
    """The demand scale of the plan period a replay takes its groups from (1 without periods)."""
    if period is None:
        return 1.0
    return next((p.scale for p in demand_periods(problem) if p.name == period), 1.0)


def traffic_scale(problem: Problem, groups: list[WorkloadPlan], name: str) -> float:
    """The problem's traffic for workload `name` over the plan's: its requests/s over the
    requests/s the plan's replica groups serve (request mixes), or the sequences that exist
    over the sequences the groups hold (fixed-rate workloads), both at the demand of the
    groups' period; 1 where either is unstated. A problem changed after solving (--set) is so
    replayed under its own traffic."""
    w = next((x for x in problem.workloads if x.name == name), None)
    if not isinstance(w, InferenceWorkload):
        return 1.0
    mine = [g for g in groups if g.name == name and g.kind == "inference" and g.role != "decode"]
    scale = period_scale(problem, mine[0].period) if mine else 1.0
    if w.request_mix is not None:
        planned = sum(sum(g.requests_per_s.values()) for g in mine)
        return w.requests_per_s * scale / planned if w.requests_per_s and planned > 0 else 1.0
    held = [g.sequences for g in mine]
    if w.concurrency is None or not held or any(h is None for h in held):
        return 1.0
    total = sum(h for h in held if h is not None)
    return w.concurrency * scale / total if total > 0 else 1.0


def _closed_sequences(total: float, engines: int) -> tuple[int, int]:
    """(sequences per engine, engines that hold any) of a fixed-rate group holding `total`
    sequences: fewer than its engines leave engines empty; more than an engine's slots wait."""
    if total < engines:
        return 1, max(1, round(total))
    return max(1, round(total / engines)), engines


def _slots(wp: WorkloadPlan) -> int:
    """Every slot of a whole-request group: its batch per engine (engine_of), S engines per
    replica."""
    return wp.batch * wp.replicas * len(wp.stages)


def _held(wp: WorkloadPlan) -> float:
    """Sequences a fixed-rate group holds in the plan (every slot where it does not say)."""
    return float(wp.sequences if wp.sequences is not None else _slots(wp))


def _allocate(groups: list[WorkloadPlan], problem: Problem, load: float) -> dict[int, int]:
    """Whole sequences per fixed-rate group (by id) under `load` x the problem's traffic: each
    workload's total, rounded, split over its groups in proportion to what the plan has them
    hold (largest remainders), so one sequence is one sequence however many groups there are."""
    out: dict[int, int] = {}
    for w in problem.workloads:
        if not isinstance(w, InferenceWorkload) or w.request_mix is not None:
            continue
        mine = [g for g in groups if g.name == w.name]
        if not mine:
            continue
        factor = load * traffic_scale(problem, groups, w.name)
        exact = [_held(g) * factor for g in mine]
        whole = [math.floor(x) for x in exact]
        short = round(sum(exact)) - sum(whole)
        for i in sorted(range(len(mine)), key=lambda i: whole[i] - exact[i])[: max(0, short)]:
            whole[i] += 1
        out |= {id(g): n for g, n in zip(mine, whole, strict=True)}
    return out


# A replay's output below the demand by less than this is the noise of its Poisson arrivals
# (measured over the steady window: EngineResult.tokens_per_s), not a shortfall worth a note.
SHORTFALL = 0.1


def simulation_notes(
    rep: SimulationReport, problem: Problem, groups: list[WorkloadPlan], load: float
) -> list[str]:
    """Where the replayed traffic is not what the plan was made for: fixed-rate workloads with
    more sequences than the replicas hold, an output below the demand, or (request mixes) a
    latency past its ceiling at the workload's percentile."""
    notes = []
    for w in problem.workloads:
        mine = [g for g in rep.groups if g.workload == w.name]
        if not isinstance(w, InferenceWorkload) or not mine:
            continue
        scale = period_scale(problem, groups[mine[0].plan_index].period) * load
        made = sum(g.engines * g.result.tokens_per_s for g in mine if g.role != "prefill")
        notes += _refused_note(w.name, mine)
        measured = [g.label for g in mine if _measured(w, groups[g.plan_index])]
        if measured:
            notes.append(
                f"workload `{w.name}`: {', '.join(measured)} serve at measured rates, which the "
                "replay cannot run (it replays the estimator's engine for each replica), so its "
                "figures for them are the estimate's, not the measurement's"
            )
            continue
        if w.request_mix is not None:
            notes += _mix_notes(w, mine, made, scale)
            continue
        held = sum(_slots(groups[g.plan_index]) for g in mine)
        if w.concurrency is not None and w.concurrency * scale > held:
            notes.append(
                f"workload `{w.name}`: {w.concurrency * scale:,.0f} sequences exist and the "
                f"plan's replicas hold {held:,}: the rest wait for a slot (the plan was not "
                "made for them; solve the changed problem for one that is)"
            )
        want = (w.min_tokens_per_s or 0.0) * scale
        if want and made < want * (1 - SHORTFALL):
            notes.append(
                f"workload `{w.name}`: the replay makes {made:,.0f} output tokens/s, below "
                f"the {want:,.0f} the problem asks"
            )
    return notes


def _refused_note(name: str, mine: list[GroupReport]) -> list[str]:
    """How many replayed requests a workload's engines refused as longer than they admit."""
    refused = sum(g.result.refused for g in mine)
    if not refused:
        return []
    served = sum(len(g.result.e2e) for g in mine if g.role != "prefill")
    admits = min(g.result.admits for g in mine if g.result.refused)
    return [
        f"workload `{name}`: {refused:,} of the {refused + served:,} requests replayed were "
        f"refused: longer than the {admits:,.0f} tokens (prompt + output) the plan's engines "
        "were launched to admit (its recipes' --max-model-len or context length), as the "
        "engine refuses them; they are in no figure (solve the changed problem for engines "
        "that take them)"
    ]


def _measured(w: InferenceWorkload, wp: WorkloadPlan) -> bool:
    """Whether a replica group serves a class at a measured rate (one stage of the measured
    device and degree, whole requests)."""
    if len(wp.stages) != 1 or wp.role != "both":
        return False
    classes = measured_classes(w, wp.stages[0].device, wp.stages[0].tp)
    return any(wp.requests_per_s.get(c, 0.0) > 0 for c in classes)


def _mix_notes(
    w: InferenceWorkload, mine: list[GroupReport], made: float, scale: float
) -> list[str]:
    """A request mix's replay against its demand and its latency ceilings (at its percentile)."""
    assert w.request_mix is not None
    out = []
    want = (w.requests_per_s or 0.0) * scale * sum(c.share * c.output_tokens for c in w.request_mix)
    if want and made < want * (1 - SHORTFALL):
        out.append(
            f"workload `{w.name}`: the replay makes {made:,.0f} output tokens/s, below the "
            f"{want:,.0f} its requests/s ask"
        )
    pct = w.latency_percentile
    served = [g for g in mine if g.role != "prefill"]
    for attr, ceiling, what in (
        ("ttft", w.max_ttft_s, "first token"),
        ("e2e", w.max_e2e_s, "end-to-end latency"),
        (
            "tpot",
            None if w.max_ms_per_token is None else w.max_ms_per_token / 1e3,
            "time per token",
        ),
    ):
        xs = [x for g in served for x in getattr(g.result, attr)]
        if ceiling is None or not xs:
            continue
        got = float(np.percentile(xs, pct))
        if got > ceiling:
            out.append(
                f"workload `{w.name}`: p{pct} {what} in the replay is {got:.3g} s, above its "
                f"{ceiling:g} s ceiling"
            )
    return out


def simulate_plan(
    workloads: list[WorkloadPlan],
    problem: Problem,
    cat: Catalog,
    launched: Problem | None = None,
    *,
    requests: int = 10_000,
    seed: int = 0,
    load: float = 1.0,
) -> SimulationReport:
    """Simulate every serving replica group of the plan's first period under `load` x the
    problem's traffic (traffic_scale: request mixes' requests/s, fixed-rate workloads'
    sequences). `requests` are split over the groups in their shares of the traffic; a
    disaggregated workload's requests each go through a prefill and a decode engine
    (planner.simulate.pools), so they are counted once, at the decode groups. `launched`: the
    problem the plan was solved for (default `problem`), whose lengths its engines were launched
    to admit (launched_context): longer requests are refused and counted (EngineResult.refused)."""
    rng = np.random.default_rng(seed)
    by_name = {w.name: w for w in problem.workloads}
    period = workloads[0].period if workloads else None
    groups = [
        wp for wp in workloads if wp.kind == "inference" and wp.period == period and wp.replicas > 0
    ]
    weights = [_weight(by_name[wp.name], wp, groups) for wp in groups]
    total = sum(weights) or 1.0
    out: list[GroupReport] = []
    sequences = _allocate(groups, problem, load)
    scales = {w.name: load * traffic_scale(problem, groups, w.name) for w in problem.workloads}
    prefilled: dict[int, list[EngineResult]] = {}  # prefill group (id) -> its chains' figures
    for wp, wt in zip(groups, weights, strict=True):
        w = by_name[wp.name]
        assert isinstance(w, InferenceWorkload)
        index, n = workloads.index(wp), max(50, round(requests * wt / total))
        engines = wp.replicas * len(wp.stages)
        label = "+".join(f"{s.tp}x{s.device}" for s in wp.stages)
        if w.request_mix is not None and wp.role == "decode":
            pre = [g for g in groups if g.name == wp.name and g.role == "prefill"]
            if not pre:
                raise InputError(
                    f"workload `{wp.name}`: the plan's decode pools have no prefill pool in the "
                    "period replayed; re-create the plan with `planner solve --out`"
                )
            limit = launched_context(launched or problem, wp)
            factor = pool_factor(groups, wp.name)
            figures, res = replay_pools(
                problem, cat, w, pre, wp, scales[wp.name], n, rng, limit, factor=factor
            )
            res.admits = limit
            for g, f in zip(pre, figures, strict=True):
                prefilled.setdefault(id(g), []).append(f)
            rate = scales[wp.name] * factor * sum(wp.requests_per_s.values())
            out.append(GroupReport(index, wp.name, f"decode {label}", engines, rate, res, "decode"))
        elif w.request_mix is not None and wp.role == "both":
            it, slots, kv, budget = engine_of(problem, cat, w, wp)
            rate = scales[wp.name] * sum(wp.requests_per_s.values()) / engines
            limit = launched_context(launched or problem, wp)
            reqs, refused = arrivals(w, wp, rate, n, rng, limit)
            res = simulate_engine(it, slots=slots, kv_tokens=kv, budget=budget, requests=reqs)
            res.refused, res.admits = refused, limit
            out.append(GroupReport(index, wp.name, label, engines, rate * engines, res))
        elif w.request_mix is None and sequences[id(wp)] > 0:  # one without sequences makes none
            res, engines = _closed(problem, cat, w, wp, sequences[id(wp)], n)
            limit = launched_context(launched or problem, wp)
            if w.prompt_tokens + w.output_tokens > limit:  # every one refused, as the engine does
                res = EngineResult(refused=len(res.e2e), admits=limit)
            out.append(GroupReport(index, wp.name, label, engines, wp.tokens_per_s, res))
    pools = [
        GroupReport(
            workloads.index(wp),
            wp.name,
            "prefill " + "+".join(f"{s.tp}x{s.device}" for s in wp.stages),
            wp.replicas * len(wp.stages),
            scales[wp.name] * sum(wp.requests_per_s.values()),
            _joined(prefilled[id(wp)]),
            "prefill",
        )
        for wp in groups
        if id(wp) in prefilled
    ]
    return SimulationReport(seed, requests, pools + out)


def _weight(w: object, wp: WorkloadPlan, groups: list[WorkloadPlan]) -> float:
    """A group's share of the replayed requests: the requests/s it serves whole or decodes (a
    prefill pool's requests are its decode pools'), or a fixed-rate group's requests/s."""
    assert isinstance(w, InferenceWorkload)
    if w.request_mix is None:
        return wp.tokens_per_s / shape_of(w, wp).output_tokens
    rate = sum(wp.requests_per_s.values())
    return {"prefill": 0.0, "decode": rate * pool_factor(groups, wp.name)}.get(wp.role, rate)


def _closed(
    problem: Problem, cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan, total: int, n: int
) -> tuple[EngineResult, int]:
    """One engine of a fixed-rate group holding `total` sequences over its engines, `n`
    requests counted between the opening round and the drain (simulate_engine counts neither);
    and the engines that hold any. Sequences past the slots only wait for one
    (simulation_notes says so): the engine runs full."""
    it, slots, kv, budget = engine_of(problem, cat, w, wp)
    per, engines = _closed_sequences(total, wp.replicas * len(wp.stages))
    per = min(slots, per)
    prompt = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit)
    reqs = [(0.0, prompt, w.output_tokens)] * (n + 2 * per)
    res = simulate_engine(
        it, slots=slots, kv_tokens=kv, budget=budget, requests=reqs, closed=per, warmup=per
    )
    return res, engines


def _joined(parts: list[EngineResult]) -> EngineResult:
    """A prefill group's figures over the chains of every decode group it feeds (request
    numbers made unique by an offset per chain)."""
    out = EngineResult()
    offset = 0
    for f in parts:
        out.index += [offset + i for i in f.index]
        out.ttft += f.ttft
        out.e2e += f.e2e
        out.output_tokens += f.output_tokens
        out.seconds = max(out.seconds, f.seconds)
        offset += len(f.index)
    return out


def analytic(
    problem: Problem,
    cat: Catalog,
    wp: WorkloadPlan,
    *,
    load: float = 1.0,
    plan_groups: list[WorkloadPlan] | None = None,
) -> dict[str, dict[int, float]]:
    """The serving model's own latency percentiles for one replica group (seconds), to set
    beside the simulation: open arrivals for request mixes (the rate-weighted mean shape of
    the classes it serves), the closed-load first token for fixed-rate workloads. A decode
    pool's figures add the slowest of the workload's prefill pools in `plan_groups`."""
    w = next(x for x in problem.workloads if x.name == wp.name)
    assert isinstance(w, InferenceWorkload)
    it, slots, _, _ = engine_of(problem, cat, w, wp)
    engines = wp.replicas * len(wp.stages)
    if plan_groups is not None:  # the whole plan: the problem's traffic over the plan's
        same = [g for g in plan_groups if g.period == wp.period]  # the period replayed
        load *= traffic_scale(problem, same, wp.name)
    if w.request_mix is not None and wp.role != "both":
        return _pool_analytic(problem, cat, w, wp, it, load, plan_groups or [])
    if w.request_mix is not None:
        rate = load * sum(wp.requests_per_s.values())
        by = {c.name: c for c in w.request_mix}
        P = (
            sum(
                prefill_prompt(by[k].input_tokens, w.prefix_cache_hit) * r
                for k, r in wp.requests_per_s.items()
            )
            / rate
            * load
        )
        out = sum(by[k].output_tokens * r for k, r in wp.requests_per_s.items()) / rate * load
        lat = open_latency(it, slots=slots, rate=rate / engines, prompt=P, output=out)
        return {
            "ttft": lat.ttft_s,
            "e2e": lat.e2e_s,
            "tpot": dict.fromkeys(PERCENTILES, lat.tpot_s),
        }
    # The sequences held (those past the slots wait, which the replay shows and this does not).
    per = min(slots, _closed_sequences(_held(wp) * load, engines)[0])
    P, out = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit), w.output_tokens
    c, f = chunk_mix(per, P, out, per * P / out)
    t_c = it(per, c)
    t = (1.0 - f) * it(per, 0.0) + f * t_c
    ttft = closed_ttft(t, t_c, per, P, out)
    e2e = ttft + (out - 1) * t
    return {
        "ttft": dict.fromkeys(PERCENTILES, ttft),
        "e2e": dict.fromkeys(PERCENTILES, e2e),
        "tpot": dict.fromkeys(PERCENTILES, t),
    }


def _pool_analytic(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    wp: WorkloadPlan,
    it: IterationTime,
    load: float,
    plan_groups: list[WorkloadPlan],
) -> dict[str, dict[int, float]]:
    """Analytic figures of a disaggregated pool at its mean request shape (see analytic)."""
    assert w.request_mix is not None
    by = {c.name: c for c in w.request_mix}
    rate = load * sum(wp.requests_per_s.values())
    engines = wp.replicas * len(wp.stages)
    if rate <= 0:
        zero = dict.fromkeys(PERCENTILES, 0.0)
        return {"ttft": zero, "e2e": zero, "tpot": zero}
    served = wp.requests_per_s.items()
    P = sum(prefill_prompt(by[k].input_tokens, w.prefix_cache_hit) * r for k, r in served)
    out = sum(by[k].output_tokens * r for k, r in served)
    P, out = P * load / rate, out * load / rate
    if wp.role == "prefill":
        lat = prefill_latency(
            it, rate=rate / engines, prompt=P, transfer_s=transfer_of(problem, cat, w, wp)
        )
        return {"ttft": lat.ttft_s, "e2e": lat.ttft_s, "tpot": dict.fromkeys(PERCENTILES, 0.0)}
    pre = [
        _pool_analytic(problem, cat, w, g, engine_of(problem, cat, w, g)[0], load, [])["ttft"]
        for g in plan_groups
        if g.name == wp.name and g.role == "prefill" and g.period == wp.period
    ]
    first = {p: max((x[p] for x in pre), default=0.0) for p in PERCENTILES}
    # Every request the prefill pools take is decoded once: the decode pools' share of it.
    same = [g for g in plan_groups if g.period == wp.period]
    sent = rate * pool_factor(same, w.name) / engines
    lat = decode_latency(it, slots=wp.batch, rate=sent, prompt=P, output=out)
    return {
        "ttft": first,
        "e2e": {p: first[p] + lat.e2e_s[p] for p in PERCENTILES},
        "tpot": dict.fromkeys(PERCENTILES, lat.tpot_s),
    }
