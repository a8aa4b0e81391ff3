"""Example plans as plan-file documents (solved once per example, one worker, seed 0), and the
dotted paths the verifier names their fields by."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.plan.io import dumps_plan, plan_document
from planner.plan.types import WorkloadPlan
from planner.solve import solve_problem

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


@cache
def solved_doc(name: str) -> str:
    """The plan file `planner solve problems/NAME.yaml --no-timings --out` writes."""
    problem = load_problem(PROBLEMS / f"{name}.yaml")
    plan = solve_problem(problem, workers=1, seed=0)
    plan.solve_seconds = 0.0
    return dumps_plan(plan_document(plan, problem, load_catalog()))


def get_path(doc: Any, path: str) -> tuple[Any, Any]:
    """The container holding the field at dotted `path`, and its key there."""
    keys: list[Any] = []
    node = doc
    parts = path.split(".")
    for i, k in enumerate(parts):
        key: Any = int(k) if isinstance(node, list) else k
        keys.append(key)
        if i < len(parts) - 1:
            node = node[key]
    return node, keys[-1]


def served_by_side(groups: Iterable[WorkloadPlan]) -> dict[str, dict[str, float]]:
    """Requests/s per class a plan's groups decode (whole-request and decode pools) and prefill
    (whole-request and prefill pools), summed by hand: a request is served once both are done."""
    sides: dict[str, dict[str, float]] = {"decode": {}, "prefill": {}}
    for wp in groups:
        for side, got in sides.items():
            if wp.role in ("both", side):
                for name, rate in wp.requests_per_s.items():
                    got[name] = got.get(name, 0.0) + rate
    return sides
