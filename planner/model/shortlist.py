"""A shortlist of every workload's designs, for problems whose whole design space cannot be
built and searched within the time limit: the model over the shortlist builds in a fraction
of the time, so a verified plan comes back in time, and the whole model is then searched from
that plan when time is left (planner.solve).

Per workload the shortlist keeps, by a rough price of meeting the workload's busiest demand
with the design alone (devices held over the horizon at the cheapest mode the problem allows,
owned devices free, plus the energy at load), and by tokens/s per device, per watt and per
dollar of that price:

- the `keep` best designs on each of those rankings, and
- on each set of device types, the best design on each ranking, so that every device type
  stays in the search and shared limits (power, inventory, devices of a type) can be met with
  another type; for goals other than cost, on each set of device types and counts, so that
  replicas of every size can fill a fleet.

Request-mix designs are ranked per request class (price per request/s of the class); training
jobs by their cost with their devices. The rankings only choose what is searched first: every
figure of a plan comes from the designs themselves, and the plan is verified as any other.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

from planner.estimator.designs import Design
from planner.estimator.economics import (
    DeviceEconomics,
    energy_usd_per_watt_hour,
    horizon_hours,
    ownership_factor,
    peak_scale,
    reserved_hours,
)
from planner.model.tables import Tables, alone_meets, replicas_needed
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload

KEEP = 8  # designs per workload on each ranking (beside the best per set of device types)


def device_usd(e: DeviceEconomics, problem: Problem) -> float:
    """What one device costs over the horizon at the cheapest mode the problem allows: owned
    ones nothing; bought ones with their share of a host and its upkeep; rented ones at the
    rate for the whole horizon (spot divided by its availability)."""
    if e.owned > 0:
        return 0.0
    hours = horizon_hours(problem)
    options = []
    p = e.prices
    if "buy" in e.modes:
        options.append((e.unit_usd + e.node.price_usd / e.slots) * ownership_factor(problem))
    if "on_demand" in e.modes and p.on_demand_usd_per_hour:
        options.append(p.on_demand_usd_per_hour * hours)
    if "reserved" in e.modes and p.reserved_usd_per_hour:
        options.append(p.reserved_usd_per_hour * reserved_hours(problem, p))
    if "spot" in e.modes and p.spot_usd_per_hour:
        avail = max(problem.market.spot_availability, 1e-3)
        options.append(p.spot_usd_per_hour * hours / avail)
    return min(options, default=math.inf)


def shortlist(t: Tables, keep: int = KEEP) -> tuple[Tables, dict[str, list[int]]]:
    """The tables over each workload's shortlisted designs, and per workload the indices of
    those designs among all of its designs (in their original order)."""
    p = t.problem
    per_dev = {dev: device_usd(e, p) for dev, e in t.econ.items()}
    usd_wh = energy_usd_per_watt_hour(p) * horizon_hours(p)
    peak = peak_scale(p)
    picked: dict[str, list[int]] = {}
    for w in p.workloads:
        ds = t.designs[w.name]
        usd = [
            sum(per_dev.get(x, math.inf) * c for x, c in d.devices.items()) + d.power_w * usd_wh
            for d in ds
        ]
        if isinstance(w, TrainingWorkload):
            scores = [[t.training_cost.get((w.name, j), 0.0) + usd[j] for j in range(len(ds))]]
        elif w.request_mix is not None:
            serves = t.serves[w.name]
            scores = [
                [usd[j] / s[k] if k in s else math.inf for j, s in enumerate(serves)]
                for k in range(len(w.request_mix))
            ]
        else:
            scores = _plain_scores(w, ds, usd, peak)
        picked[w.name] = _pick(ds, scores, keep, by_size=p.objective.goal != "min_cost")
    return restricted(t, picked), picked


def _plain_scores(
    w: InferenceWorkload, ds: list[Design], usd: list[float], peak: float
) -> list[list[float]]:
    """Scores of a fixed-rate workload's designs (lower first): the price of meeting its
    busiest demand alone (designs that cannot meet it alone last), tokens/s made per device,
    per watt and per dollar, and with a stated concurrency the time per token (the tokens each
    sequence that exists makes)."""
    price = [
        (0.0 if alone_meets(w, d, peak) else 1e18) + usd[j] * replicas_needed(w, d, peak)
        for j, d in enumerate(ds)
    ]
    made = [_tokens_made(w, d, peak) for d in ds]
    per_device = [-t / sum(d.devices.values()) for t, d in zip(made, ds, strict=True)]
    per_watt = [-t / max(d.power_w, 1e-9) for t, d in zip(made, ds, strict=True)]
    per_usd = [-t / max(u, 1e-9) for t, u in zip(made, usd, strict=True)]
    scores = [price, per_device, per_watt, per_usd]
    if w.concurrency is not None:
        scores.append([d.ms_per_token for d in ds])  # tokens per sequence held: 1,000 / ms
    return scores


def _tokens_made(w: InferenceWorkload, d: Design, peak: float) -> float:
    """Tokens/s one replica of `d` makes for the workload: with a stated concurrency, only the
    sequences that exist make tokens, one per time per token each (Little's law), so a replica
    holding more than the busiest period's sequences makes no more than those."""
    if w.concurrency is None:
        return d.tokens_per_s
    held = min(d.concurrency, w.concurrency * peak)
    return min(d.tokens_per_s, held * 1000.0 / d.ms_per_token)


def _pick(
    ds: list[Design], scores: list[list[float]], keep: int, *, by_size: bool = False
) -> list[int]:
    """The `keep` best on every score, and the best on every score among each set of device
    types (and role), in the designs' own order. `by_size`: among each set of device types
    and counts, so that designs of every size stay (a fleet of given devices is filled by
    replicas of several sizes when throughput, not cost, is the goal)."""
    out: set[int] = set()
    everyone = range(len(ds))
    for score in scores:
        out.update(heapq.nsmallest(keep, everyone, key=lambda j: (score[j], j)))
    groups: dict[tuple[object, ...], list[int]] = {}
    for j, d in enumerate(ds):
        size = tuple(sorted(d.devices.items())) if by_size else ()
        groups.setdefault((d.signature, d.role, size), []).append(j)
    for score in scores:
        for members in groups.values():
            out.add(min(members, key=lambda j: (score[j], j)))
    return sorted(out)


def restricted(t: Tables, picked: dict[str, list[int]]) -> Tables:
    """`t` with each workload's designs cut to `picked` (every per-design table with them)."""
    designs = {w: [t.designs[w][j] for j in idx] for w, idx in picked.items()}
    serves = {w: [s[j] for j in picked[w]] for w, s in t.serves.items()}
    sized = {w: [s[j] for j in picked[w]] for w, s in t.sized_for.items()}
    kept = {w: [s[j] for j in picked[w]] for w, s in t.kept.items()}
    cost = {
        (w, new): t.training_cost[(w, old)]
        for w, idx in picked.items()
        for new, old in enumerate(idx)
        if (w, old) in t.training_cost
    }
    return dataclasses.replace(
        t, designs=designs, serves=serves, sized_for=sized, kept=kept, training_cost=cost
    )


def model_keys(t: Tables) -> int:
    """About how many replica variables the model over `t` has (designs x demand periods x
    sites), which is what its building time grows with."""
    sites = 1 + any(e.cloud for e in t.econ.values())
    n = 0
    for w in t.problem.workloads:
        k = len(t.designs[w.name])
        n += k if isinstance(w, TrainingWorkload) else k * len(t.periods) * sites
    return n
