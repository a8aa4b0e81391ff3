"""Random perturbations of the numeric fields of every example plan (as `planner solve
--no-timings` writes it) are either still consistent or rejected by the verifier with the
perturbed figure named by its path in the plan file.

A figure counts as named when a failure names its path, or the path of the table of numbers it
sits in (`workloads.0.stages.0.layers` for `...layers.1`, `workloads.0.requests_per_s` for one
class's rate): changing one entry of such a table shows as the table no longer adding up."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_docs import PROBLEMS, get_path, solved_doc

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.plan.io import dumps_plan, parse_plan_text, plan_from_data
from planner.verify_plan import plan_failures

EXAMPLES = sorted(p.stem for p in PROBLEMS.glob("*.yaml") if p.stem != "infeasible")
# Not figures of the plan: the time the solve took (left out by --no-timings; a solve's timing
# cannot be recomputed) and the header.
UNCHECKED = {"solve_seconds", "format_version"}


def numeric_paths(doc: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k != "problem_document":
                out += numeric_paths(v, f"{prefix}{k}.")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += numeric_paths(v, f"{prefix}{i}.")
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        out.append(prefix[:-1])
    return [p for p in out if p not in UNCHECKED]


def _names(doc: dict[str, Any], path: str) -> list[str]:
    """`path` and, when its container is a table of numbers, the container's path."""
    out = [path]
    node, _ = get_path(doc, path)
    values = node.values() if isinstance(node, dict) else node
    if "." in path and all(isinstance(v, int | float) for v in values):
        out.append(path.rsplit(".", 1)[0])
    return out


def test_every_example_has_a_plan_to_perturb() -> None:
    assert len(EXAMPLES) >= 15
    for name in EXAMPLES:
        assert (
            plan_failures(plan_from_data(json.loads(solved_doc(name)), name), load_catalog()) == []
        ), name


FACTORS = [0.0, 0.5, 0.9, 0.999, 1.001, 1.1, 2.0, 10.0]


@pytest.mark.parametrize("example", EXAMPLES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pick=st.integers(min_value=0, max_value=100_000), factor=st.sampled_from(FACTORS))
def test_perturbed_figures_are_consistent_or_rejected_naming_them(
    example: str, pick: int, factor: float
) -> None:
    doc = json.loads(solved_doc(example))
    paths = numeric_paths(doc)
    path = paths[pick % len(paths)]
    names = _names(doc, path)
    node, key = get_path(doc, path)
    before = node[key]
    after = before * factor if isinstance(before, float) else round(before * factor)
    if after == before:
        return
    node[key] = after
    if path == "bound" and doc["status"] != "OPTIMAL":
        return  # a solver's bound short of a proof is its claim, not a figure of the plan
    try:
        pf = plan_from_data(parse_plan_text(dumps_plan(doc), example), example)
    except InputError:  # the schema refused it, with a located message
        return
    found = plan_failures(pf, load_catalog())
    assert found, f"{example}: {path} {before} -> {after} unnoticed"
    assert any(f"`{n}`" in f for f in found for n in names), (
        f"{example}: {path} {before} -> {after} rejected without naming it: {found}"
    )
