"""Design enumeration gives the same designs however many times it ran before in the process:
a session (sweeps, explanations, the web server, the single-type comparison of a request mix)
solves many variants of a problem, and rate searches are remembered between them. A search
that had ended and was resumed used to bisect on and find another rate, so a second
enumeration of problems/request-mix.yaml kept 531 designs where the first kept 502."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.serving import LoadedLatency, RateSearch
from planner.load import load_problem
from planner.model.tables import build_tables


@pytest.mark.parametrize("name", ["request-mix", "p95-latency-70b"])
def test_enumerating_twice_gives_the_same_designs(name: str) -> None:
    cat = load_catalog()
    problem = load_problem(Path("problems") / f"{name}.yaml")
    first = build_tables(problem, cat)
    for _ in range(2):
        again = build_tables(problem, cat)
        assert again.designs == first.designs
        assert again.serves == first.serves
        assert again.sized_for == first.sized_for


def test_a_resumed_search_that_had_ended_keeps_its_rate() -> None:
    def latency(rate: float) -> LoadedLatency:
        return rate  # type: ignore[return-value]  # the ceiling below reads it as a number

    def under(lat: LoadedLatency) -> bool:
        return float(lat) <= 140.58  # type: ignore[arg-type]

    fresh = RateSearch(latency, ceiling=under, capacity=1000.0)
    rate = fresh.finish()
    resumed = RateSearch(latency, ceiling=under, capacity=1000.0)
    resumed.resume(fresh.state)
    assert resumed.done and resumed.finish() == rate
    # A search stopped part-way goes on as if it had never stopped.
    part = RateSearch(latency, ceiling=under, capacity=1000.0)
    for _ in range(5):
        part.step()
    later = RateSearch(latency, ceiling=under, capacity=1000.0)
    later.resume(part.state)
    assert later.finish() == rate
