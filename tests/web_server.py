"""A real `planner serve` app under uvicorn for the load and browser tests: bound to 127.0.0.1
on a free port, in a thread of the test process, stopped when the test ends or, should the
test hang, by a watchdog after `lifetime_s`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from planner.web.app import create_app
from planner.web.service import ServeConfig


@contextmanager
def running(cfg: ServeConfig, lifetime_s: float = 300.0) -> Iterator[str]:
    """The base URL of a server answering with `cfg`, for the length of the `with` block."""
    config = uvicorn.Config(
        create_app(cfg), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    watchdog = threading.Timer(lifetime_s, lambda: setattr(server, "should_exit", True))
    watchdog.daemon = True
    thread.start()
    watchdog.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        assert host == "127.0.0.1"
        yield f"http://{host}:{port}"
    finally:
        watchdog.cancel()
        server.should_exit = True
        thread.join(timeout=30)
