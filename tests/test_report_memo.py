"""`solve --format md|csv|yaml`: the purchase memo, the CSV tables and YAML, read back."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parent.parent
CHAT = str(ROOT / "problems" / "chat-70b.yaml")


def _solve(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["solve", *args, "--no-timings"])
    return r.exit_code, r.stdout


def test_memo_csv_yaml_agree_with_json() -> None:
    code, text = _solve(CHAT, "--format", "json")
    assert code == 0
    plan = json.loads(text)
    device = plan["devices"][0]

    code, memo = _solve(CHAT, "--format", "md")
    assert code == 0
    for heading in ("**Decision:**", "## Bill of materials", "## Costs over the horizon"):
        assert heading in memo
    assert "## Assumptions" in memo and "## Confidence" in memo
    assert f"{device['count']} x {device['type']}" in memo
    assert f"${plan['tco_usd']:,.0f}" in memo

    code, table = _solve(CHAT, "--format", "csv")
    assert code == 0
    bom, workloads = table.split("\n\n")
    rows = list(csv.DictReader(io.StringIO(bom)))
    assert rows[0]["item"] == device["type"] and int(rows[0]["count"]) == device["count"]
    wl = list(csv.DictReader(io.StringIO(workloads)))
    assert [r["workload"] for r in wl] == [w["name"] for w in plan["workloads"]]

    code, text = _solve(CHAT, "--format", "yaml")
    assert code == 0
    assert yaml.safe_load(text) == json.loads(json.dumps(plan))


def test_memo_of_an_infeasible_problem_says_why() -> None:
    code, memo = _solve(str(ROOT / "problems" / "infeasible.yaml"), "--format", "md")
    assert code == 3
    assert "**Decision:** no plan (INFEASIBLE)" in memo
    assert "\n- " in memo  # the reasons


def test_tables_fit_the_terminal_and_pipes_get_a_fixed_width() -> None:
    from planner.cli import PIPE_WIDTH, table_width

    assert table_width(True, 100) == 100
    assert table_width(True, 10) == 40  # narrower than any table can wrap to
    assert table_width(False, 100) == PIPE_WIDTH
