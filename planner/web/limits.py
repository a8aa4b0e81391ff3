"""What keeps the server answering: a bound on the bytes of a request body (413 beyond it) and a
gate that lets a fixed number of solves run, a few more wait, and refuses the rest at once with
429 (or 503 when a waiting request's turn does not come in time), each with a Retry-After.

Both are plain ASGI and asyncio: the health check and the refusals are answered on the event
loop, never behind a solve."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class Busy(Exception):
    """No solve slot for this request: `status` 429 (all slots and the queue full) or 503 (it
    waited its longest), `retry_after` seconds."""

    def __init__(self, status: int, retry_after: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class Gate:
    """At most `running` solves at once and `waiting` more in line; a request beyond them is
    refused at once (429), one that waits `wait_s` without a slot is refused then (503)."""

    def __init__(self, running: int, waiting: int, wait_s: float, retry_after: int) -> None:
        self.limit = running
        self.queue = waiting
        self.wait_s = wait_s
        self.retry_after = retry_after
        self.running = 0
        self.waiting = 0
        self.refused = 0
        self._slots = asyncio.Semaphore(running)

    def stats(self) -> dict[str, int]:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "max_running": self.limit,
            "max_waiting": self.queue,
            "refused": self.refused,
        }

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.running + self.waiting >= self.limit + self.queue:
            self.refused += 1
            raise Busy(
                429,
                self.retry_after,
                f"busy: {self.running} solves running and {self.waiting} waiting; "
                f"retry in {self.retry_after} s",
            )
        self.waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait_s)
        except TimeoutError:
            self.refused += 1
            raise Busy(
                503,
                self.retry_after,
                f"busy: no solve slot came free in {self.wait_s:g} s; retry in "
                f"{self.retry_after} s",
            ) from None
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()


async def send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class BodyLimit:
    """Read each request body up to `max_bytes` before the app sees it; a longer one (by its
    Content-Length or by what arrives) gets 413 and is not read further."""

    def __init__(self, app: App, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = {
            "error": f"request body larger than {self.max_bytes:,} bytes (the server's limit)"
        }
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await send_json(send, 413, too_large)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await send_json(send, 413, too_large)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the disconnect, when the client goes
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)
