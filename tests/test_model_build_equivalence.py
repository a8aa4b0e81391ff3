"""The CP-SAT model is built fast on large problems (linear sums made in one call, what a design
or a tensor-parallel group allows worked out once, replica keys indexed by workload); these
checks hold the fast build to the model a plain construction gives:

- the whole model (variables with their names and domains, every constraint in order with its
  signs and enforcement, the hint, and each quantity as an objective) is byte for byte the one
  built with `weighted` and `total` replaced by Python's sum() of products, as the model was
  first written (a bare LinearExpr on the left of a comparison would flip its signs);
- each replica variable on premises is held at 0 by exactly the host literals its design's
  stages call for, recomputed here per variable from planner.estimator.hosts;
- the per-workload index of replica keys lists each workload's keys in the order of R (the hint
  and the request-class shares scan it in that order, so ties go as they went).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from bench_scripts import load_script

from planner.catalog import Catalog, load_catalog
from planner.estimator.hosts import holds_group, tp_limit
from planner.load import load_problem
from planner.model import constraints, quantities, variables
from planner.model.cpsat import PlannerModel
from planner.model.quantities import QUANTITIES
from planner.model.tables import Tables, build_tables
from planner.schema.problem import InferenceWorkload
from planner.schema.status import Site

ROOT = Path(__file__).resolve().parent.parent
# Request mixes, training before serving, ratios, several demand periods and the cloud, a
# budget and power, device and carbon caps, owned fleets, network gear.
PROBLEMS = (
    "chat-70b",
    "request-mix",
    "train-then-serve-13b",
    "tokens-per-joule-10kw",
    "cost-per-token-qwen72b",
    "rent-the-peak",
    "infeasible",
    "owners-pool",
    "carbon-cap",
    "max-throughput-500k",
)


GENERATED = ("small-serve", "small-serve-owned")
NAMES = (*PROBLEMS, *GENERATED, "small-serve untuned")


@cache
def _catalog() -> Catalog:
    return load_catalog()


@cache
def _tables(name: str) -> Tables:
    """The tables of case `name`, built once: both models of a comparison are built from the
    same tables (a request mix's designs may differ between two enumerations in one process)."""
    if name in PROBLEMS:
        return build_tables(load_problem(ROOT / "problems" / f"{name}.yaml"), _catalog())
    case = next(c for c in _small_tier() if c.name == name.split()[0])
    return build_tables(case.problem, case.catalog, tuned=not name.endswith("untuned"))


@cache
def _small_tier() -> list[Any]:
    return load_script("benchmarks/generate.py", "bench_generate").tier_cases("small")


def _plain_weighted(vs: list[Any], coeffs: list[int]) -> Any:
    return sum(c * v for v, c in zip(vs, coeffs, strict=True))


def _plain_total(terms: list[Any]) -> Any:
    return sum(terms)


def _model_text(t: Tables) -> str:
    """The model as text, then with each quantity set as its objective in turn."""
    m = PlannerModel(t)
    problem = t.problem
    parts = [str(m.m.proto)]
    for q in QUANTITIES:
        if q == "carbon" and problem.carbon is None:
            continue
        expr = m.quantity(q)
        if isinstance(expr, int):
            parts.append(f"{q}: {expr}")
            continue
        m.m.minimize(expr)
        parts.append(f"{q}: {m.m.proto.objective}")
    parts.append(str(m.m.proto))  # with the variables the peaks added
    return "\n".join(parts)


@pytest.mark.parametrize("name", NAMES)
def test_fast_sums_build_the_plain_model(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _model_text(_tables(name))
    for module in (variables, constraints, quantities):
        monkeypatch.setattr(module, "weighted", _plain_weighted, raising=False)
        monkeypatch.setattr(module, "total", _plain_total, raising=False)
    plain = _model_text(_tables(name))
    assert fast == plain


@pytest.mark.parametrize("name", NAMES)
def test_host_rules_and_key_index_per_replica(name: str) -> None:
    m = PlannerModel(_tables(name))
    problem = m.p
    for w in problem.workloads:
        assert m._workload_keys(w.name) == [k for k in m.R if k.workload == w.name]
    held: dict[int, list[int]] = {}  # R variable -> enforcement literals of its `R == 0`
    r_index = {v.Index() for v in m.R.values()}
    for c in m.m.proto.constraints:
        lin = c.linear
        one = len(c.enforcement_literal) == 1 and len(lin.vars) == 1 and lin.vars[0] in r_index
        if one and list(lin.coeffs) == [1] and list(lin.domain) == [0, 0]:
            held.setdefault(lin.vars[0], []).append(c.enforcement_literal[0])
    for key, r in m.R.items():
        if key.site != Site.PREMISES:
            assert r.Index() not in held
            continue
        serving = isinstance(m._workload(key.workload), InferenceWorkload)
        want = []
        for st in m.t.designs[key.workload][key.design].stages:
            e = m.t.econ[st.device]
            ids = tuple(
                n.id
                for n in e.hosts
                if (
                    holds_group(e.device, n, problem, st.tp, st.dense)
                    if serving
                    else tp_limit(e.device, n, problem.constraints) >= st.tp
                )
            )
            if len(ids) < len(e.hosts):
                want.append(-m._allowed_lits[(st.device, ids)].Index() - 1)
        assert sorted(held.get(r.Index(), [])) == sorted(want), key
