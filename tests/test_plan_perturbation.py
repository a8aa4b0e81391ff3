"""Random perturbations of the numeric fields of every example plan (as `planner solve
--no-timings` writes it) are either still consistent or rejected by the verifier with the
perturbed figure named by its path in the plan file.

A figure counts as named when a failure names its path, or the path of the table of numbers it
sits in (`workloads.0.stages.0.layers` for `...layers.1`, `workloads.0.requests_per_s` for one
class's rate): changing one entry of such a table shows as the table no longer adding up.

One perturbation leaves a plan that is still a plan: a request-mix group's requests/s of a
class is an allocation of demand to replica time, and the replicas' time comes in steps that
leave the classes served a little over their demand and the groups a little spare time. Under a
min_cost goal, lowering one group's rate within that slack (every side of every period still
serves the class's demand), or raising it by at most a tenth, is another valid allocation when
the verifier finds it feasible; lowering it past the demand, or raising it past the group's
time, is rejected as before."""

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
from planner.schema.problem import Problem
from planner.verify_plan import plan_failures
from planner.verify_workloads import REL_TOL

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


def _reallocated_within_slack(doc: dict[str, Any], path: str, before: float, after: float) -> bool:
    """Under a min_cost goal, a request-mix group's requests/s of a class raised by at most a
    tenth (more requests on a group with spare replica time: the verifier checks the time, and
    a group raised past it is rejected, see the tests below), or lowered with the class's demand
    still served on each side (whole-request groups count for prefill and decode) in the
    group's period: a valid allocation, not an inconsistent figure."""
    parts = path.split(".")
    if len(parts) != 4 or parts[0] != "workloads" or parts[2] != "requests_per_s":
        return False
    problem = Problem.model_validate(doc["problem_document"])
    if problem.objective.goal != "min_cost":
        return False  # a throughput goal counts every request served: another figure
    if after > before:
        return after <= 1.1 * before
    if after < 0:
        return False
    group = doc["workloads"][int(parts[1])]
    w = next(x for x in problem.workloads if x.name == group["name"])
    mix = getattr(w, "request_mix", None)
    if mix is None:
        return False
    share = next(c.share for c in mix if c.name == parts[3])
    scale = 1.0
    if problem.demand is not None:
        periods = [p for p in problem.demand.periods or [] if p.name == group.get("period")]
        if not periods:
            return False
        scale = periods[0].scale
    need = (w.requests_per_s or 0.0) * share * scale
    same = [
        x
        for x in doc["workloads"]
        if x["name"] == group["name"] and x.get("period") == group.get("period")
    ]
    for side in ("prefill", "decode"):
        mine = [x for x in same if x.get("role") in ("both", side)]
        got = sum((x.get("requests_per_s") or {}).get(parts[3], 0.0) for x in mine)
        if got < need * (1 - 1e-4):  # the verifier's tolerance on demand
            return False
    return True


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
    if abs(after - before) <= REL_TOL * max(1.0, abs(before), abs(after)):
        return  # within the tolerance the verifier states (a slack of 0.0008 x 0.999)
    node[key] = after
    if path == "bound" and doc["status"] != "OPTIMAL":
        return  # a solver's bound short of a proof is its claim, not a figure of the plan
    try:
        pf = plan_from_data(parse_plan_text(dumps_plan(doc), example), example)
    except InputError:  # the schema refused it, with a located message
        return
    found = plan_failures(pf, load_catalog())
    if not found and _reallocated_within_slack(doc, path, before, after):
        return  # still a plan: see the module's docstring
    assert found, f"{example}: {path} {before} -> {after} unnoticed"
    assert any(f"`{n}`" in f for f in found for n in names), (
        f"{example}: {path} {before} -> {after} rejected without naming it: {found}"
    )


def _failures(doc: dict[str, Any]) -> list[str]:
    return plan_failures(plan_from_data(parse_plan_text(dumps_plan(doc), "x"), "x"), load_catalog())


def _chat_slack(doc: dict[str, Any]) -> tuple[str, float, float]:
    """The path of the request-mix example's busiest chat group, its rate, and the chat
    requests/s its groups serve over the demand."""
    groups = [
        (i, x) for i, x in enumerate(doc["workloads"]) if "chat" in (x["requests_per_s"] or {})
    ]
    at, busiest = max(groups, key=lambda g: g[1]["requests_per_s"]["chat"])
    w = doc["problem_document"]["workloads"][0]
    share = next(c["share"] for c in w["request_mix"] if c["name"] == "chat")
    need = float(w["requests_per_s"]) * float(share)
    served = sum(x["requests_per_s"]["chat"] for _, x in groups)
    return f"workloads.{at}.requests_per_s.chat", busiest["requests_per_s"]["chat"], served - need


@pytest.mark.parametrize(("lowered_by", "noticed"), [(0.5, False), (2.0, True)])
def test_a_request_mix_allocation_within_its_slack_is_still_a_plan(
    lowered_by: float, noticed: bool
) -> None:
    """The request-mix example serves its chat requests a little over demand (its groups' time
    comes in steps): its busiest chat group's rate lowered by half that slack still serves the
    demand, a valid allocation; lowered by twice the slack, the demand is short (a finding)."""
    doc = json.loads(solved_doc("request-mix"))
    path, before, slack = _chat_slack(doc)
    assert 0 < 2 * slack < before
    after = before - lowered_by * slack
    node, key = get_path(doc, path)
    node[key] = after
    found = _failures(doc)
    assert bool(found) == noticed, found
    assert _reallocated_within_slack(doc, path, before, after) == (not noticed)


def test_a_request_mix_group_serving_more_than_its_time_is_rejected() -> None:
    """Raised to twice its rate, the busiest chat group needs more replica time than it has."""
    doc = json.loads(solved_doc("request-mix"))
    path, before, _ = _chat_slack(doc)
    node, key = get_path(doc, path)
    node[key] = 2 * before
    found = _failures(doc)
    assert any(f"`{path.rsplit('.', 1)[0]}`" in f for f in found), found
