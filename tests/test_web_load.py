"""A burst on loopback: of 50 requests sent at once to a server that runs 2 solves and queues
none, exactly 2 are solved and the other 48 are refused at once with 429 and a Retry-After,
while the health check keeps answering. Bounded in count (50) and time (each request 120 s)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

import httpx
from web_server import running

from planner.web.service import ServeConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "problems"
BURST = 50
SOLVES = 2
# tokens-per-joule-10kw takes seconds to prove (a few more than a one-size fleet), so the two
# admitted solves are still running while the whole burst arrives.
SLOW = "tokens-per-joule-10kw"


@pytest.mark.slow
def test_a_burst_is_solved_up_to_the_limit_and_refused_beyond() -> None:
    cfg = ServeConfig(examples_dir=EXAMPLES, max_solves=SOLVES, queue=0, time_limit=90)
    with running(cfg) as url:
        start = threading.Barrier(BURST + 1)
        done = threading.Event()
        health: list[tuple[int, float]] = []

        # One client with a connection per request, so the burst is not slowed by setting up
        # clients.
        client = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=BURST + 5))

        def one(_: int) -> httpx.Response:
            start.wait()
            return client.post(f"{url}/api/solve", json={"example": SLOW})

        def watch() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                r = httpx.get(f"{url}/health", timeout=10)
                health.append((r.status_code, time.monotonic() - t0))
                time.sleep(0.1)

        with ThreadPoolExecutor(BURST) as pool:
            futures = [pool.submit(one, i) for i in range(BURST)]
            start.wait()
            watcher = threading.Thread(target=watch)
            watcher.start()
            answers = [f.result() for f in futures]
            done.set()
            watcher.join()
        client.close()
    solved = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code in (429, 503)]
    assert len(solved) == SOLVES, [r.status_code for r in answers]
    assert len(refused) == BURST - SOLVES
    assert all(r.json()["has_plan"] for r in solved)  # a verified plan (optimal given time)
    for r in refused:
        assert int(r.headers["Retry-After"]) >= 1
        assert "retry in" in r.json()["error"]
    assert health and all(code == 200 for code, _ in health)
    assert max(seconds for _, seconds in health) < 5  # answered while the solves ran
