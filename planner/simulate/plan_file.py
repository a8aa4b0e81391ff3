"""The replica groups of a plan file as a simulation reads them, checked against the problem."""

from __future__ import annotations

import math
from typing import Literal

from planner.catalog import Catalog
from planner.errors import InputError
from planner.plan.types import StageLine, WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem


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
                    _flag(s.get("across_machines", False), f"{at}.stages.across_machines"),
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
                role=_role(x.get("role", "both"), at),
                engine=None if x.get("engine") is None else str(x["engine"]),
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


def _flag(value: object, at: str) -> bool:
    """A true/false field of the plan file."""
    if not isinstance(value, bool):
        raise InputError(f"{at}: {value!r}; expected true or false")
    return value


def _role(value: object, at: str) -> Literal["both", "prefill", "decode"]:
    if value == "both" or value == "prefill" or value == "decode":
        return value
    raise InputError(f"{at}: `role`: one of both, prefill, decode (got {value!r})")


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


# What a fleet is and how fast it runs: a replay may change the traffic (requests/s, the mix,
# concurrency, lengths, latency targets), not these.
FLEET_FIELDS = (
    "model",
    "weights",
    "kv",
    "engine",
    "measured",
    "profiles",
    "capacity",
    "disaggregation",
)


def check_same_fleet(solved: Problem, given: Problem, where: str) -> None:
    """The problem a saved plan is replayed under changes only its traffic: the models, formats,
    engines and measured figures of its serving workloads, the stated machines and links, the
    network and the memory kept free stay those the plan was solved for (they decide what the
    fleet holds and how fast it runs; a plan replayed on others shows figures it never promised)."""
    was = {w.name: w.model_dump(mode="json") for w in solved.workloads}
    for i, w in enumerate(given.workloads):
        if not isinstance(w, InferenceWorkload) or w.name not in was:
            continue
        now = w.model_dump(mode="json")
        _check_classes(w, was[w.name], where, i)
        for key in FLEET_FIELDS:
            if now.get(key) != was[w.name].get(key):
                raise InputError(
                    f"{where}: workloads[{i}].{key} of the given problem is not the one the plan "
                    f"was solved for (`{_short(was[w.name].get(key))}`): a replay may change the "
                    "traffic (requests_per_s, request_mix, concurrency, lengths, latency targets), "
                    "not what the fleet runs; solve the changed problem instead"
                )
    for key in ("machines", "links"):
        if getattr(given, key) != getattr(solved, key):
            raise InputError(
                f"{where}: the given problem's `{key}` are not those the plan was solved for; "
                "replay it under its own (or solve the changed problem)"
            )
    for key in ("network", "memory_headroom", "tensor_parallel_over_pcie"):
        a, b = getattr(given.constraints, key), getattr(solved.constraints, key)
        if a != b:
            raise InputError(
                f"{where}: constraints.{key} of the given problem ({a}) is not the plan's ({b}); "
                "replay it under its own (or solve the changed problem)"
            )
    if given.horizon.consumer_derating != solved.horizon.consumer_derating:
        raise InputError(
            f"{where}: horizon.consumer_derating of the given problem "
            f"({given.horizon.consumer_derating}) is not the plan's "
            f"({solved.horizon.consumer_derating}): it sets the speed of cards in multi-card "
            "hosts; replay it under its own (or solve the changed problem)"
        )


def _check_classes(w: InferenceWorkload, was: dict[str, object], where: str, i: int) -> None:
    """The replay draws requests of the classes the plan's replicas serve: a class the solved
    problem lacked would be replayed as one of those (its shape changed, not its engines'
    work), so it is refused; a class's shape may change, and a request its engines cannot
    admit is then refused by the replay and counted."""
    old_mix = was.get("request_mix")
    known = (
        {str(c["name"]) for c in old_mix if isinstance(c, dict)}
        if isinstance(old_mix, list)
        else set()
    )
    for j, cls in enumerate(w.request_mix or []):
        if cls.name not in known:
            raise InputError(
                f"{where}: workloads[{i}].request_mix[{j}]: class `{cls.name}` is not one the "
                f"plan was solved for ({', '.join(f'`{k}`' for k in sorted(known)) or 'none'}): "
                "a replay changes the traffic of the plan's classes; solve the problem with "
                "the new class instead"
            )


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
