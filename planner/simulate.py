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

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.replica import IterationTime
from planner.estimator.request_mix import class_workload
from planner.estimator.serving import (
    PERCENTILES,
    chunk_mix,
    closed_ttft,
    open_latency,
    prefill_prompt,
    token_budget,
)
from planner.plan.types import StageLine, WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem


@dataclass
class EngineResult:
    """Per-request figures of one simulated engine (seconds) and its time series."""

    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    index: list[int] = field(default_factory=list)  # the request each figure belongs to
    tpot: list[float] = field(default_factory=list)
    output_tokens: int = 0
    seconds: float = 0.0
    queue: list[tuple[float, int]] = field(default_factory=list)  # (time, requests waiting)
    kv_share: list[tuple[float, float]] = field(default_factory=list)  # (time, KV in use / cap)


def simulate_engine(
    it: IterationTime,
    *,
    slots: int,
    kv_tokens: float,
    budget: float,
    requests: list[tuple[float, int, int]],
    closed: int = 0,
    warmup: int = 0,
    prefilled: bool = False,
) -> EngineResult:
    """Run one engine over `requests` (arrival s, prompt, output), in arrival order. `closed`
    > 0: that many sequences exist; `requests` then gives the shapes, each arriving when one
    ends (the first `closed` at time 0). The first `warmup` completed requests are not counted.
    `prefilled`: a disaggregated decode pool's engine, whose requests arrive with their prompt's
    KV (it counts against `kv_tokens`) and decode `output` tokens from admission.

    Long because the event loop keeps its state in locals for speed (10,000 requests in about a
    second).
    """
    out = EngineResult()
    n_req = len(requests)
    arrival = [r[0] for r in requests]
    prompt = [r[1] for r in requests]
    output = [r[2] for r in requests]
    first = [math.nan] * n_req
    waiting: deque[int] = deque()
    prefilling: deque[list[float]] = deque()  # [request, prompt tokens left]
    decoding: list[tuple[int, int]] = []  # heap of (iteration at which it ends, request)
    kv_used = 0.0
    held = 0
    nxt = 0  # next request to arrive
    if closed:
        for i in range(min(closed, n_req)):
            arrival[i] = 0.0
        released = min(closed, n_req)
    else:
        released = n_req
    clock = 0.0
    k = 0
    done = 0
    sample_every = max(1, n_req // 500)
    while done < n_req:
        while nxt < released and arrival[nxt] <= clock:
            waiting.append(nxt)
            nxt += 1
        while waiting and held < slots:
            i = waiting[0]
            need = prompt[i] + output[i]
            if kv_used + need > kv_tokens and held > 0:
                break
            waiting.popleft()
            held += 1
            kv_used += need
            if prefilled:  # a decode pool's request: its prompt's KV arrived with it
                first[i] = clock
                heapq.heappush(decoding, (k + max(output[i], 1), i))
                continue
            prefilling.append([float(i), float(prompt[i])])
        d = len(decoding)
        if d == 0 and not prefilling:
            if nxt >= released:
                break  # closed system drained
            clock = max(clock, arrival[nxt])
            continue
        if not prefilling and decoding:
            # Nothing changes until the next completion (or an arrival that can be admitted):
            # take the identical decode-only iterations in one step.
            dt = it(d, 0.0)
            skip = decoding[0][0] - k - 1
            if nxt < released and held < slots:
                skip = min(skip, int((arrival[nxt] - clock) / dt))
            if skip > 0:
                clock += skip * dt
                k += skip
        room = max(budget - d, 0.0)
        p = 0.0
        finished_prefill: list[int] = []
        for entry in prefilling:
            if room <= 0:
                break
            take = min(room, entry[1])
            entry[1] -= take
            room -= take
            p += take
            if entry[1] <= 0:
                finished_prefill.append(int(entry[0]))
        while prefilling and prefilling[0][1] <= 0:
            prefilling.popleft()
        dt = it(d, p)
        clock += dt
        k += 1
        ended: list[int] = []
        for i in finished_prefill:
            first[i] = clock
            if output[i] <= 1:
                ended.append(i)
            else:
                heapq.heappush(decoding, (k + output[i] - 1, i))
        while decoding and decoding[0][0] <= k:
            ended.append(heapq.heappop(decoding)[1])
        for i in ended:
            held -= 1
            kv_used -= prompt[i] + output[i]
            done += 1
            if closed and released < n_req:
                arrival[released] = clock
                released += 1
            if done > warmup:
                out.index.append(i)
                out.ttft.append(first[i] - arrival[i])
                out.e2e.append(clock - arrival[i])
                if output[i] > 1:
                    out.tpot.append((clock - first[i]) / (output[i] - 1))
                out.output_tokens += output[i]
        if k % sample_every == 0:
            out.queue.append((clock, len(waiting)))
            out.kv_share.append((clock, kv_used / kv_tokens if kv_tokens else 0.0))
    out.seconds = clock
    return out


def simulate_disaggregated(
    prefill: IterationTime,
    decode: IterationTime,
    *,
    slots: int,
    kv_tokens: float,
    prefill_budget: float,
    transfer_s: float,
    requests: list[tuple[float, int, int]],
    warmup: int = 0,
) -> EngineResult:
    """One prefill engine feeding one decode engine (disaggregated serving): each request is
    prefilled FIFO (prompts batched up to `prefill_budget` tokens per iteration; the first token
    comes out of the prefill engine), its KV crosses the link in `transfer_s`, then it waits for
    a decode slot and KV room and decodes its other output - 1 tokens. Figures per request:
    ttft = prefill queue + prefill + transfer; e2e = that + decode wait + decoding."""
    pre = simulate_engine(
        prefill,
        slots=1 << 30,
        kv_tokens=math.inf,
        budget=prefill_budget,
        requests=[(t, p, 1) for t, p, _ in requests],
    )
    ready = {
        i: requests[i][0] + ttft + transfer_s for i, ttft in zip(pre.index, pre.ttft, strict=True)
    }
    order = sorted(ready, key=lambda i: (ready[i], i))
    dec = simulate_engine(
        decode,
        slots=slots,
        kv_tokens=kv_tokens,
        budget=float(slots),
        requests=[(ready[i], requests[i][1], max(requests[i][2] - 1, 1)) for i in order],
        prefilled=True,
    )
    out = EngineResult(seconds=dec.seconds, queue=dec.queue, kv_share=dec.kv_share)
    for n, (pos, e2e) in enumerate(zip(dec.index, dec.e2e, strict=True)):
        if n < warmup:
            continue
        i = order[pos]
        first = ready[i] - requests[i][0]
        out.index.append(i)
        out.ttft.append(first)
        out.e2e.append(first + e2e)
        out.output_tokens += requests[i][2]
    out.tpot = dec.tpot[warmup:]  # the decode engine's time per token (its first is the prefill's)
    return out


@dataclass
class GroupReport:
    plan_index: int  # the replica group's place in the plan's workload list
    workload: str
    label: str  # devices of the replica group
    engines: int
    requests_per_s: float  # into the group (open arrivals) or made (closed)
    result: EngineResult


@dataclass
class SimulationReport:
    seed: int
    requests: int
    groups: list[GroupReport]

    def _pooled(self, attr: str) -> list[float]:
        """Per-request samples over groups, each group's weighted by its traffic share."""
        out: list[float] = []
        for g in self.groups:
            out.extend(getattr(g.result, attr))
        return out

    def percentiles(self, attr: str) -> dict[int, float]:
        xs = self._pooled(attr)
        if not xs:
            return {p: math.nan for p in PERCENTILES}
        return {p: float(np.percentile(xs, p)) for p in PERCENTILES}

    @property
    def tokens_per_s(self) -> float:
        """Output tokens/s of the fleet: each engine's rate times its group's engines."""
        return sum(
            g.engines * g.result.output_tokens / g.result.seconds
            for g in self.groups
            if g.result.seconds > 0
        )


def _shape(w: InferenceWorkload, wp: WorkloadPlan) -> InferenceWorkload:
    if w.request_mix is None:
        return w
    names = [c.name for c in w.request_mix]
    return class_workload(w, names.index(wp.sized_for or names[0]))


def engine_of(
    problem: Problem, cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan
) -> tuple[IterationTime, int, float, float]:
    """The iteration time, slots, KV tokens and token budget of one engine of a replica group."""
    shape = _shape(w, wp)
    it = IterationTime(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=wp.batch,
        context=shape.context_tokens,
        prompt=prefill_prompt(shape.prompt_tokens, w.prefix_cache_hit),
        output=shape.output_tokens,
        stages=wp.stage_specs(cat),
        link=cat.link(problem.constraints.network),
    )
    kv = float(wp.batch * shape.context_tokens)
    budget = token_budget(
        wp.batch, prefill_prompt(shape.prompt_tokens, w.prefix_cache_hit), shape.output_tokens
    )
    return it, wp.batch, kv, budget


def simulate_plan(
    workloads: list[WorkloadPlan],
    problem: Problem,
    cat: Catalog,
    *,
    requests: int = 10_000,
    seed: int = 0,
    load: float = 1.0,
) -> SimulationReport:
    """Simulate every serving replica group of the plan's first period under `load` x its
    traffic (request mixes) or with its sequences (fixed-rate workloads)."""
    rng = np.random.default_rng(seed)
    by_name = {w.name: w for w in problem.workloads}
    period = workloads[0].period if workloads else None
    groups = [
        wp for wp in workloads if wp.kind == "inference" and wp.period == period and wp.replicas > 0
    ]
    weights = []
    for wp in groups:
        w = by_name[wp.name]
        assert isinstance(w, InferenceWorkload)
        weights.append(
            sum(wp.requests_per_s.values())
            if w.request_mix is not None
            else wp.tokens_per_s / _shape(w, wp).output_tokens
        )
    total = sum(weights) or 1.0
    out: list[GroupReport] = []
    for wp, wt in zip(groups, weights, strict=True):
        index = workloads.index(wp)
        w = by_name[wp.name]
        assert isinstance(w, InferenceWorkload)
        engines = wp.replicas * len(wp.stages)
        n = max(50, round(requests * wt / total))
        it, slots, kv, budget = engine_of(problem, cat, w, wp)
        label = "+".join(f"{s.tp}x{s.device}" for s in wp.stages)
        if w.request_mix is not None:
            rate = load * sum(wp.requests_per_s.values()) / engines
            names = [c.name for c in w.request_mix]
            served = [wp.requests_per_s.get(c, 0.0) for c in names]
            probs = np.array(served) / (sum(served) or 1.0)
            cls = rng.choice(len(names), size=n, p=probs)
            gaps = rng.exponential(1.0 / rate, size=n) if rate > 0 else np.full(n, math.inf)
            times = np.cumsum(gaps)
            reqs = [
                (
                    float(t),
                    prefill_prompt(w.request_mix[c].input_tokens, w.prefix_cache_hit),
                    w.request_mix[c].output_tokens,
                )
                for t, c in zip(times.tolist(), cls.tolist(), strict=True)
            ]
            res = simulate_engine(it, slots=slots, kv_tokens=kv, budget=budget, requests=reqs)
            out.append(GroupReport(index, wp.name, label, engines, rate * engines, res))
        else:
            seqs = wp.sequences if wp.sequences is not None else slots * engines
            per = max(1, round(seqs / engines))
            prompt = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit)
            reqs = [(0.0, prompt, w.output_tokens)] * (n + per)
            res = simulate_engine(
                it, slots=slots, kv_tokens=kv, budget=budget, requests=reqs, closed=per, warmup=per
            )
            out.append(GroupReport(index, wp.name, label, engines, wp.tokens_per_s, res))
    return SimulationReport(seed, requests, out)


