"""A disaggregated workload's replay: every request through a prefill engine, then (its KV sent
over the link) a decode engine, one chain per decode group.

The plan's pools are sized apart, each with spare room: `requests_per_s` of a prefill group is
what its replicas can prefill, of a decode group what they can decode, and the two sides' sums
differ (whole replicas). The requests that take the pool path are the problem's traffic less
what whole-request groups take (prefill side: traffic_scale), and each of them is prefilled
once and decoded once: the decode groups share that rate in proportion to what the plan has
them decode (pool_factor), the prefill groups in proportion to what it has them prefill.

One engine per decode group is replayed with its share of the requests. Each of its requests
is prefilled by an engine of a prefill group chosen in that group's share of its class; the
prefill engines replayed for it carry the rest of their traffic (other decode engines'
requests) as Poisson background, so they queue as loaded as the plan's, and hand each request
to the decode engine when its prefill ends and its KV has crossed the link.
"""

from __future__ import annotations

import math

import numpy as np

from planner.catalog import Catalog
from planner.estimator.serving import prefill_prompt
from planner.plan.types import WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem
from planner.simulate.engine import EngineResult, decode_prefilled, simulate_engine
from planner.simulate.groups import admitted, arrival_classes, engine_of, transfer_of

# A request on the pool path: (arrival s, class, prefill group, engine of it, prompt, output).
Request = tuple[float, int, int, int, int, int]


def pool_factor(groups: list[WorkloadPlan], name: str) -> float:
    """Requests/s the plan's prefill pools of workload `name` take over those its decode pools
    can decode: the factor from a decode group's planned rate to the rate it is sent (every
    prefilled request is decoded once). 1 without both sides."""
    planned = {"prefill": 0.0, "decode": 0.0, "both": 0.0}
    for g in groups:
        if g.name == name:
            planned[g.role] += sum(g.requests_per_s.values())
    pre, dec = planned["prefill"], planned["decode"]
    return pre / dec if pre > 0 and dec > 0 else 1.0


def replay_pools(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    prefill: list[WorkloadPlan],
    decode: WorkloadPlan,
    scale: float,
    n: int,
    rng: np.random.Generator,
    limit: float = math.inf,
    *,
    factor: float,
) -> tuple[list[EngineResult], EngineResult]:
    """One engine of `decode` fed `n` requests through the `prefill` groups' engines, `scale`
    x the planned rates (traffic_scale x load: the prefill side's); `factor`, pool_factor over
    every group of the workload (all its decode groups share what the prefill pools take, so
    one decode group's own planned rate is not the measure). Returns per prefill group
    the figures of the chain's requests it prefilled (first token with the transfer), and the
    decode engine's: each request's first token from its prefill, end-to-end over both, output
    tokens counted whole (the first made by the prefill engine). Requests longer than `limit`
    (prompt + output: the engines' launched context) are refused, and counted."""
    assert w.request_mix is not None
    engines = decode.replicas * len(decode.stages)
    planned = sum(decode.requests_per_s.values())
    rate = scale * factor * planned / engines
    times, cls = arrival_classes(w, decode.requests_per_s, rate, n, rng)
    times, cls, refused = admitted(w, times, cls, limit)
    n = len(times)
    chain = _route(w, prefill, times, cls, engines, rng)
    ready = [math.inf] * n
    out: list[EngineResult] = []
    for g_i, g in enumerate(prefill):
        mine = [r for r in range(n) if chain[r][2] == g_i]
        res = EngineResult()
        res.index = mine
        per_engine = scale * sum(g.requests_per_s.values()) / (g.replicas * len(g.stages))
        for e in range(_copies(g, engines)):
            ours = [r for r in mine if chain[r][3] == e]
            firsts = _prefill_engine(problem, cat, w, g, chain, ours, per_engine, rng)
            for r, first in zip(ours, firsts, strict=True):
                ready[r] = times[r] + first
        res.ttft = [ready[r] - times[r] for r in mine]
        res.e2e = list(res.ttft)
        res.output_tokens = len(mine)
        out.append(res)
    it, slots, kv, _ = engine_of(problem, cat, w, decode)
    order, dec = decode_prefilled(it, slots, kv, dict(enumerate(ready)), chain)
    res = EngineResult(seconds=dec.seconds, queue=dec.queue, kv_share=dec.kv_share, tpot=dec.tpot)
    res.refused = refused
    res.window_tokens, res.window_seconds = dec.window_tokens, dec.window_seconds
    for pos, e2e in zip(dec.index, dec.e2e, strict=True):
        r = order[pos]
        res.index.append(r)
        res.ttft.append(ready[r] - times[r])
        res.e2e.append(ready[r] - times[r] + e2e)
        res.output_tokens += chain[r][5]
    return out, res


