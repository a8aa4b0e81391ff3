"""One fleet over time: workloads in phases run one after another on the same devices, so the
fleet is sized for the largest phase rather than their sum; the verifier recounts each phase."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError, InternalError
from planner.load import load_problem
from planner.plan.types import Plan
from planner.solve import solve_problem
from planner.verify import verify

PROBLEM = Path(__file__).parent.parent / "problems" / "train-then-serve-13b.yaml"
H = 3 * 8760  # three years, hours


def solved(path: Path = PROBLEM, *sets: str) -> Plan:
    plan = solve_problem(load_problem(path, list(sets)), time_limit=60)
    assert plan.status == "OPTIMAL", plan.notes
    return plan


def at_once(tmp_path: Path) -> Path:
    """The same problem without its phases: training and serving at the same time."""
    text = PROBLEM.read_text()
    head, _, tail = text.partition("phases:\n")
    path = tmp_path / "at-once.yaml"
    path.write_text(head + tail.split("\n", 2)[2])
    return path


def test_one_fleet_trains_then_serves(tmp_path: Path) -> None:
    plan = solved()
    train, serve = plan.phases
    assert (train.name, train.workloads, serve.workloads) == ("train", ["pretrain"], ["chat"])
    # The training phase lasts its deadline (two weeks = 336 h); serving has the rest.
    assert train.hours == pytest.approx(336) and serve.hours == pytest.approx(H - 336)
    (period,) = plan.periods
    assert period.hours == pytest.approx((H - 336) * 0.6)  # 60 % utilization of what is left
    # The fleet holds the larger phase, not the sum of both.
    for line in plan.devices:
        need = max(ph.devices.get(line.type, 0) for ph in plan.phases)
        assert line.owned + line.bought == need
    both = solved(at_once(tmp_path))
    assert not both.phases
    held = sum(x.bought for x in plan.devices)
    assert held < sum(x.bought for x in both.devices)
    assert plan.tco_usd < both.tco_usd


def test_the_verifier_finds_a_device_booked_twice() -> None:
    problem = load_problem(PROBLEM)
    plan = solve_problem(problem, time_limit=60)
    train, serve = plan.phases
    # Claim the training phase ran on more devices than the fleet holds.
    more = {d: n + 1 for d, n in train.devices.items()}
    bad = dataclasses.replace(plan, phases=[dataclasses.replace(train, devices=more), serve])
    with pytest.raises(InternalError, match=r"phases\.0\.devices"):
        verify(bad, problem, load_catalog())
    gone = dataclasses.replace(plan, phases=[serve])
    with pytest.raises(InternalError, match="phases"):
        verify(gone, problem, load_catalog())


PHASES = "phases:\n  - {name: train, workloads: [pretrain]}\n  - {name: serve, workloads: [chat]}\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "workloads: [chat]}",
            "workloads: [chatt]}",
            r"phases\[1\].workloads\[0\]: unknown workload `chatt`",
        ),
        (
            "workloads: [pretrain]}",
            "workloads: [pretrain, chat]}",
            r"phases\[0\].workloads\[1\]: `chat` is an inference workload",
        ),
        (
            "workloads: [chat]}",
            "workloads: [chat, pretrain]}",
            r"phases\[1\].workloads\[1\]: workload `pretrain` is in phase `train`",
        ),
        (
            "  - {name: serve, workloads: [chat]}",
            "  - {name: serve, workloads: [pretrain]}",
            r"workload `pretrain` is in phase",
        ),
        (
            "    deadline_hours: 2 weeks\n",
            "",
            r"phases\[0\].workloads\[0\]: training `pretrain` has no deadline_hours",
        ),
        (
            "deadline_hours: 2 weeks",
            "deadline_hours: 4 years",
            r"phases: the phases before the last take 35,040 h",
        ),
    ],
)
def test_bad_phases_are_located_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = PROBLEM.read_text()
    assert PHASES in text and old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=message):
        load_problem(path)
    result = CliRunner().invoke(app, ["solve", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_phases_need_buying() -> None:
    result = CliRunner().invoke(app, ["solve", str(PROBLEM), "--set", "horizon.procurement=rent"])
    assert result.exit_code == 2
    assert "phases share the devices on premises" in result.output
