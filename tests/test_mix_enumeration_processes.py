"""A request mix's enumeration split across processes (planner.estimator.mix_enumeration:
kinds of designs searched side by side by this process and a forked child) finds the same
designs, rates to the last bit and sized classes as one process, pruned and unpruned, on the
examples and on generated mixes with disaggregated pools; what the child remembered is
remembered here afterwards; the child's answers are taken, not done again here; a child that
dies costs time, not the answer; and a deadline that has passed stops the enumeration with every
child reaped."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from forks import reaped
from mix_problems import generated

from planner.catalog import load_catalog
from planner.estimator import mix_enumeration as me
from planner.estimator import request_mix as rm
from planner.estimator.designs import allowed_devices
from planner.estimator.hosts import with_machines
from planner.load import load_problem
from planner.schema.problem import Problem

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the system does not fork")

ROOT = Path(__file__).resolve().parent.parent

PROBLEMS: list[tuple[str, Any]] = [
    ("p95-latency-70b", lambda: load_problem(ROOT / "problems" / "p95-latency-70b.yaml")),
    ("request-mix", lambda: load_problem(ROOT / "problems" / "request-mix.yaml")),
    ("generated-auto", lambda: generated(["l40s", "rtx-4090"], "llama-3.2-1b", "auto", 20.0)),
]


def _forget() -> None:
    for cache in (rm._RATES, rm._STOPPED, rm._PREFILL, rm._ITERATIONS, rm._GRIDS):
        cache.clear()


def enumerate_mix(problem: Problem, processes: int, *, prune: bool = True) -> Any:
    """mix_designs afresh on `processes` processes: what it returns, by value, and the keys of
    the rates remembered afterwards."""
    _forget()
    cat = with_machines(load_catalog(), problem)
    w = problem.workloads[0]
    designs, serves, sized = me.mix_designs(  # type: ignore[arg-type]
        w, problem, cat, allowed_devices(problem, cat), prune=prune, processes=processes
    )
    found = ([repr(d) for d in designs], [sorted(s.items()) for s in serves], sized)
    return found, sorted(map(repr, rm._RATES)), sorted(v for _, v in rm._RATES.values())


@pytest.mark.parametrize(("name", "make"), PROBLEMS, ids=[n for n, _ in PROBLEMS])
def test_two_processes_find_what_one_finds(name: str, make: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(me, "SHARED_FROM", 2)  # split even a small generated mix
    monkeypatch.setattr(me, "HAND_BACK", True)  # the child's remembered rates come back
    problem = make()
    for prune in (True, False) if name.startswith("generated") else (True,):
        one = enumerate_mix(problem, 1, prune=prune)
        two = enumerate_mix(problem, 2, prune=prune)
        assert one[0][0], name  # designs were found: not a comparison of empty lists
        assert two == one  # designs, rates, sized classes, and every rate remembered


def test_a_child_that_dies_costs_time_not_the_answer(monkeypatch: Any) -> None:
    problem = PROBLEMS[2][1]()
    one = enumerate_mix(problem, 1)
    here = os.getpid()
    real = rm._class_rates

    def dying(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != here:
            os._exit(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(me, "SHARED_FROM", 2)
    monkeypatch.setattr(rm, "_class_rates", dying)
    assert enumerate_mix(problem, 2) == one


def test_a_passed_deadline_stops_every_process(monkeypatch: Any, forked: list[int]) -> None:
    problem = PROBLEMS[0][1]()
    cat = with_machines(load_catalog(), problem)
    monkeypatch.setattr(me, "SHARED_FROM", 2)
    _forget()
    with pytest.raises(me.OutOfTime, match="design searches done"):
        me.mix_designs(  # type: ignore[arg-type]
            problem.workloads[0], problem, cat, allowed_devices(problem, cat),
            prune=True, processes=2, deadline=time.monotonic() + 0.05,
        )  # fmt: skip
    assert reaped(forked)  # no child left running or unreaped


def test_the_childs_answers_are_taken(monkeypatch: Any) -> None:
    """The child's share comes back and is used: this process searches fewer rates than one
    process alone would. (Answers equal to one process's prove nothing about this: a child
    whose answer is dropped, say a Design that no longer pickles, leaves its share to be done
    again here, with the same result.)"""
    monkeypatch.setattr(me, "SHARED_FROM", 2)
    problem = PROBLEMS[1][1]()
    calls = [0]
    real = rm._class_rates

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1  # in this process only: a child counts in its own copy
        return real(*args, **kwargs)

    monkeypatch.setattr(rm, "_class_rates", counted)
    enumerate_mix(problem, 1)
    alone, calls[0] = calls[0], 0
    enumerate_mix(problem, 2)
    assert 0 < calls[0] < alone


def test_a_single_solve_takes_no_remembered_figures_back(monkeypatch: Any) -> None:
    """`planner solve` solves once and ends (HAND_BACK off): the child's designs come back, its
    remembered rates do not."""
    monkeypatch.setattr(me, "SHARED_FROM", 2)
    problem = PROBLEMS[2][1]()
    one = enumerate_mix(problem, 1)
    monkeypatch.setattr(me, "HAND_BACK", False)
    two = enumerate_mix(problem, 2)
    assert two[0] == one[0]  # the same designs, rates and sized classes
    assert set(two[1]) < set(one[1])  # only this process's remembered rates