def _copies(g: WorkloadPlan, engines: int) -> int:
    """Engines of prefill group `g` replayed for one of `engines` decode engines: ceil(E_g /
    E_d), at least one (E: a group's engines)."""
    return max(1, math.ceil(g.replicas * len(g.stages) / engines))


def _route(
    w: InferenceWorkload,
    prefill: list[WorkloadPlan],
    times: list[float],
    cls: list[int],
    engines: int,
    rng: np.random.Generator,
) -> list[Request]:
    """Each request's prefill group (in the groups' shares of its class; of all classes where
    none prefills it) and engine among the ceil(E_g / E_d) of that group replayed for one
    decode engine (E: engines of a group)."""
    assert w.request_mix is not None
    names = [c.name for c in w.request_mix]
    totals = np.array([sum(g.requests_per_s.values()) for g in prefill])
    out: list[Request] = []
    for t, c in zip(times, cls, strict=True):
        by = np.array([g.requests_per_s.get(names[c], 0.0) for g in prefill])
        p = by if by.sum() > 0 else totals
        g_i = int(rng.choice(len(prefill), p=p / p.sum()))
        g = prefill[g_i]
        m = w.request_mix[c]
        prompt = prefill_prompt(m.input_tokens, w.prefix_cache_hit)
        out.append((t, c, g_i, int(rng.integers(_copies(g, engines))), prompt, m.output_tokens))
    return out


def _prefill_engine(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    g: WorkloadPlan,
    chain: list[Request],
    ours: list[int],
    rate: float,
    rng: np.random.Generator,
) -> list[float]:
    """One prefill engine of group `g` serving the chain's requests `ours` among Poisson
    background traffic that brings each class's arrivals to its share of `rate` requests/s
    over the same span (the group's planned mix): each of `ours`' first-token seconds after
    arrival, its KV transfer included. The background is what the chain does not bring, class
    by class: a chain that carries all of one class's requests gets none of it again."""
    assert w.request_mix is not None
    if not ours:
        return []
    span = chain[ours[-1]][0]
    background: list[tuple[float, int, int]] = []
    planned = sum(g.requests_per_s.values())
    for c, m in enumerate(w.request_mix):
        share = rate * g.requests_per_s.get(m.name, 0.0) / planned if planned > 0 else 0.0
        carried = sum(1 for r in ours if chain[r][1] == c)
        extra = share - carried / span if span > 0 else 0.0
        if extra <= 0:
            continue
        count = int(rng.poisson(extra * span))
        prompt = prefill_prompt(m.input_tokens, w.prefix_cache_hit)
        background += [(float(t), prompt, 1) for t in rng.uniform(0.0, span, size=count)]
    own = [(chain[r][0], chain[r][4], 1) for r in ours]
    both = [*own, *background]
    order = sorted(range(len(both)), key=lambda j: (both[j][0], j))
    place = {j: pos for pos, j in enumerate(order)}  # own request j -> its place in the replay
    it, slots, kv, budget = engine_of(problem, cat, w, g)
    res = simulate_engine(
        it, slots=slots, kv_tokens=kv, budget=budget, requests=[both[j] for j in order]
    )
    first = dict(zip(res.index, res.ttft, strict=True))
    sent = {p: transfer_of(problem, cat, w, g, p) for p in {x[1] for x in own}}
    return [first[place[j]] + sent[x[1]] for j, x in enumerate(own)]
