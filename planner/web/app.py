"""The web explorer: one page (plain HTML and a script, no build step) and a small JSON API on
the answers of planner/web/service.py. Solves run in worker threads behind the gate of
planner/web/limits.py; the page, the health check and every refusal are answered on the event
loop, so the server keeps answering under a burst.

Needs the `web` extra (FastAPI, uvicorn); the command line imports this module only for
`planner serve`."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response

from planner.errors import InputError, PlannerError
from planner.web import service
from planner.web.limits import BodyLimit, Busy, Gate
from planner.web.service import ChartRequest, OutOfTime, ProblemRequest, ServeConfig

T = TypeVar("T")

# The page loads nothing from elsewhere and runs only its own script; charts are images.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _asset(name: str) -> str:
    return (resources.files("planner.web") / name).read_text(encoding="utf-8")


def create_app(cfg: ServeConfig) -> FastAPI:
    """The app for one server: its limits, its examples, its models folder."""
    app = FastAPI(title="planner", docs_url=None, redoc_url=None, openapi_url=None)
    gate = Gate(cfg.max_solves, cfg.queue, cfg.queue_wait_s, cfg.retry_after_s)
    app.state.gate = gate
    app.state.config = cfg
    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes)  # nothing reads a larger body
    examples = service.example_list(cfg)
    page, script, style = _asset("page.html"), _asset("page.js"), _asset("page.css")

    async def solving(fn: Callable[[], T]) -> T:
        async with gate.slot():
            return await anyio.to_thread.run_sync(fn)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers=PAGE_HEADERS)

    @app.get("/page.js")
    async def page_js() -> Response:
        return Response(script, media_type="text/javascript", headers=PAGE_HEADERS)

    @app.get("/page.css")
    async def page_css() -> Response:
        return Response(style, media_type="text/css", headers=PAGE_HEADERS)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", **gate.stats()}

    @app.get("/api/examples")
    async def list_examples() -> list[dict[str, str]]:
        return examples

    @app.post("/api/inspect")
    async def inspect(req: ProblemRequest) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(lambda: service.inspect(cfg, req))

    @app.post("/api/solve")
    async def solve(req: ProblemRequest) -> dict[str, Any]:
        return await solving(lambda: service.solve(cfg, req))

    @app.post("/api/explain")
    async def explain(req: ProblemRequest) -> dict[str, Any]:
        return await solving(lambda: service.explain(cfg, req))

    @app.post("/api/chart")
    async def chart(req: ChartRequest) -> Response:
        svg = await solving(lambda: service.chart(cfg, req))
        return Response(
            svg, media_type="image/svg+xml", headers={"X-Content-Type-Options": "nosniff"}
        )

    _errors(app)
    return app


def _errors(app: FastAPI) -> None:
    """Bad input gets the command line's located message (422), a full server 429 or 503 with
    Retry-After, and a planner bug 500 with its message; never a traceback."""

    @app.exception_handler(InputError)
    async def input_error(_: Request, e: InputError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=422)

    @app.exception_handler(OutOfTime)
    async def out_of_time(_: Request, e: OutOfTime) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=503)

    @app.exception_handler(PlannerError)
    async def planner_error(_: Request, e: PlannerError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=500)

    @app.exception_handler(Busy)
    async def busy(_: Request, e: Busy) -> JSONResponse:
        return JSONResponse(
            {"error": str(e), "retry_after_s": e.retry_after},
            status_code=e.status,
            headers={"Retry-After": str(e.retry_after)},
        )

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, e: RequestValidationError) -> JSONResponse:
        lines = []
        for err in e.errors()[:10]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            lines.append(f"request: {where or 'body'}: {err.get('msg', 'invalid')}")
        return JSONResponse({"error": "\n".join(lines)}, status_code=422)
