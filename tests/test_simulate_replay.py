"""`planner simulate` on hostile traffic: standard JSON only, requests longer than the engines
were launched for refused and counted, disaggregated pools replayed as one chain."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.load import load_problem
from planner.report.json_text import finite, json_text
from planner.schema.problem import InferenceWorkload
from planner.simulate import simulate_plan
from planner.simulate.groups import admitted
from planner.solve import solve_problem

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
P95 = str(PROBLEMS / "p95-latency-70b.yaml")
P95_PATH = PROBLEMS / "p95-latency-70b.yaml"
runner = CliRunner()


def _strict(text: str) -> Any:
    """JSON as RFC 8259 has it: Infinity and NaN are not numbers there."""

    def refuse(word: str) -> None:
        raise AssertionError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def test_the_json_writer_writes_unbounded_and_undefined_figures_as_null() -> None:
    data = {"a": math.inf, "b": [1.5, -math.inf, (math.nan, 2)], "c": {"d": "inf"}}
    assert finite(data) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": "inf"}}
    assert _strict(json_text(data)) == finite(data)


@pytest.fixture(scope="module")
def p95_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plan = tmp_path_factory.mktemp("p95") / "p95.json"
    res = runner.invoke(app, ["solve", P95, "--no-timings", "--out", str(plan)])
    assert res.exit_code == 0, res.output
    return plan


def _simulate(plan: Path, *extra: str, fmt: str = "json") -> str:
    res = runner.invoke(
        app, ["simulate", str(plan), P95, "--requests", "300", "--format", fmt, *extra]
    )
    assert res.exit_code == 0, res.output
    return res.output


def test_an_overloaded_replay_is_standard_json_and_says_why_figures_are_null(
    p95_plan: Path,
) -> None:
    """Past the plan's capacity the serving model has no steady state: its figures were written
    as `Infinity` (not JSON; jq and JSON.parse refuse the document) and `inf` in the table."""
    over = ("--set", "workloads.assistant.requests_per_s=40")
    out = _strict(_simulate(p95_plan, *over))
    assert out["groups"][0]["model"]["ttft"]["95"] is None
    assert any("no steady state" in n and "null in JSON" in n for n in out["notes"])
    table = _simulate(p95_plan, *over, fmt="table")
    assert "unbounded" in table and " inf " not in table


def test_a_disaggregated_replay_serves_every_request_through_prefill_then_decode() -> None:
    """Each request of a disaggregated plan is prefilled by one prefill engine and then decoded
    by a decode engine, and the fleet makes the output its requests/s ask. The replay fed the
    decode pool its own Poisson stream at the prefill side's scale (the prefill pools' spare
    room shrank it by 10 %: 2,775-3,042 tokens/s of the 3,334 asked) with first tokens drawn
    from other requests, and split --requests over the pools as if they were separate traffic."""
    problem = load_problem(P95_PATH, ["workloads.assistant.disaggregation=on"])
    plan = solve_problem(problem, time_limit=60)
    assert plan.status.has_plan, plan.notes
    rep = simulate_plan(plan.workloads, problem, load_catalog(), requests=4000, seed=1)
    pre = [g for g in rep.groups if g.role == "prefill"]
    dec = [g for g in rep.groups if g.role == "decode"]
    assert pre and dec and all(g.role != "both" for g in rep.groups)
    decoded = sorted(i for g in dec for i in g.result.index)
    prefilled = sorted(i for g in pre for i in g.result.index)
    assert decoded == prefilled == list(range(4000))  # each once through each side
    for g in dec:  # a request's first token is its prefill's, before its last
        assert all(0 < t < e for t, e in zip(g.result.ttft, g.result.e2e, strict=True))
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.requests_per_s and w.request_mix
    asked = w.requests_per_s * sum(c.share * c.output_tokens for c in w.request_mix)
    assert rep.tokens_per_s == pytest.approx(asked, rel=0.05)


def test_throughput_is_measured_over_the_steady_window() -> None:
    """A short replay is not a slow one: the engine starts empty and drains after the last
    arrival, which the whole run's tokens over its seconds counted (2,000 requests of the
    whole-request p95 plan read about 4 % below 50,000)."""
    problem = load_problem(P95_PATH)
    plan = solve_problem(problem, time_limit=60)
    cat = load_catalog()
    short = simulate_plan(plan.workloads, problem, cat, requests=1000, seed=2)
    res = short.groups[0].result
    assert 0 < res.window_seconds < res.seconds
    whole = res.output_tokens / res.seconds
    assert res.tokens_per_s > whole  # ramp-up and drain left out
    long = simulate_plan(plan.workloads, problem, cat, requests=8000, seed=2)
    assert short.tokens_per_s == pytest.approx(long.tokens_per_s, rel=0.06)


LONG = "workloads.assistant.request_mix=[{name: chat, input_tokens: 100000, output_tokens: 200, share: 100%}]"


def test_requests_longer_than_the_engines_admit_are_refused_and_counted(p95_plan: Path) -> None:
    """The plan launches its engines with --max-model-len 1200; 100,000-token prompts were
    replayed as served (and given KV the engines do not have) where a real engine refuses
    them. They are refused, counted in a note, and in no figure."""
    out = _strict(_simulate(p95_plan, "--set", LONG))
    assert out["groups"][0]["requests"] == 0 and out["output_tokens_per_s"] == 0
    assert out["fleet"]["e2e"]["95"] is None
    assert any("300 of the 300 requests" in n and "1,200 tokens" in n for n in out["notes"])
    # Lengths a real engine admits: prompt + output up to its limit, one token more refused.
    w = load_problem(P95_PATH).workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert admitted(w, [0.0, 1.0], [0, 0], 1200) == ([0.0, 1.0], [0, 0], 0)
    assert admitted(w, [0.0, 1.0], [0, 0], 1199) == ([], [], 2)


def test_a_class_the_plan_was_not_solved_for_is_refused(p95_plan: Path) -> None:
    """An added class was replayed as the plan's own (half the traffic 30,000-token prompts,
    replayed as 1,000-token chats that met every target)."""
    added = (
        "workloads.assistant.request_mix=[{name: chat, input_tokens: 1000, output_tokens: 200, "
        "share: 50%}, {name: long, input_tokens: 30000, output_tokens: 200, share: 50%}]"
    )
    res = runner.invoke(app, ["simulate", str(p95_plan), P95, "--set", added])
    assert res.exit_code == 2, res.output
    assert "class `long` is not one the plan was solved for" in res.output
