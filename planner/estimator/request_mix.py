"""Request mixes: replica designs per request class and the requests/s each serves.

A request-mix workload serves `requests_per_s` requests whose lengths follow a histogram of
classes (input and output tokens, share). Designs are enumerated per class as a fixed-rate
workload whose sequences hold input + output tokens and whose prompts are the class's input. A
replica sized for class c can also serve any class k that fits it (input_k <= input_c and
input_k + output_k <= input_c + output_c): its memory holds the shorter sequences and its latency
figures only improve.

Requests/s one replica sustains for class k (continuous batching; prefill and decode share the
replica's time, so their times add):

    rate = 1 / (output_k / decode_tokens_per_s + input_k x ttft_c / input_c)

with decode throughput and time to first token from the design sized for class c (both at class
c's longer context, so the rate is conservative for shorter classes). Each request holds one
sequence for output_k x ms_per_token, so by Little's law the replica's batch x stages sequences
are exactly enough at that rate: no separate concurrency constraint is needed. A measured
capacity (requests/s per replica from benchmarking a serving engine) replaces the estimate for a
single-stage replica of that device and tensor-parallel degree, for that class; that replica is
the estimator's largest batch that fits. A replica of that device and degree sized for a longer
class serves the measured class at no more than the measured rate.

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
from planner.estimator.designs import BATCH_LEVELS, Design, inference_designs
from planner.schema.catalog import Accelerator
from planner.schema.problem import InferenceWorkload, Problem, RequestClass


def class_workload(w: InferenceWorkload, k: int) -> InferenceWorkload:
    """The fixed-rate workload a design for class `k` of `w` is sized by."""
    assert w.request_mix is not None
    c = w.request_mix[k]
    return w.model_copy(
        update={
            "context_tokens": c.input_tokens + c.output_tokens,
            "prompt_tokens": c.input_tokens,
            "concurrency": max(BATCH_LEVELS),  # every batch level is a candidate
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
    tokens_per_s: float, ttft_s: float, sized_for: RequestClass, serve: RequestClass
) -> float:
    """Requests/s of class `serve` one replica sustains (formula in the module docstring)."""
    seconds = serve.output_tokens / tokens_per_s + serve.input_tokens * ttft_s / max(
        1, sized_for.input_tokens
    )
    return 1.0 / seconds


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
        for d in keep:
            rates = {}
            for k, other in enumerate(classes):
                if not fits(other, cls):
                    continue
                rate = replica_rate(d.tokens_per_s, d.ttft_s, cls, other)
                known = measured_rate(w, d, k)
                if known is not None:
                    rates[k] = known if k == c_i else min(rate, known)
                else:
                    rates[k] = rate
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
