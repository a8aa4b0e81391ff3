"""The model's input tables, built in exactly one place (`build_tables`): the enumerated designs
of every workload, device economics, training job costs, demand periods and request-mix rates.
Frozen: the model, the plan builder and the what-if questions all read the same tables."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from planner.catalog import Catalog
from planner.estimator.confidence import design_confidence, kept_share
from planner.estimator.designs import (
    Design,
    PerDevice,
    allowed_devices,
    inference_designs,
)
from planner.estimator.economics import (
    DeviceEconomics,
    Period,
    billed_hours,
    demand_periods,
    device_economics,
    energy_usd_per_watt_hour,
    in_fleet,
    job_rate,
    peak_scale,
    rented_devices,
)
from planner.estimator.fork_share import side_by_side
from planner.estimator.hosts import with_machines
from planner.estimator.mix_enumeration import mix_designs
from planner.estimator.network import network_link
from planner.estimator.training_designs import training_designs
from planner.model.scale import RATE_SCALE, SHARE_STEPS, to_int
from planner.schema.catalog import Link
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload


@dataclass(frozen=True)
class Tables:
    """Everything the model needs, computed by the estimator beforehand."""

    problem: Problem
    designs: dict[str, list[Design]]  # workload -> designs
    econ: dict[str, DeviceEconomics]  # device id -> economics
    training_cost: dict[tuple[str, int], float]  # (workload, design) -> energy or rent of a job
    tuned: bool  # pruned designs, tight replica domains, a heuristic hint (off: baseline)
    periods: tuple[Period, ...]  # demand periods (scale > 0)
    # Request-mix workloads: per design, requests/s one replica serves of each class it can hold
    # (class index -> rate), and the class whose lengths size the design.
    serves: dict[str, list[dict[int, float]]]
    sized_for: dict[str, list[int]]
    network: Link | None = None  # the link between hosts (constraints.network)
    # Fixed-rate workloads under a risk margin: per design, the share of its tokens/s the
    # throughput floor counts (planner.estimator.confidence.kept_share).
    kept: dict[str, list[float]] = field(default_factory=dict)


def replicas_needed(w: InferenceWorkload, d: Design, scale: float = 1.0) -> int:
    """Replicas of design `d` alone that hold the workload's sequences (with `concurrency:
    unbounded`, that make its tokens/s). More never help: only sequences that exist make tokens.
    Whether they then make enough is `alone_meets`."""
    if w.concurrency is None:
        need = w.min_tokens_per_s * scale / d.tokens_per_s if w.min_tokens_per_s else 0
        return max(math.ceil(need - 1e-9), 1)
    return max(math.ceil(w.concurrency * scale / d.concurrency - 1e-9), 1)


def alone_meets(w: InferenceWorkload, d: Design, scale: float = 1.0) -> bool:
    """Whether replicas of `d` alone can make the workload's tokens/s from its sequences:
    concurrency x 1,000 / ms per token (Little's law: each sequence makes one token per TPOT)."""
    if w.concurrency is None or not w.min_tokens_per_s:
        return True
    return w.concurrency * 1000.0 / d.ms_per_token >= w.min_tokens_per_s * (1 - 1e-9)


def mix_tokens_per_request(w: InferenceWorkload, tokens: str) -> float:
    """Tokens a request of the mix brings on average: output, or prompt and output (`all`)."""
    assert w.request_mix is not None
    return sum(
        c.share * (c.output_tokens + (c.input_tokens if tokens == "all" else 0))
        for c in w.request_mix
    )


def plain_tokens_factor(w: InferenceWorkload, tokens: str) -> float:
    """Tokens counted per output token of a fixed-rate workload: 1, or 1 + prompt / output
    (`all`: each output token comes with its share of a prompt)."""
    return 1.0 + (w.prompt_tokens / w.output_tokens if tokens == "all" else 0.0)


def class_load(w: InferenceWorkload, k: int, scale: float) -> float:
    """Requests/s of class `k` of a request-mix workload at demand `scale`."""
    assert w.request_mix is not None and w.requests_per_s is not None
    return w.requests_per_s * w.request_mix[k].share * scale


def class_need(w: InferenceWorkload, k: int, scale: float) -> int:
    """Class `k`'s requests at demand `scale` in the request constraint's integers
    (Constraints._mix_demand): milli-requests/s times SHARE_STEPS, rounded up."""
    return to_int(class_load(w, k, scale) * RATE_SCALE * SHARE_STEPS, f"{w.name} requests")


def class_share_steps(w: InferenceWorkload, k: int, scale: float) -> int:
    """Under a throughput goal, class `k`'s part of each served request in the request
    constraint's integers: its share at demand `scale` times SHARE_STEPS, rounded up."""
    assert w.request_mix is not None
    cls = w.request_mix[k]
    return to_int(cls.share * scale * SHARE_STEPS, f"{cls.name}.share")


def served_floor(w: InferenceWorkload) -> int:
    """The least requests/s a request mix serves under a throughput goal, in milli-requests/s
    (the lower end of the model's served variable)."""
    assert w.requests_per_s is not None
    return to_int(w.requests_per_s * RATE_SCALE, "requests_per_s")


def build_tables(
    problem: Problem,
    cat: Catalog,
    *,
    tuned: bool = True,
    designs: dict[str, list[Design]] | None = None,
    deadline: float | None = None,
    processes: int | None = None,
) -> Tables:
    """Designs and economics for every workload. `tuned=False` keeps dominated designs and
    switches off tightening and hints (the baseline the benchmark compares against).
    `designs` reuses an earlier enumeration (valid when `design_key` is unchanged).
    `deadline` (time.monotonic()): a request mix's enumeration stops there (OutOfTime).
    `processes`: how many processes a request mix's enumeration may use (None: as many as
    fork_share.side_by_side allows; the designs are the same for any number)."""
    cat = with_machines(cat, problem)  # the problem's stated machines host its devices
    devs = allowed_devices(problem, cat)
    econ = device_economics(problem, cat, devs)
    serves: dict[str, list[dict[int, float]]] = {}
    sized: dict[str, list[int]] = {}
    fresh = designs is None
    shared = PerDevice()  # what every workload's designs reuse
    designs = {} if designs is None else dict(designs)
    for w in problem.workloads:
        if isinstance(w, InferenceWorkload) and w.request_mix is not None:
            ds, serves[w.name], sized[w.name] = mix_designs(
                w, problem, cat, devs, prune=tuned, deadline=deadline,
                processes=side_by_side() if processes is None else processes,
            )  # fmt: skip
            designs[w.name] = ds
        elif not fresh:
            continue
        elif isinstance(w, InferenceWorkload):
            designs[w.name] = inference_designs(w, problem, cat, devs, prune=tuned, shared=shared)
        else:
            designs[w.name] = training_designs(w, problem, cat, devs, prune=tuned)
    return _tables(problem, cat, designs, serves, sized, tuned=tuned, econ=econ)


def one_type_tables(tables: Tables, dev: str, cat: Catalog) -> Tables | None:
    """The tables of `only_device(tables.problem, dev)` taken from the whole problem's pruned
    tables (None where they are unpruned): its designs are the whole problem's designs on `dev`
    alone, in their order, with their rates. Exact, not an approximation: pruning drops design B
    only for a design A that uses no more of each device type than B (planner.estimator.designs
    and request_mix), so A uses no type B does not, and the designs on `dev` alone that survive
    it are the same whether other types were enumerated beside them; a pipeline mixing types is
    not a design of `dev` alone."""
    if not tables.tuned or tables.problem.machines:
        return None  # a stated machine's node is built from the owned devices in it
    sub = only_device(tables.problem, dev)
    designs: dict[str, list[Design]] = {}
    serves: dict[str, list[dict[int, float]]] = {}
    sized: dict[str, list[int]] = {}
    for name, ds in tables.designs.items():
        at = [i for i, d in enumerate(ds) if set(d.devices) == {dev}]
        designs[name] = [ds[i] for i in at]
        if name in tables.serves:
            serves[name] = [tables.serves[name][i] for i in at]
            sized[name] = [tables.sized_for[name][i] for i in at]
    return _tables(sub, with_machines(cat, sub), designs, serves, sized, tuned=True)


def only_device(problem: Problem, dev: str) -> Problem:
    """The problem with one device type allowed (and only its inventory and measured capacity
    entries kept: an entry for another device names a replica this problem cannot have)."""
    c = problem.constraints
    workloads = [
        w.keeping(lambda m: m.metric != "requests_per_s" or m.device == dev)
        if isinstance(w, InferenceWorkload) and w.capacities
        else w
        for w in problem.workloads
    ]
    return problem.model_copy(
        update={
            "workloads": workloads,
            "constraints": c.model_copy(
                update={
                    "allowed_devices": [dev],
                    "inventory": [o for o in c.inventory if o.device == dev],
                }
            ),
        }
    )


def _tables(
    problem: Problem,
    cat: Catalog,
    designs: dict[str, list[Design]],
    serves: dict[str, list[dict[int, float]]],
    sized: dict[str, list[int]],
    *,
    tuned: bool,
    econ: dict[str, DeviceEconomics] | None = None,
) -> Tables:
    """The tables around enumerated designs (`cat` with the problem's machines): economics,
    training jobs' costs, the kept shares under a risk margin, the demand periods."""
    if econ is None:
        econ = device_economics(problem, cat, allowed_devices(problem, cat))
    training_cost: dict[tuple[str, int], float] = {}
    for w in problem.workloads:
        if isinstance(w, TrainingWorkload):
            for j, d in enumerate(designs[w.name]):
                training_cost[(w.name, j)] = training_job_cost(problem, econ, w, d)
    kept: dict[str, list[float]] = {}
    margin = problem.constraints.risk_margin
    for w in problem.workloads:
        if margin > 0 and isinstance(w, InferenceWorkload) and w.request_mix is None:
            kept[w.name] = [
                kept_share(
                    margin,
                    design_confidence(
                        cat, [cat.accelerator(x) for x in sorted(d.devices)], d.engine, d.batch
                    ).label,
                )
                for d in designs[w.name]
            ]
    return Tables(
        kept=kept,
        problem=problem,
        designs=designs,
        econ=econ,
        training_cost=training_cost,
        tuned=tuned,
        periods=tuple(demand_periods(problem)),
        serves=serves,
        sized_for=sized,
        network=network_link(problem, cat),
    )


def training_job_cost(
    problem: Problem, econ: dict[str, DeviceEconomics], w: TrainingWorkload, d: Design
) -> float:
    """A training job's own cost: its energy on the owned fleet (at PUE), or, when devices
    cannot be bought, on-demand rent for its hours (at least the cloud's minimum billing)."""
    hours = w.token_budget / d.tokens_per_s / 3600
    if in_fleet(w, problem):
        return d.power_w * hours * energy_usd_per_watt_hour(problem)
    return sum(
        rented_devices(n, econ[dev].prices) * (job_rate(econ[dev]) or 0.0) * billed_hours(hours)
        for dev, n in d.devices.items()
    )


# Limits that only bound the fleet: changing them leaves the enumerated designs as they are.
FLEET_LIMITS = {"budget_usd", "capex_usd", "power_w", "max_rack_units", "inventory"}


def design_key(problem: Problem) -> str:
    """Everything design enumeration reads: workloads, the per-replica constraints, which
    devices are owned (they are allowed without a price, in their default host), whether
    prices are bought or rented, the consumer cards' derating, and the busiest demand period's
    scale (pruning under a stated concurrency counts sequences up to the most that exist).
    Where three or more types are owned, also how many of each and whether anything may be
    bought: a pipeline of three or more types holds no more of a type than is owned unless it
    can be bought (planner.estimator.designs._mixed_designs)."""
    c = problem.constraints
    owned = sorted({o.device for o in c.inventory})
    return json.dumps(
        [
            [w.model_dump(mode="json") for w in problem.workloads],
            peak_scale(problem),  # what pruning reads (inference_designs)
            c.model_dump(mode="json", exclude=FLEET_LIMITS),
            owned,
            [sorted((o.device, o.count) for o in c.inventory), c.capex_usd == 0]
            if len(owned) >= 3
            else None,
            problem.horizon.procurement,
            problem.horizon.consumer_derating,  # derated copies of consumer cards
            problem.market.model_dump(mode="json"),
            [s.model_dump(mode="json") for s in problem.links],  # the network's figures
            # Stated machines and which owned devices sit in them: their slots and link bound
            # and time the groups inside them (planner.estimator.hosts).
            [m.model_dump(mode="json") for m in problem.machines],
            sorted((o.device, o.machine or "") for o in c.inventory),
        ],
        sort_keys=True,
    )