def analytic(
    problem: Problem, cat: Catalog, wp: WorkloadPlan, *, load: float = 1.0
) -> dict[str, dict[int, float]]:
    """The serving model's own latency percentiles for one replica group (seconds), to set
    beside the simulation: open arrivals for request mixes (the rate-weighted mean shape of
    the classes it serves), the closed-load first token for fixed-rate workloads."""
    w = next(x for x in problem.workloads if x.name == wp.name)
    assert isinstance(w, InferenceWorkload)
    it, slots, _, _ = engine_of(problem, cat, w, wp)
    engines = wp.replicas * len(wp.stages)
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
    seqs = wp.sequences if wp.sequences is not None else slots * engines
    per = max(1, round(seqs / engines))
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


def workloads_from_json(data: object, where: str) -> list[WorkloadPlan]:
    """The serving replica groups of a plan file (the fields a simulation needs), with a located
    error for anything missing or malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        raise InputError(f"{where}: not a plan (no `workloads` list)")
    out = []
    for i, x in enumerate(data["workloads"]):
        at = f"{where}: workloads[{i}]"
        try:
            stages = tuple(
                StageLine(
                    str(s["device"]),
                    int(s["tp"]),
                    (int(s["layers"][0]), int(s["layers"][1])),
                    {},
                    float(s.get("seconds", 0.0)),
                    float(s.get("boundary_bytes", 0.0)),
                )
                for s in x["stages"]
            )
            wp = WorkloadPlan(
                str(x["name"]),
                str(x["kind"]),
                str(x["model"]),
                int(x["replicas"]),
                int(x["batch"]),
                stages,
                float(x["tokens_per_s"]),
                None,
                None,
                None,
                0.0,
                0.0,
                None,
                period=x.get("period"),
                requests_per_s={
                    str(k): float(v) for k, v in (x.get("requests_per_s") or {}).items()
                },
                sized_for=x.get("sized_for"),
                sequences=None if x.get("sequences") is None else int(x["sequences"]),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise InputError(
                f"{at}: malformed replica group ({e!r}); re-create the plan with `planner solve --out`"
            ) from None
        if not all(math.isfinite(v) for v in (wp.tokens_per_s, *wp.requests_per_s.values())):
            raise InputError(f"{at}: figures must be finite numbers")
        if wp.replicas < 0 or wp.batch < 1 or any(s.tp < 1 for s in stages):
            raise InputError(f"{at}: replicas, batch and tp must be positive")
        out.append(wp)
    return out


def check_groups(groups: list[WorkloadPlan], problem: Problem, cat: Catalog, where: str) -> None:
    """A plan file's replica groups must belong to the problem: serving workloads it names,
    catalog devices, stages that hold the model's layers in order, sane counts and rates."""
    by_name = {w.name: w for w in problem.workloads}
    if not any(g.kind == "inference" for g in groups):
        raise InputError(f"{where}: the plan has no serving replicas to simulate")
    for i, g in enumerate(groups):
        at = f"{where}: workloads[{i}] (`{g.name}`)"
        w = by_name.get(g.name)
        if w is None:
            names = ", ".join(by_name)
            raise InputError(f"{at}: the problem has no workload of that name ({names})")
        if g.kind != "inference":
            continue
        if not isinstance(w, InferenceWorkload):
            raise InputError(f"{at}: the problem's workload `{g.name}` is not a serving one")
        for s in g.stages:
            if s.device not in cat.accelerators:
                raise InputError(
                    f"{at}: unknown device `{s.device}` (planner catalog list devices)"
                )
        layers = cat.model(w.model).num_layers
        first = 0
        for s in g.stages:
            if s.layers[0] != first or s.layers[1] < s.layers[0]:
                raise InputError(f"{at}: stage layers must run on from layer {first}")
            first = s.layers[1] + 1
        if first != layers:
            raise InputError(f"{at}: the stages hold {first} layers; the model has {layers}")
        if g.replicas > 1_000_000 or g.batch > 1_000_000:
            raise InputError(f"{at}: replicas and batch must be at most 1,000,000")
        if any(not 0 <= r <= 1e7 for r in g.requests_per_s.values()):
            raise InputError(f"{at}: requests_per_s must be between 0 and 10,000,000")
        if w.request_mix is not None:
            classes = {c.name for c in w.request_mix}
            unknown = sorted(set(g.requests_per_s) - classes)
            if unknown:
                raise InputError(f"{at}: unknown request class `{unknown[0]}`")
