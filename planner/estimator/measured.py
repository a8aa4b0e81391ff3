"""Measured serving capacities (a request mix's `measured:` entries of metric requests_per_s, or
their older spelling, `capacity`): the rate a measured replica serves each class, the replica
kept for each measurement, and the check that a measurement is one hardware can reach. A measurement is authoritative: it stands for the engine on that device
and degree whatever class sized the replica."""

from __future__ import annotations

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.architecture import active_params
from planner.estimator.designs import Design, inference_designs
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.schema.catalog import Accelerator
from planner.schema.measurements import Measurement
from planner.schema.problem import InferenceWorkload, Problem, RequestClass


def measured_classes(w: InferenceWorkload, device: str, tp: int) -> set[str]:
    """The request classes measured on one stage of `tp` x `device` (their rates stand for
    any replica of that device and degree)."""
    return {str(m.request_class) for m in w.capacities if (m.device, m.tp) == (device, tp)}


def measured_rate(w: InferenceWorkload, d: Design, k: int) -> float | None:
    """The measured requests/s for class `k` on design `d`, when the problem gives one."""
    if len(d.stages) != 1 or w.request_mix is None:
        return None
    st = d.stages[0]
    name = w.request_mix[k].name
    for m in w.capacities:
        if m.device == st.device and m.tp == st.tp and m.request_class == name:
            return m.requests_per_s
    return None


def with_measured(
    w: InferenceWorkload,
    c_i: int,
    sub: InferenceWorkload,
    found: list[Design],
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool,
    where: str,
) -> list[Design]:
    """Class c_i's designs (`sub`: the workload sized by it) with a replica for each of its
    measured capacities: the single-stage design of that device and degree with the largest
    batch (taken back where pruning dropped it), the other single-stage designs of it left
    out."""
    assert w.request_mix is not None
    cls = w.request_mix[c_i]
    measured = [m for m in w.capacities if m.request_class == cls.name]
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
                f"class `{cls.name}` (measured requests_per_s entry {m_i + 1} of that class) has no matching "
                f"replica: by the estimator the model does not fit one stage of {m.tp} "
                f"{m.device} at {cls.input_tokens + cls.output_tokens:,} tokens, or the "
                "device is not allowed; check the entry or the constraints"
            )
        best = max(single, key=lambda d: d.batch)
        keep = [d for d in keep if d is best or d not in single]
        _check_measured(w, cls, m, m_i, cat, where)
    return keep


def _check_measured(
    w: InferenceWorkload,
    cls: RequestClass,
    m: Measurement,
    m_i: int,
    cat: Catalog,
    where: str,
) -> None:
    """Refuse a measured rate no hardware could reach: more requests/s than the replica's
    devices compute at their whole dense peak in the weights' format, each request costing
    2 x active parameters FLOPs per token of its answer and of its prompt not found in the
    prefix cache (Kaplan et al. 2020, the forward pass; attention left out, so the bound is
    generous)."""
    acc = cat.accelerator(m.device)
    peak = float(device_table([acc]).peak_flops(weight_format(w.weights))[0]) * m.tp
    computed = cls.input_tokens * (1.0 - w.prefix_cache_hit) + cls.output_tokens
    most = peak / (2.0 * active_params(cat.model(w.model)) * computed)
    if m.requests_per_s > most:
        raise InputError(
            f"{where}workload `{w.name}`: the measured capacity of {m.device} x{m.tp} for "
            f"class `{cls.name}` (measured requests_per_s entry {m_i + 1} of that class) is "
            f"{m.requests_per_s:,.4g} requests/s, {m.requests_per_s / most:,.3f} times what "
            f"those devices compute at their full dense peak ({most:,.4g} requests/s of "
            f"{computed:,.0f} tokens computed each); check the measurement's units "
            "(requests/s of one replica), its class and the workload's weights"
        )
