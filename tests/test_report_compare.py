"""Comparing two plans: every figure against hand arithmetic, the sentences, tables and JSON."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from planner.cli import app
from planner.load import load_problem
from planner.plan.types import DeviceLine, NodeLine, Plan, WorkloadPlan
from planner.report.compare import (
    MISSING,
    Comparison,
    MetricRow,
    compare_plans,
    comparison_dict,
    comparison_tables,
)
from planner.solve import solve_problem

PROBLEMS_DIR = Path(__file__).resolve().parent.parent / "problems"


def design(name: str, **kw: Any) -> WorkloadPlan:
    base: dict[str, Any] = {
        "name": name,
        "kind": "inference",
        "model": "llama-3.1-70b",
        "replicas": 1,
        "batch": 64,
        "stages": (),
        "tokens_per_s": 1000.0,
        "ms_per_token": 50.0,
        "ttft_s": 0.5,
        "finish_hours": None,
        "power_w": 1000.0,
        "tokens_per_joule_at_capacity": 1.0,
        "usd_per_million_tokens_at_capacity": 1.0,
    }
    return WorkloadPlan(**(base | kw))


def plan_a() -> dict[str, Any]:
    return Plan(
        problem="chat",
        status="OPTIMAL",
        objective_name="min_cost",
        objective=662_000.0,
        bound=662_000.0,
        solve_seconds=1.0,
        devices=[
            DeviceLine("h100-sxm", 8, 0, 8, 25_000.0, 200_000.0),
            DeviceLine("l40s", 2, 0, 2, 8_000.0, 16_000.0),
        ],
        nodes=[NodeLine("hgx-h100-8", "h100-sxm", 1, 100_000.0, 100_000.0, 8)],
        capex_usd=500_000.0,
        opex_usd_per_year=54_000.0,
        tco_usd=662_000.0,
        power_w=10_000.0,
        wall_power_w=13_000.0,
        rack_units=10,
        workloads=[
            design(
                "chat",
                replicas=2,
                tokens_per_s=4000.0,
                ms_per_token=45.0,
                ttft_s=0.5,
                power_w=8000.0,
                tokens_per_joule_at_capacity=0.5,
                usd_per_million_tokens_at_capacity=1.2,
            )
        ],
        binding_constraints=["budget"],
    ).to_dict()


def plan_b() -> dict[str, Any]:
    """Two designs serve `chat`; h100s are gone, mi300x are new, l40s go from 2 to 4."""
    return Plan(
        problem="chat-power",
        status="OPTIMAL",
        objective_name="min_cost",
        objective=541_600.0,
        bound=541_600.0,
        solve_seconds=1.0,
        devices=[
            DeviceLine("mi300x", 12, 0, 12, 17_500.0, 210_000.0),
            DeviceLine("l40s", 4, 0, 4, 8_000.0, 32_000.0),
        ],
        nodes=[NodeLine("oam-mi300x-8", "mi300x", 2, 55_000.0, 110_000.0, 8)],
        capex_usd=400_000.0,
        opex_usd_per_year=47_200.0,
        tco_usd=541_600.0,
        power_w=9_000.0,
        wall_power_w=11_700.0,
        rack_units=16,
        workloads=[
            design(
                "chat",
                replicas=2,
                tokens_per_s=3000.0,
                ms_per_token=38.2,
                ttft_s=0.4,
                power_w=5000.0,
                usd_per_million_tokens_at_capacity=1.0,
            ),
            design(
                "chat",
                replicas=1,
                tokens_per_s=1000.0,
                ms_per_token=36.0,
                ttft_s=0.6,
                power_w=1000.0,
                usd_per_million_tokens_at_capacity=2.0,
            ),
        ],
        binding_constraints=["power"],
    ).to_dict()


def infeasible() -> dict[str, Any]:
    return Plan(
        problem="chat-tight",
        status="INFEASIBLE",
        objective_name="min_cost",
        objective=None,
        bound=None,
        solve_seconds=0.1,
        notes=["budget too small"],
    ).to_dict()


def rows_of(c: Comparison) -> dict[str, MetricRow]:
    return {r.metric: r for r in c.metrics}


def rendered(c: Comparison) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for t in comparison_tables(c):
        console.print(t)
    return out.getvalue()


# ------------------------------------------------------------------------------------------------
# Hand-built plans
# ------------------------------------------------------------------------------------------------


def test_plan_figures() -> None:
    c = compare_plans(plan_a(), plan_b())
    r = rows_of(c)
    # 541,600 - 662,000 = -120,400; -120,400 / 662,000 = -18.187 %
    assert r["tco_usd"].change == pytest.approx(-120_400)
    assert r["tco_usd"].change_pct == pytest.approx(-18.1873, abs=1e-4)
    assert r["capex_usd"].change == pytest.approx(-100_000)
    assert r["capex_usd"].change_pct == pytest.approx(-20.0)
    # 11,700 - 13,000 = -1,300 W, -10 %
    assert r["wall_power_w"].change == pytest.approx(-1_300)
    assert r["wall_power_w"].change_pct == pytest.approx(-10.0)
    # 8 + 2 = 10 devices -> 12 + 4 = 16: +6, +60 %
    assert (r["devices"].a, r["devices"].b, r["devices"].change) == (10, 16, 6)
    assert r["devices"].change_pct == pytest.approx(60.0)
    assert (r["rack_units"].a, r["rack_units"].b) == (10, 16)


def test_device_and_host_counts() -> None:
    c = compare_plans(plan_a(), plan_b())
    assert [(d.type, d.a, d.b, d.change) for d in c.devices] == [
        ("h100-sxm", 8, 0, -8),
        ("l40s", 2, 4, 2),
        ("mi300x", 0, 12, 12),
    ]
    assert [(n.type, n.a, n.b, n.change) for n in c.nodes] == [
        ("hgx-h100-8", 1, 0, -1),
        ("oam-mi300x-8", 0, 2, 2),
    ]


def test_workload_over_several_designs() -> None:
    (w,) = compare_plans(plan_a(), plan_b()).workloads
    r = {row.metric: row for row in w.rows}
    assert w.name == "chat" and w.kind == "inference"
    assert (r["replicas"].a, r["replicas"].b) == (2, 3)  # 2 + 1
    assert (r["tokens_per_s"].a, r["tokens_per_s"].b) == (4000, 4000)  # 3000 + 1000
    assert r["tokens_per_s"].change == 0 and r["tokens_per_s"].change_pct == 0
    assert (r["ms_per_token"].a, r["ms_per_token"].b) == (45.0, 38.2)  # the slower design
    assert r["ms_per_token"].change == pytest.approx(-6.8)
    assert r["ttft_s"].b == 0.6
    assert r["power_w"].b == 6000  # 5000 + 1000
    assert r["tokens_per_joule"].a == pytest.approx(0.5)  # 4000 / 8000
    assert r["tokens_per_joule"].b == pytest.approx(4000 / 6000)
    # token-weighted: (1.0 * 3000 + 2.0 * 1000) / 4000 = 1.25
    assert r["usd_per_million_tokens"].b == pytest.approx(1.25)
    assert "finish_hours" not in r  # neither plan has one


def test_summary_sentences() -> None:
    c = compare_plans(plan_a(), plan_b())
    assert c.summary == (
        "B costs $120,400 less (-18.2 %)",
        "B draws 1,300 W less at the wall (-10.0 %)",
        "B drops 8x h100-sxm, adds 12x mi300x and has 2 more l40s (2 -> 4)",
        "chat: ms/token 45.0 -> 38.2, first token (s) 0.50 -> 0.60, "
        "tokens/J at capacity (devices) 0.500 -> 0.667, "
        "$/M tokens at capacity 1.2000 -> 1.2500",
        "binding constraints: budget -> power",
    )


def test_labels_and_reverse() -> None:
    c = compare_plans(plan_b(), plan_a(), label_a="power cap", label_b="base")
    assert c.summary[0] == "base costs $120,400 more (+22.2 %)"  # 120,400 / 541,600 = 22.23 %
    text = rendered(c)
    assert "power cap" in text and "base" in text


def test_same_plan() -> None:
    c = compare_plans(plan_a(), plan_a())
    assert all(r.change == 0 for r in c.metrics)
    assert c.summary == ("B costs the same as A ($662,000)", "same devices")


def test_tables() -> None:
    text = rendered(compare_plans(plan_a(), plan_b()))
    for expected in (
        "what changed",
        "$662,000",
        "$541,600",
        "-$120,400",
        "-18.2 %",
        "13,000 W",
        "-1,300 W",
        "hgx-h100-8 (host)",
        "workload chat (inference)",
        "+60.0 %",
        "budget",
    ):
        assert expected in text, expected


def test_without_a_result() -> None:
    c = compare_plans(plan_a(), infeasible())
    assert all(r.b is None and r.change is None and r.change_pct is None for r in c.metrics)
    assert [(d.type, d.a, d.b, d.change) for d in c.devices] == [
        ("h100-sxm", 8, None, None),
        ("l40s", 2, None, None),
    ]
    (w,) = c.workloads
    assert all(r.b is None for r in w.rows)
    assert c.summary == ("B has no plan (INFEASIBLE); A is OPTIMAL",)
    text = rendered(c)
    assert "INFEASIBLE" in text and MISSING in text

    both = compare_plans(infeasible(), infeasible())
    assert both.summary == ("neither has a plan (A: INFEASIBLE, B: INFEASIBLE)",)
    assert both.devices == () and both.workloads == ()
    assert "INFEASIBLE" in rendered(both)


def test_dict_is_json() -> None:
    c = compare_plans(plan_a(), infeasible())
    d = comparison_dict(c)
    assert json.loads(json.dumps(d)) == d
    tco = next(r for r in d["metrics"] if r["metric"] == "tco_usd")
    assert tco == {
        "metric": "tco_usd",
        "label": "total cost",
        "a": 662_000.0,
        "b": None,
        "change": None,
        "change_pct": None,
    }
    assert d["summary"] == list(c.summary)
    assert d["status_b"] == "INFEASIBLE"


def test_change_pct_from_zero() -> None:
    a = plan_a() | {"capex_usd": 0.0}
    r = rows_of(compare_plans(a, plan_b()))["capex_usd"]
    assert r.change == 400_000 and r.change_pct is None  # no percentage of nothing


# ------------------------------------------------------------------------------------------------
# Real plans
# ------------------------------------------------------------------------------------------------


@cache
def real_plans() -> tuple[dict[str, Any], dict[str, Any]]:
    """chat-70b as written, and with its cheapest device (in the golden plan) excluded."""
    problem = load_problem(PROBLEMS_DIR / "chat-70b.yaml")
    base = solve_problem(problem, workers=1, seed=0).to_dict()
    first = base["devices"][0]["type"]
    excluded = [*problem.constraints.excluded_devices, first]
    variant = problem.model_copy(
        update={
            "constraints": problem.constraints.model_copy(update={"excluded_devices": excluded})
        }
    )
    return base, solve_problem(variant, workers=1, seed=0).to_dict()


def test_real_plans() -> None:
    a, b = real_plans()
    assert a["status"] == b["status"] == "OPTIMAL"
    c = compare_plans(a, b)
    r = rows_of(c)
    for key in ("tco_usd", "capex_usd", "wall_power_w"):
        assert r[key].a == a[key] and r[key].b == b[key]
        assert r[key].change == pytest.approx(b[key] - a[key])
    assert (r["tco_usd"].change or 0) > 0  # excluding the cheapest choice cannot make it cheaper
    gone = a["devices"][0]["type"]
    counts = {d.type: d for d in c.devices}
    assert counts[gone].b == 0 and counts[gone].change == -a["devices"][0]["count"]
    assert any(s.startswith("B costs $") and "more" in s for s in c.summary)
    assert any(f"drops {a['devices'][0]['count']}x {gone}" in s for s in c.summary)
    (w,) = c.workloads
    tokens = next(x for x in w.rows if x.metric == "tokens_per_s")
    assert tokens.a == pytest.approx(sum(x["tokens_per_s"] for x in a["workloads"]))
    assert tokens.b == pytest.approx(sum(x["tokens_per_s"] for x in b["workloads"]))


def test_force_device_typo_is_an_unknown_device() -> None:
    """`--force-device nosuch` once exited 0 with "only nosuch has no plan (INFEASIBLE)"."""
    chat = str(Path(__file__).resolve().parent.parent / "problems" / "chat-70b.yaml")
    result = CliRunner().invoke(app, ["compare", chat, "--force-device", "h100-sxn"])
    assert result.exit_code == 2, result.output
    assert "--force-device: unknown device `h100-sxn`; did you mean `h100-sxm`" in result.output
