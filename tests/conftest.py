"""Fixtures shared by test files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
