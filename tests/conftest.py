"""Fixtures shared by test files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from planner.estimator import fork_share


@pytest.fixture(scope="session")
def dask_cluster() -> Iterator[str]:
    """A two-worker Dask cluster on 127.0.0.1 (processes, one thread and 1 GiB each), closed
    after the tests; its scheduler address."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit="1GiB",
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.fixture
def search_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every full search ends without a plan (as when it runs out of time); only completing
    the starting plan (the hint, its variables fixed) still solves."""
    from planner.model import cpsat
    from planner.model.result import Solution
    from planner.schema.status import Status

    real = cpsat.PlannerModel.solve

    def only_the_hint(self: cpsat.PlannerModel, **kwargs: object) -> Solution:
        if not self.hint_only:
            return Solution(Status.NO_PLAN, None, None, 0.0, {}, {}, {})
        return real(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cpsat.PlannerModel, "solve", only_the_hint)


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The pids of the children fork_share forks while the test runs."""
    pids: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(fork_share.os, "fork", fork)
    yield pids
