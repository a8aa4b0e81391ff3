"""`planner serve`'s API through FastAPI's TestClient: the same answers as the command line,
located messages for bad input, and the safety bounds (body size, no server files, nothing that
runs, a full server refusing with a retry hint)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")

from fastapi.testclient import TestClient
from hostile_cli import LLAMA_CONFIG
from typer.testing import CliRunner

from planner.load import load_problem
from planner.solve import solve_problem
from planner.web.app import create_app
from planner.web.limits import Busy, Gate
from planner.web.service import OutOfTime, RequestSolver, ServeConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "problems"


def problem_text(model: str) -> str:
    """chat-70b with another model (its `model:` key is on line 8, column 5)."""
    text = (EXAMPLES / "chat-70b.yaml").read_text(encoding="utf-8")
    return text.replace("model: llama-3.1-70b", f"model: {model}")


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(ServeConfig(examples_dir=EXAMPLES, time_limit=20))) as c:
        yield c


def test_page_health_and_examples(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and '<script src="/page.js"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/page.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/health").json()["status"] == "ok"
    names = [e["name"] for e in client.get("/api/examples").json()]
    assert "chat-70b" in names and "infeasible" in names


def test_solve_is_the_command_lines_plan(client: TestClient) -> None:
    r = client.post("/api/solve", json={"example": "chat-70b"})
    assert r.status_code == 200
    got = r.json()
    cli = solve_problem(load_problem(EXAMPLES / "chat-70b.yaml"), time_limit=20)
    assert got["status"] == "OPTIMAL" == cli.status
    assert got["plan"]["objective"] == pytest.approx(cli.objective, rel=1e-9)
    assert got["plan"]["problem_sha256"]  # the plan document the CLI writes with --out
    assert got["markdown"].startswith("# Purchase memo: chat-70b")
    assert "proved optimal" in got["confidence"]


def test_overrides_change_the_plan(client: TestClient) -> None:
    base = client.post("/api/solve", json={"example": "chat-70b"}).json()["plan"]
    more = client.post(
        "/api/solve",
        json={"example": "chat-70b", "sets": ["workloads.chat.min_tokens_per_s=8000"]},
    ).json()["plan"]
    assert more["tco_usd"] > base["tco_usd"]
    assert more["summary"]["peak_tokens_per_s"] >= 8000


def test_inspect_offers_the_sliders(client: TestClient) -> None:
    info = client.post("/api/inspect", json={"example": "chat-70b"}).json()
    by_path = {c["path"]: c for c in info["controls"]}
    assert by_path["workloads.chat.max_ms_per_token"]["value"] == 50
    assert by_path["constraints.budget_usd"]["value"] is None
    assert by_path["horizon.utilization"]["value"] == 0.7
    for path in ("constraints.power_w", "horizon.electricity_usd_per_kwh", "market.spot_discount"):
        assert path in by_path
    assert "h100-sxm" in info["devices"]


def test_nothing_fits_and_why_not(client: TestClient) -> None:
    req = {"example": "chat-70b", "sets": ["constraints.budget_usd=1000"]}
    r = client.post("/api/solve", json=req).json()
    assert r["status"] == "INFEASIBLE" and not r["has_plan"]
    ex = client.post("/api/explain", json=req).json()
    assert not ex["feasible"]
    assert any("--set constraints.budget_usd=" in s for s in ex["sentences"])


def test_bad_input_gets_the_located_message(client: TestClient) -> None:
    r = client.post(
        "/api/solve", json={"example": "chat-70b", "sets": ["constraints.budget_usd=abc"]}
    )
    assert r.status_code == 422
    assert r.json()["error"].startswith("--set constraints.budget_usd=abc: constraints.budget_usd")
    r = client.post("/api/solve", json={"problem": "name: x\nworkloads: [\n", "source": "a.yaml"})
    assert r.status_code == 422 and r.json()["error"].startswith("a.yaml:")
    r = client.post("/api/solve", json={"problem": problem_text("llama-3.1-7b")})
    assert r.status_code == 422
    assert r.json()["error"].startswith("uploaded problem:8:5: workloads[0].model: workload `chat`")
    r = client.post("/api/solve", json={"example": "chat-7b"})
    assert r.status_code == 422 and "did you mean `chat-" in r.json()["error"]
    r = client.post(
        "/api/solve", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "error" in r.json()


@pytest.mark.parametrize("model", ["/etc/passwd", "../../../../etc/passwd", "/etc"])
def test_a_problem_cannot_read_server_files(client: TestClient, model: str) -> None:
    for req in (
        {"problem": problem_text(model)},
        {"example": "chat-70b", "sets": [f"workloads.chat.model={model}"]},
    ):
        r = client.post("/api/solve", json=req)
        assert r.status_code == 422, r.text
        assert "is not accepted here" in r.json()["error"]
        assert "root:" not in r.text
    sweep = {"example": "chat-70b", "kind": "sweep", "vary": f"workloads.chat.model={model}"}
    r = client.post("/api/chart", json=sweep)
    assert r.status_code == 422 and "root:" not in r.text
    if ".." not in model:  # `..` reads as a range FROM..TO, refused before any point
        assert "is not accepted here" in r.json()["error"]


def test_requests_name_no_files_or_folders(client: TestClient) -> None:
    for req in (
        {"example": "../problems/chat-70b"},
        {"example": "/etc/passwd"},
        {"problem": problem_text("llama-3.1-8b"), "source": "../../etc/passwd"},
        {"example": "chat-70b", "catalog": "/etc"},  # no overlay by request
        {"example": "chat-70b", "models_dir": "/"},
    ):
        assert client.post("/api/solve", json=req).status_code == 422, req


def test_models_are_confined_to_the_operators_folder(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "llama-3-8b").mkdir(parents=True)
    (models / "llama-3-8b" / "config.json").write_text(json.dumps(LLAMA_CONFIG), encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(LLAMA_CONFIG), encoding="utf-8")
    (models / "link").symlink_to(outside)
    cfg = ServeConfig(examples_dir=EXAMPLES, models_dir=models, time_limit=20)
    with TestClient(create_app(cfg)) as c:
        ok = c.post("/api/solve", json={"problem": problem_text("./llama-3-8b")})
        assert ok.status_code == 200 and ok.json()["has_plan"], ok.text
        for model in (
            "../outside",
            "../outside/config.json",
            "./link",
            "link/config.json",
            str(outside),
            "/etc/passwd",
        ):
            r = c.post("/api/solve", json={"problem": problem_text(model)})
            assert r.status_code == 422, (model, r.text)
            assert "leaves the models folder" in r.json()["error"]
            assert str(tmp_path) not in r.json()["error"].replace(str(outside), "")
        missing = c.post("/api/solve", json={"problem": problem_text("nothing/config.json")})
        assert missing.status_code == 422
        assert str(models) not in missing.json()["error"]  # the server's folders stay unnamed


def test_nothing_in_a_request_runs_code(client: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = f"!!python/object/apply:os.system ['touch {marker}']"
    for req in (
        {"problem": payload},
        {"problem": f"name: x\ndescription: {payload}\n"},
        {"example": "chat-70b", "sets": [f"constraints.budget_usd={payload}"]},
        {"example": "chat-70b", "sets": ["name=!!python/name:os.system"]},
    ):
        r = client.post("/api/solve", json=req)
        assert r.status_code == 422, r.text
        assert "is not allowed" in r.json()["error"]
    assert not marker.exists()


def test_bodies_are_bounded() -> None:
    cfg = ServeConfig(examples_dir=EXAMPLES, max_body_bytes=4096)
    with TestClient(create_app(cfg)) as c:
        big = {"problem": problem_text("llama-3.1-8b") + "#" * 5000}
        r = c.post("/api/solve", json=big)
        assert r.status_code == 413 and "4,096 bytes" in r.json()["error"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"problem": "'
            for _ in range(10):
                yield b"#" * 1000
            yield b'"}'

        r = c.post("/api/solve", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.get("/health").status_code == 200


def test_charts_are_svg_from_the_plot_code(client: TestClient) -> None:
    for req in (
        {"kind": "tco"},
        {"kind": "sweep", "vary": "horizon.electricity_usd_per_kwh=0.05..0.25:3"},
        {"kind": "frontier", "points": 3},
    ):
        r = client.post("/api/chart", json={"example": "chat-70b", **req})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("image/svg+xml")
        assert "<svg" in r.text
    r = client.post(
        "/api/chart",
        json={"example": "chat-70b", "kind": "sweep", "vary": "horizon.pue=1..2:50"},
    )
    assert r.status_code == 422 and "at most" in r.json()["error"]
    r = client.post("/api/chart", json={"example": "infeasible", "kind": "tco"})
    assert r.status_code == 422 and "no plan" in r.json()["error"]


def test_a_request_has_a_time_limit_its_solves_share() -> None:
    solver = RequestSolver(5.0)
    solver.deadline -= 4.0  # as if its earlier solves had taken 4 s
    problem = load_problem(EXAMPLES / "chat-70b.yaml")
    assert solver.solve(problem).has_plan
    assert solver.time_limit <= 1.0  # the solve was given what was left, not 5 s
    solver.deadline -= 1.0
    with pytest.raises(OutOfTime, match="whole time limit of 5 s"):
        solver.solve(problem)
    with TestClient(create_app(ServeConfig(examples_dir=EXAMPLES, time_limit=0.05))) as c:
        r = c.post("/api/explain", json={"example": "chat-70b"})
        assert r.status_code == 503 and "time limit of 0.05 s" in r.json()["error"]


def test_gate_queues_then_refuses_with_a_retry_hint() -> None:
    async def run() -> list[object]:
        gate = Gate(running=1, waiting=1, wait_s=0.2, retry_after=7)
        release = asyncio.Event()

        async def hold() -> str:
            async with gate.slot():
                await release.wait()
            return "solved"

        async def try_one() -> object:
            try:
                async with gate.slot():
                    return "solved"
            except Busy as e:
                return (e.status, e.retry_after)

        first = asyncio.create_task(hold())
        await asyncio.sleep(0)
        queued = asyncio.create_task(try_one())  # waits 0.2 s, then 503
        await asyncio.sleep(0)
        refused = await try_one()  # slot and queue full: 429 at once
        late = await queued
        release.set()
        after = await try_one()  # the slot is free again
        return [await first, refused, late, after, gate.stats()["refused"]]

    assert asyncio.run(run()) == ["solved", (429, 7), (503, 7), "solved", 2]


def test_serve_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli import app

    runs: list[dict[str, object]] = []
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append(kw))
    runner = CliRunner()
    r = runner.invoke(app, ["serve", "--port", "8123"])
    assert r.exit_code == 0, r.output
    assert runs[-1]["host"] == "127.0.0.1" and "warning" not in r.output
    r = runner.invoke(app, ["serve", "--host", "0.0.0.0"])
    assert r.exit_code == 0 and "warning: listening on 0.0.0.0" in r.output
    r = runner.invoke(app, ["serve", "--models-dir", "/nonexistent-folder"])
    assert r.exit_code == 2 and "not a folder" in r.output
    monkeypatch.setitem(__import__("sys").modules, "uvicorn", None)
    r = runner.invoke(app, ["serve"])
    assert r.exit_code == 1 and "pip install 'planner[web]'" in r.output
