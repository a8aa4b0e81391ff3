"""The single-type note's tables: a device type's designs taken from the whole problem's pruned
tables are the designs a fresh enumeration of that type alone finds, in the same order, with the
same requests/s per class (planner.model.tables.one_type_tables), so the note's plans are those
it found when it enumerated every type again."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.tables import build_tables, one_type_tables, only_device

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("request-mix.yaml", ()),
        # Disaggregated pools and a latency ceiling: prefill and decode roles are pruned apart.
        ("request-mix.yaml", ("workloads.0.disaggregation=auto",)),
        ("p95-latency-70b.yaml", ()),
        # Three owned types: pipelines mixing them are enumerated, and each type's owned devices
        # are allowed without a price; the whole problem's designs hold both.
        (
            "request-mix.yaml",
            (
                "constraints.inventory=[{device: l4, count: 4}, {device: l40s, count: 2}, "
                "{device: h100-sxm, count: 2}]",
            ),
        ),
    ],
)
def test_one_type_tables_match_a_fresh_enumeration(name: str, overrides: tuple[str, ...]) -> None:
    cat = load_catalog()
    problem = load_problem(PROBLEMS / name, overrides)
    whole = build_tables(problem, cat)
    assert len(whole.econ) >= 2  # several types, so filtering has something to drop
    mixed = [d for ds in whole.designs.values() for d in ds if len(d.devices) > 1]
    for dev in sorted(whole.econ):
        fresh = build_tables(only_device(problem, dev), cat)
        got = one_type_tables(whole, dev, cat)
        assert got is not None
        assert got.problem == fresh.problem
        assert got.designs == fresh.designs, dev
        assert got.serves == fresh.serves, dev
        assert got.sized_for == fresh.sized_for, dev
        assert got.econ == fresh.econ, dev
        assert got.periods == fresh.periods
        assert got.training_cost == fresh.training_cost
        assert got.kept == fresh.kept
    if problem.constraints.inventory:
        assert mixed  # pipelines of several types were there to be left out


def test_unpruned_tables_are_not_filtered() -> None:
    # Without pruning the whole problem's designs are every design; the note enumerates anew.
    cat = load_catalog()
    problem = load_problem(PROBLEMS / "request-mix.yaml")
    whole = build_tables(problem, cat, tuned=False)
    assert one_type_tables(whole, sorted(whole.econ)[0], cat) is None
