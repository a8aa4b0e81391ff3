"""`planner simulate` on hostile traffic: standard JSON only, requests longer than the engines
were launched for refused and counted, disaggregated pools replayed as one chain."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.report.json_text import finite, json_text

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
P95 = str(PROBLEMS / "p95-latency-70b.yaml")
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
