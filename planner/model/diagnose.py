"""Why a problem has no plan: a sentence with numbers when no replica design exists, and the
constraint families whose removal (one at a time) admits a plan."""

from __future__ import annotations

from planner.catalog import Catalog
from planner.estimator.designs import allowed_devices, tp_degrees
from planner.estimator.formats import weight_format
from planner.estimator.memory import weight_bytes
from planner.model.cpsat import PlannerModel
from planner.model.tables import Tables
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload


def why_no_design(w: InferenceWorkload | TrainingWorkload, problem: Problem, cat: Catalog) -> str:
    """A sentence with numbers: why no replica configuration exists for `w`."""
    m = cat.model(w.model)
    devs = allowed_devices(problem, cat)
    if not devs:
        return f"workload `{w.name}`: no allowed device has a price and a host in the catalog"
    c = problem.constraints
    biggest = max(devs, key=lambda d: d.memory.bytes)
    usable = biggest.memory.bytes * (1 - c.memory_headroom)
    fmt = weight_format(w.weights if isinstance(w, InferenceWorkload) else "bf16")
    need = weight_bytes(m, fmt)
    tp = max(tp_degrees(biggest, cat, problem, m) or [1])
    most = usable * c.max_stages * tp
    text = (
        f"workload `{w.name}`: {m.name} needs {need / 1e9:,.0f} GB of weights alone "
        f"({fmt.id}); the largest allowed device, {biggest.id}, offers {usable / 1e9:,.0f} GB usable"
    )
    if need > most:
        return text + (
            f", and at most {c.max_stages} stages x {tp}-way tensor "
            f"parallelism hold {most / 1e9:,.0f} GB: raise constraints.max_stages, allow larger "
            "devices or use a smaller format"
        )
    return text + (
        "; no configuration meets both memory (with the KV cache or training state) and the "
        "latency or deadline ceilings: relax the ceiling, the context length or the concurrency"
    )


def blocking_constraints(tables: Tables, *, time_limit: float, seed: int) -> list[str]:
    """Which single constraint family, switched off, makes the problem feasible."""
    probe = PlannerModel(tables)
    names = sorted(probe.named)
    freed = []
    for name in names:
        trial = PlannerModel(tables)
        sol = trial.solve(
            time_limit=time_limit / max(1, len(names)),
            workers=1,
            seed=seed,
            relax=frozenset({name}),
        )
        if sol.status in ("OPTIMAL", "FEASIBLE"):
            freed.append(name)
    if not freed:
        return [
            f"no single constraint explains it: several limits block together ({', '.join(names)})"
        ]
    return [f"infeasible because of `{n}`: without it a plan exists" for n in freed]
