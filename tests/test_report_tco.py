"""Cost over time: breakdown, cumulative cost by month, buy versus rent, and the `tco` command.

Plans are built by hand with only the fields the report reads; every figure is pinned to the
arithmetic in the comment next to it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from rich.console import Console
from typer.testing import CliRunner

from planner.cli import app
from planner.plan.types import Costs, DeviceLine, NodeLine, Plan
from planner.report.tco import (
    break_even_month,
    buy_cost_at,
    buy_versus_rent,
    chart_series,
    cost_breakdown,
    cumulative_cost,
    milestone_months,
    month_axis,
    plot_tco,
    rent_cost_at,
    rent_lines,
    tco_dict,
    tco_report,
    tco_tables,
)

YEARS = 3.0  # 36 months

# capex 100,000 + training 2,000 at month 0 = 102,000 upfront;
# maintenance 6,000 + energy 9,000 + on-demand rent 18,000 = 33,000 spread over 36 months.
COSTS = Costs(
    capex_usd=100_000.0,
    maintenance_usd=6_000.0,
    energy_usd=9_000.0,
    rent_on_demand_usd=18_000.0,
    training_usd=2_000.0,
    total_usd=135_000.0,
)


def bought_h100(rate: float | None = 3.0) -> DeviceLine:
    """8 bought at $25,000: purchase $200,000; maintenance $12,000 + energy $24,000 over the
    horizon; 120,000 device-hours at work."""
    return DeviceLine(
        type="h100",
        count=8,
        owned=0,
        bought=8,
        unit_price_usd=25_000.0,
        total_usd=200_000.0,
        device_hours={"on-premises": 120_000.0},
        rent_usd_per_hour={} if rate is None else {"on_demand": rate},
        energy_usd=24_000.0,
        maintenance_usd=12_000.0,
        utilization=0.57,
        break_even_utilization=0.25,
    )


def rented_l40s() -> DeviceLine:
    """Up to 4 on demand (10,000 h at $1.20 = $12,000) and 2 spot (5,000 h at $0.40 = $2,000)."""
    return DeviceLine(
        type="l40s",
        count=6,
        owned=0,
        bought=0,
        unit_price_usd=0.0,
        total_usd=0.0,
        on_demand=4,
        spot=2,
        device_hours={"on_demand": 10_000.0, "spot": 5_000.0},
        rent_usd={"on_demand": 12_000.0, "spot": 2_000.0},
        rent_usd_per_hour={"on_demand": 1.2, "spot": 0.4},
    )


def make_plan(
    costs: Costs = COSTS, devices: list[DeviceLine] | None = None, status: str = "OPTIMAL"
) -> Plan:
    return Plan(
        problem="hand",
        status=status,
        objective_name="min_cost",
        objective=costs.total_usd,
        bound=costs.total_usd,
        solve_seconds=0.0,
        devices=devices if devices is not None else [bought_h100(), rented_l40s()],
        costs=costs,
        notes=["note from the solver"],
    )


# ------------------------------------------------------------------------------------------------
# Breakdown and cumulative cost
# ------------------------------------------------------------------------------------------------


def test_breakdown_shares_and_per_year() -> None:
    lines = {line.key: line for line in cost_breakdown(COSTS, YEARS)}
    # capex 100,000 / 135,000 = 74.07 %; per year 100,000 / 3 = 33,333.33
    assert lines["capex_usd"].usd == 100_000
    assert lines["capex_usd"].share == pytest.approx(100_000 / 135_000)
    assert lines["capex_usd"].usd_per_year == pytest.approx(33_333.333333)
    # energy 9,000 / 135,000 = 6.67 %; per year 3,000
    assert lines["energy_usd"].share == pytest.approx(0.0666667, rel=1e-5)
    assert lines["energy_usd"].usd_per_year == pytest.approx(3_000)
    assert lines["rent_spot_usd"].usd == 0 and lines["rent_spot_usd"].share == 0
    assert lines["capex_usd"].upfront and lines["training_usd"].upfront
    assert not lines["rent_on_demand_usd"].upfront
    assert sum(line.share or 0 for line in lines.values()) == pytest.approx(1.0)


def test_breakdown_of_a_free_plan_has_no_shares() -> None:
    assert all(line.share is None for line in cost_breakdown(Costs(), YEARS))


def test_cumulative_cost_simple_example() -> None:
    costs = Costs(capex_usd=100_000.0, energy_usd=9_000.0, total_usd=109_000.0)
    # capex $100,000 at month 0, energy $9,000 over 3 years:
    # month 12 = 100,000 + 9,000 / 3 = 103,000
    assert cumulative_cost(costs, YEARS, 12) == pytest.approx(103_000)
    assert cumulative_cost(costs, YEARS, 0) == pytest.approx(100_000)
    assert cumulative_cost(costs, YEARS, 36) == costs.total_usd


def test_cumulative_cost_by_month() -> None:
    # month 0 = capex 100,000 + training 2,000 = 102,000
    assert cumulative_cost(COSTS, YEARS, 0) == pytest.approx(102_000)
    # month 12 = 102,000 + 33,000 / 3 = 113,000
    assert cumulative_cost(COSTS, YEARS, 12) == pytest.approx(113_000)
    # month 6 = 102,000 + 33,000 * 6 / 36 = 107,500
    assert cumulative_cost(COSTS, YEARS, 6) == pytest.approx(107_500)
    # the horizon's end is the plan's total, exactly
    assert cumulative_cost(COSTS, YEARS, 36) == COSTS.total_usd


def test_end_equals_total_exactly_for_awkward_numbers() -> None:
    costs = Costs(
        capex_usd=0.1,
        maintenance_usd=0.2,
        energy_usd=1 / 3,
        rent_reserved_usd=1e7 / 7,
        rent_spot_usd=math.pi,
        total_usd=0.1 + 0.2 + 1 / 3 + 1e7 / 7 + math.pi,
    )
    for years in (1 / 7, 2.9, 72 / 8760):
        report = tco_report(make_plan(costs, devices=[]), years)
        assert report.cumulative_usd[-1] == costs.total_usd
        assert report.months[-1] == pytest.approx(years * 12)


def test_month_outside_the_horizon_is_a_bug() -> None:
    with pytest.raises(ValueError, match="outside the horizon"):
        cumulative_cost(COSTS, YEARS, 37)
    with pytest.raises(ValueError, match="outside the horizon"):
        cumulative_cost(COSTS, YEARS, -1)


def test_month_axis() -> None:
    assert month_axis(YEARS) == [float(m) for m in range(37)]
    assert month_axis(YEARS, 6) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # 1.125 years = 13.5 months: whole months, then the end
    assert month_axis(1.125)[-2:] == [13.0, 13.5]
    # 72 hours = 72 / 8760 * 12 = 0.0986 months: the start and the end
    assert month_axis(72 / 8760) == [0.0, pytest.approx(0.098630137)]


def test_months_beyond_the_horizon_are_clamped() -> None:
    # Decision: the axis stops at the horizon (nothing is priced after it), with a note saying how
    # to see further, rather than refusing or drawing a flat line that suggests costs stop.
    assert month_axis(YEARS, 60) == month_axis(YEARS)
    assert month_axis(72 / 8760, 1) == month_axis(72 / 8760)
    report = tco_report(make_plan(), YEARS, months=60)
    assert report.months[-1] == 36
    assert report.cumulative_usd[-1] == COSTS.total_usd
    assert report.requested_months == 60
    assert any("60 months" in n and "lifetime_years=5" in n for n in report.notes)
    # Fewer months than the horizon: no note, the axis stops there.
    short = tco_report(make_plan(), YEARS, months=6)
    assert short.months[-1] == 6
    assert short.cumulative_usd[-1] == pytest.approx(107_500)  # as in test_cumulative_cost_by_month
    assert not any("months asked" in n for n in short.notes)


def test_milestones() -> None:
    assert milestone_months(36) == [0, 1, 3, 6, 12, 24, 36]
    assert milestone_months(60) == [0, 1, 3, 6, 12, 24, 36, 48, 60]
    assert milestone_months(13.5) == [0, 1, 3, 6, 12, 13.5]
    assert milestone_months(2) == [0, 1, 2]
    report = tco_report(make_plan(), YEARS)
    ms = {m.month: m for m in report.milestones}
    assert ms[12].cumulative_usd == pytest.approx(113_000)  # 102,000 + 33,000 / 3
    assert ms[12].share == pytest.approx(113_000 / 135_000)
    assert ms[36].cumulative_usd == COSTS.total_usd


def test_lines_not_adding_up_to_the_total_are_noted() -> None:
    costs = Costs(capex_usd=100.0, total_usd=90.0)
    report = tco_report(make_plan(costs, devices=[]), YEARS)
    assert any("add up to $100.00, not the plan's total $90.00" in n for n in report.notes)
    assert report.cumulative_usd[-1] == 90.0


def test_a_plan_without_a_result_has_no_report() -> None:
    with pytest.raises(ValueError, match="INFEASIBLE"):
        tco_report(make_plan(status="INFEASIBLE"), YEARS)


# ------------------------------------------------------------------------------------------------
# Buy versus rent
# ------------------------------------------------------------------------------------------------


def test_break_even_of_two_lines() -> None:
    # buy = 200,000 + 1,000 m, rent = 10,000 m -> 200,000 / 9,000 = 22.22 months
    assert break_even_month(200_000, 1_000, 10_000, 36) == pytest.approx(200_000 / 9_000)
    # rent grows no faster than buy: never
    assert break_even_month(200_000, 1_000, 1_000, 36) is None
    assert break_even_month(0, 1_000, 500, 36) is None
    # nothing to pay upfront and rent grows faster: rent is dearer from the start
    assert break_even_month(0, 1_000, 2_000, 36) == 0
    # crossing after the horizon: not within it
    assert break_even_month(200_000, 1_000, 3_000, 36) is None  # 100 months
    assert break_even_month(72_000, 1_000, 3_000, 36) == pytest.approx(36)  # exactly at the end


def test_buy_versus_rent_of_bought_devices() -> None:
    b = buy_versus_rent(bought_h100(), YEARS)
    assert b is not None
    # buy: 200,000 + (12,000 + 24,000) = 236,000 over the horizon; 1,000 a month after purchase
    assert b.buy_usd == 236_000
    # rent: 120,000 h x $3 = 360,000 over 36 months = 10,000 a month
    assert b.rent_usd == pytest.approx(360_000)
    # break-even: 200,000 / (10,000 - 1,000) = 22.22 months
    assert b.break_even_month == pytest.approx(22.2222222)
    m = b.break_even_month
    assert buy_cost_at(b, YEARS, m) == pytest.approx(rent_cost_at(b, YEARS, m) or 0)
    # 200,000 + 1,000 x 22.22 = 222,222
    assert buy_cost_at(b, YEARS, m) == pytest.approx(222_222.22)
    assert (b.utilization, b.break_even_utilization) == (0.57, 0.25)


def test_cheap_rent_never_breaks_even_within_the_horizon() -> None:
    b = buy_versus_rent(bought_h100(rate=1.0), YEARS)
    assert b is not None
    # rent 120,000 h x $1 = 120,000 -> 3,333 a month; 200,000 / (3,333 - 1,000) = 85.7 > 36
    assert b.rent_usd == pytest.approx(120_000)
    assert b.break_even_month is None


def test_no_on_demand_rate() -> None:
    b = buy_versus_rent(bought_h100(rate=None), YEARS)
    assert b is not None
    assert b.on_demand_usd_per_hour is None and b.rent_usd is None and b.break_even_month is None
    assert rent_cost_at(b, YEARS, 12) is None
    assert b.buy_usd == 236_000  # still known
    report = tco_report(make_plan(devices=[bought_h100(rate=None)]), YEARS)
    assert any("h100" in n and "no on-demand rate" in n for n in report.notes)
    _, series, marks = chart_series(report)
    assert list(series) == ["plan"] and marks == {}
    text = render(report)
    assert "unknown" in text


def test_owned_devices_cost_no_purchase() -> None:
    owned = DeviceLine(
        type="a100",
        count=8,
        owned=8,
        bought=0,
        unit_price_usd=0.0,
        total_usd=0.0,
        device_hours={"on-premises": 40_000.0},
        rent_usd_per_hour={"on_demand": 2.0},
        energy_usd=9_000.0,
    )
    b = buy_versus_rent(owned, YEARS)
    assert b is not None
    # already paid for: energy 9,000 only; rent 40,000 h x $2 = 80,000 is dearer from month 0
    assert b.purchase_usd == 0 and b.buy_usd == 9_000
    assert b.rent_usd == 80_000
    assert b.break_even_month == 0


def test_rented_devices_cost_per_mode() -> None:
    assert buy_versus_rent(rented_l40s(), YEARS) is None
    lines = rent_lines(rented_l40s(), YEARS)
    assert [(r.mode, r.devices, r.device_hours, r.usd_per_hour, r.usd) for r in lines] == [
        ("on_demand", 4, 10_000, 1.2, 12_000),
        ("spot", 2, 5_000, 0.4, 2_000),
    ]
    # per year: 12,000 / 3 = 4,000 and 2,000 / 3 = 666.67
    assert lines[0].usd_per_year == pytest.approx(4_000)
    assert lines[1].usd_per_year == pytest.approx(666.6667)
    assert rent_lines(bought_h100(), YEARS) == []


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def render(report: object) -> str:
    console = Console(record=True, width=240)
    for t in tco_tables(report):  # type: ignore[arg-type]
        console.print(t)
    return console.export_text()


def test_tables() -> None:
    text = render(tco_report(make_plan(), YEARS))
    for expected in (
        "cost over the horizon (3 years)",
        "$135,000",  # total
        "$45,000",  # total per year: 135,000 / 3
        "74.1 %",  # capex share
        "$113,000",  # month 12
        "month 22.2",  # h100 break-even
        "$360,000",  # h100 hours rented on demand
        "rented devices",
        "on demand",
        "$667",  # l40s spot per year: 2,000 / 3
        "kinds of cost at $0 left out",
    ):
        assert expected in text, expected
    assert "rent spot" not in text  # $0 lines are left out of the table
    cheap = render(tco_report(make_plan(devices=[bought_h100(rate=1.0)]), YEARS))
    assert "not within the horizon" in cheap
    assert "rented devices" not in cheap


def test_json_shape() -> None:
    data = json.loads(json.dumps(tco_dict(tco_report(make_plan(), YEARS))))
    assert set(data) == {
        "problem",
        "status",
        "horizon_years",
        "horizon_months",
        "total_usd",
        "total_usd_per_year",
        "breakdown",
        "months",
        "cumulative_usd",
        "milestones",
        "devices",
        "requested_months",
        "notes",
    }
    assert data["total_usd"] == 135_000 and data["horizon_months"] == 36
    assert len(data["months"]) == len(data["cumulative_usd"]) == 37
    assert data["cumulative_usd"][12] == pytest.approx(113_000)
    assert data["cumulative_usd"][-1] == 135_000
    assert data["breakdown"][0] == {
        "key": "capex_usd",
        "label": "capex (devices and hosts bought)",
        "usd": 100_000.0,
        "share": pytest.approx(100_000 / 135_000),
        "usd_per_year": pytest.approx(100_000 / 3),
        "upfront": True,
    }
    assert data["milestones"][0] == {"month": 0.0, "cumulative_usd": 102_000.0, "share": 102 / 135}
    h100, l40s = data["devices"]
    assert h100["device"] == "h100" and h100["rent"] == []
    assert h100["buy"]["break_even_month"] == pytest.approx(200_000 / 9_000)
    assert h100["buy"]["on_demand_usd_per_hour"] == 3.0
    assert l40s["buy"] is None
    assert [r["mode"] for r in l40s["rent"]] == ["on_demand", "spot"]
    assert data["requested_months"] is None and data["notes"] == []

    def numbers_not_strings(v: object) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in ("problem", "status", "key", "label", "device", "mode", "notes"):
                    numbers_not_strings(x)
        elif isinstance(v, list):
            for x in v:
                numbers_not_strings(x)
        else:
            assert v is None or isinstance(v, int | float), v

    numbers_not_strings(data)


def test_chart_series_cross_at_break_even() -> None:
    report = tco_report(make_plan(), YEARS)
    months, series, marks = chart_series(report)
    assert list(series) == ["plan", "plan, h100 hours rented on demand"]
    assert marks == {"h100": pytest.approx(200_000 / 9_000)}
    plan, alt = series["plan"], series["plan, h100 hours rented on demand"]
    # month 0: the plan without the h100 purchase, 102,000 - 200,000 = -98,000
    assert alt[0] - plan[0] == pytest.approx(-200_000)
    # month 36: rent 360,000 instead of buy 236,000 -> 124,000 more
    assert alt[-1] - plan[-1] == pytest.approx(124_000)
    # the gap changes sign between months 22 and 23, where the break-even is
    assert alt[22] < plan[22] and alt[23] > plan[23]
    assert len(months) == len(plan) == len(alt)


def test_break_even_beyond_the_shown_months_is_not_marked() -> None:
    _, _, marks = chart_series(tco_report(make_plan(), YEARS, months=12))
    assert marks == {}


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_written(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"tco{suffix}"
    plot_tco(tco_report(make_plan(), YEARS), path)
    assert path.stat().st_size > 5_000
    if suffix == ".png":
        img = imread(str(path))
        assert img.shape[1] == 800 and img.shape[0] >= 400  # 8 in wide at 100 dpi
        ink = np.any(img[..., :3] < 0.9, axis=-1)
        assert ink.mean() > 0.02
    else:
        text = path.read_text(encoding="utf-8")
        assert "break-even h100: 22.2 months" in text
        assert "plan, h100 hours rented on demand" in text


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------

runner = CliRunner()
CHAT = "problems/chat-70b.yaml"


def fake_solver(monkeypatch: pytest.MonkeyPatch, plan: Plan) -> None:
    """The command with the solver replaced by a plan built by hand (the problem is still read)."""
    import planner.solve

    monkeypatch.setattr(planner.solve, "solve_problem", lambda problem, **kw: plan)


def test_command_reports_the_plan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_solver(monkeypatch, make_plan())
    png = tmp_path / "tco.png"
    r = runner.invoke(app, ["tco", CHAT, "--format", "json", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    # chat-70b.yaml has a 3-year horizon
    assert data["horizon_years"] == 3 and data["cumulative_usd"][-1] == 135_000
    assert imread(str(png)).shape[1] == 800
    r = runner.invoke(app, ["tco", CHAT, "--months", "60"])
    assert r.exit_code == 0, r.output
    assert "$135,000" in r.output and "note: 60 months asked" in r.output


def test_command_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_solver(monkeypatch, make_plan(status="INFEASIBLE"))
    r = runner.invoke(app, ["tco", CHAT])
    assert r.exit_code == 3 and "note from the solver" in r.output
    r = runner.invoke(app, ["tco", CHAT, "--format", "json"])
    assert r.exit_code == 3
    assert json.loads(r.output)["notes"] == ["note from the solver"]
    fake_solver(monkeypatch, make_plan(status="NO_PLAN"))
    r = runner.invoke(app, ["tco", CHAT, "--time-limit", "1"])
    assert r.exit_code == 4


def test_command_refuses_a_bad_chart_name_before_solving(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_solve(problem: object, **kw: object) -> Plan:
        raise AssertionError("solved before checking the chart name")

    import planner.solve

    monkeypatch.setattr(planner.solve, "solve_problem", no_solve)
    r = runner.invoke(app, ["tco", CHAT, "--plot", "tco.gif"])
    assert r.exit_code == 2 and "unknown image format" in r.output


def test_command_solves_chat_70b() -> None:
    r = runner.invoke(app, ["tco", CHAT, "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["status"] in ("OPTIMAL", "FEASIBLE")
    assert data["months"][-1] == 36  # a 3-year horizon
    assert data["total_usd"] > 0
    assert data["cumulative_usd"][-1] == data["total_usd"]
    assert data["devices"]


def test_buy_versus_rent_counts_the_hosts_of_the_devices() -> None:
    # The 8 h100 of bought_h100() in one host bought at $40,000 that draws $6,000 of electricity
    # over the horizon; a host of another device type is not theirs.
    mine = NodeLine("hgx", "h100", 1, 40_000.0, 40_000.0, 8, energy_usd=6_000.0)
    other = NodeLine("pc", "l40s", 1, 5_000.0, 5_000.0, 4, energy_usd=1_000.0)
    b = buy_versus_rent(bought_h100(), YEARS, [mine, other])
    assert b is not None
    # purchase 200,000 + 40,000; running 12,000 + 24,000 + 6,000 = 42,000 (1,166.67 a month)
    assert b.purchase_usd == 240_000 and b.energy_usd == 30_000 and b.buy_usd == 282_000
    # rent 360,000 includes hosting: 10,000 a month; 240,000 / (10,000 - 1,166.67) = 27.17 months
    assert b.break_even_month == pytest.approx(240_000 / (10_000 - 42_000 / 36))
    without = buy_versus_rent(bought_h100(), YEARS)
    assert without is not None and without.break_even_month == pytest.approx(22.2222222)
