"""Request mixes: replica designs per request class and the requests/s each serves.

A request-mix workload serves `requests_per_s` requests whose lengths follow a histogram of
classes (input and output tokens, share). Designs are enumerated per class as a fixed-rate
workload whose sequences hold input + output tokens and whose prompts are the class's input. A
replica sized for class c can also serve any class k that fits it (input_k <= input_c and
input_k + output_k <= input_c + output_c): its memory holds the shorter sequences and its latency
figures only improve.

Requests/s one replica sustains for class k: replica_rate (continuous batching with chunked
prefill, planner.estimator.serving): S engines of b slots finish b / (output_k x iteration_k)
requests/s each at full load, the iteration at class k's token mix (b decodes and b x input_k /
output_k prompt tokens) and class c's context; the plan uses at most `max_utilization` of it,
less where a latency ceiling at `latency_percentile` holds only at a lower rate. Sequences in
flight follow from the rate by Little's law, so no separate concurrency constraint is needed. A
replica's load is the sum over classes of rate / capacity <= 1 (shares of its time).

A measured capacity (requests/s per replica from benchmarking a serving engine) is
authoritative: it applies to every single-stage replica of that device and tensor-parallel
degree, whatever class sized it, and to that class only; classes with and without measurements
mix freely.

Pruning (exact for every objective a request mix may have, all of which rise with devices and
power): design B goes when m >= 1 replicas of another design A use no more of each device type
and no more power than one replica of B yet serve at least B's requests/s of every class
(m x rate_A >= rate_B). Any plan with B then has a plan no worse without it, so B is never
needed; m = 1 is ordinary dominance, m > 1 catches deep pipelines that m lone stages outrun.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.designs import Design, inference_designs
from planner.estimator.efficiency import load_serving
from planner.estimator.replica import IterationTime, StageSpec
from planner.estimator.serving import LoadedLatency, chunk_mix, max_rate, prefill_prompt
from planner.schema.catalog import Accelerator, Link
from planner.schema.problem import InferenceWorkload, Problem, RequestClass


def class_workload(w: InferenceWorkload, k: int) -> InferenceWorkload:
    """The fixed-rate workload a design for class `k` of `w` is sized by."""
    assert w.request_mix is not None
    c = w.request_mix[k]
    return w.model_copy(
        update={
            "context_tokens": c.input_tokens + c.output_tokens,
            "prompt_tokens": c.input_tokens,
            "output_tokens": c.output_tokens,
            "concurrency": None,  # every batch level is a candidate
            # First-token and end-to-end ceilings hold under the mix's load (replica_rate),
            # not at a full batch: no design is dropped for them beforehand.
            "max_ttft_s": None,
            "max_e2e_s": None,
            "min_tokens_per_s": 0.0,
            "request_mix": None,
            "requests_per_s": None,
            "capacity": [],
        }
    )


def fits(small: RequestClass, big: RequestClass) -> bool:
    """Whether a replica sized for `big` can serve requests of `small`."""
    return small.input_tokens <= big.input_tokens and (
        small.input_tokens + small.output_tokens <= big.input_tokens + big.output_tokens
    )


def replica_rate(
    w: InferenceWorkload,
    cat: Catalog,
    link: Link,
    batch: int,
    stages: list[StageSpec],
    sized_for: RequestClass,
    serve: RequestClass,
) -> float:
    """Requests/s of class `serve` one replica sustains: its S engines of `batch` slots each
    finish batch / (output tokens x iteration) requests/s at full load (Little's law), the
    iteration being the serving model's at the class's token mix and the sized class's context
    (planner.estimator.serving); the plan uses at most `max_utilization` of that, and less when
    a latency ceiling at `latency_percentile` is met only at a lower rate (the queueing
    approximation of planner.estimator.serving.open_latency)."""
    it = IterationTime(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=batch,
        context=sized_for.input_tokens + sized_for.output_tokens,
        prompt=prefill_prompt(serve.input_tokens, w.prefix_cache_hit),
        output=serve.output_tokens,
        stages=stages,
        link=link,
    )
    P, out = prefill_prompt(serve.input_tokens, w.prefix_cache_hit), serve.output_tokens
    c, f = chunk_mix(batch, P, out, batch * P / out)
    full = batch / (out * ((1.0 - f) * it(batch, 0.0) + f * it(batch, c)))  # one engine
    pct = w.latency_percentile

    k = 1.0 + load_serving().latency_margin  # the queueing model's measured deviation

    def meets(lat: LoadedLatency) -> bool:
        return (
            (w.max_ttft_s is None or lat.ttft_s[pct] * k <= w.max_ttft_s)
            and (w.max_e2e_s is None or lat.e2e_s[pct] * k <= w.max_e2e_s)
            and (w.max_ms_per_token is None or lat.tpot_s * 1e3 * k <= w.max_ms_per_token)
        )

    rate = max_rate(
        it, slots=batch, prompt=P, output=out, ceiling=meets, capacity=w.max_utilization * full
    )
    return rate * len(stages)


def measured_rate(w: InferenceWorkload, d: Design, k: int) -> float | None:
    """The measured requests/s for class `k` on design `d`, when the problem gives one."""
    if len(d.stages) != 1 or w.request_mix is None:
        return None
    st = d.stages[0]
    name = w.request_mix[k].name
    for m in w.capacity:
        if m.device == st.device and m.tp == st.tp and m.request_class == name:
            return m.requests_per_s
    return None


def mix_designs(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool,
    where: str = "",
) -> tuple[list[Design], list[dict[int, float]], list[int]]:
    """Designs for every class of `w`, the requests/s each serves per class it fits, and the
    class each was sized for."""
    assert w.request_mix is not None
    classes = w.request_mix
    designs: list[Design] = []
    serves: list[dict[int, float]] = []
    sized: list[int] = []
    for c_i, cls in enumerate(classes):
        sub = class_workload(w, c_i)
        found = inference_designs(sub, problem, cat, devs, prune=prune, for_mix=True)
        measured = [m for m in w.capacity if m.request_class == cls.name]
        if measured and prune:
            # A measured replica may be one pruning dropped (dominated by the estimate); it
            # must stay a candidate, so its single-stage designs come from the full list.
            every = inference_designs(sub, problem, cat, devs, prune=False)
            named = {(m.device, m.tp) for m in measured}
            seen = set(map(id, found))
            found = found + [
                d
                for d in every
                if len(d.stages) == 1
                and (d.stages[0].device, d.stages[0].tp) in named
                and id(d) not in seen
            ]
        keep = list(found)
        for m_i, m in enumerate(measured):
            single = [
                d
                for d in found
                if len(d.stages) == 1 and (d.stages[0].device, d.stages[0].tp) == (m.device, m.tp)
            ]
            if not single:
                raise InputError(
                    f"{where}workload `{w.name}`: the measured capacity of {m.device} x{m.tp} for "
                    f"class `{cls.name}` (capacity entry {m_i + 1} of that class) has no matching "
                    f"replica: by the estimator the model does not fit one stage of {m.tp} "
                    f"{m.device} at {cls.input_tokens + cls.output_tokens:,} tokens, or the "
                    "device is not allowed; check the entry or the constraints"
                )
            best = max(single, key=lambda d: d.batch)
            keep = [d for d in keep if d is best or d not in single]
        link = cat.link(problem.constraints.network)
        for d in keep:
            rates = {}
            specs = [StageSpec(cat.accelerator(s.device), s.tp, s.layers) for s in d.stages]
            for k, other in enumerate(classes):
                known = measured_rate(w, d, k)
                if known is not None:  # a measurement stands for the engine on that hardware
                    rates[k] = known
                elif fits(other, cls):
                    rate = replica_rate(w, cat, link, d.batch, specs, cls, other)
                    if rate > 0:
                        rates[k] = rate
            if c_i not in rates:
                continue  # no load of its own class meets the ceilings
            designs.append(d)
            serves.append(rates)
            sized.append(c_i)
    if prune and designs:
        keep = undominated(designs, serves).tolist()
        designs = [designs[i] for i in keep]
        serves = [serves[i] for i in keep]
        sized = [sized[i] for i in keep]
    return designs, serves, sized


def undominated(designs: list[Design], serves: list[dict[int, float]]) -> npt.NDArray[np.int64]:
    """Indices, in order, of the designs no multiple of another design beats (module docstring);
    of identical ones the first stays.

    Rows go by rising power, then devices, then falling rates: whatever beats a row comes before
    it. Each row is tried against the rows kept so far only, since a row beaten by a dropped one
    is beaten by whatever dropped it (m1 copies of m2 copies).
    """
    types = sorted({x for d in designs for x in d.devices})
    n = len(designs)
    use = np.array(
        [[d.devices.get(x, 0) for x in types] + [d.power_w] for d in designs], dtype=np.float64
    )
    classes = 1 + max((k for s in serves for k in s), default=0)
    rate = np.zeros((n, classes))
    for j, s in enumerate(serves):
        for k, r in s.items():
            rate[j, k] = r
    order = np.lexsort([np.arange(n), -rate.sum(axis=1), use[:, :-1].sum(axis=1), use[:, -1]])
    held = use > 0
    inv = np.where(held, 1.0 / np.where(held, use, 1.0), 0.0)
    kept = np.zeros(n, dtype=np.int64)
    count = 0
    for j in order.tolist():
        if count:
            at = kept[:count]
            # Replicas of each kept design that fit in one of j: the tightest of its columns.
            ratio = np.where(held[at], use[j] * inv[at], np.inf).min(axis=1)
            copies = np.floor(ratio * (1 + 1e-12))
            if np.any((copies >= 1) & np.all(copies[:, None] * rate[at] >= rate[j], axis=1)):
                continue
        kept[count] = j
        count += 1
    return np.sort(kept[:count])
