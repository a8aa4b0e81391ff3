"""Sweeps, frontiers and studies give the same bytes whatever runs them: in this process, in a
pool of local processes, or on a two-worker Dask cluster on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import use_overlays
from planner.cli import app
from planner.load import parse_problem
from planner.model import interrupt
from planner.schema.yaml_io import read_yaml
from planner.whatif.executor import MAX_TASKS, Executor, Settings, solve_all, split

runner = CliRunner()

# The README's example sweeps.
SWEEPS = [
    ["problems/chat-70b.yaml", "--vary", "constraints.power_w=5000..40000:8"],
    [
        "problems/chat-70b.yaml",
        "--vary",
        "horizon.utilization=0.3,0.9",
        "--vary",
        "horizon.procurement=buy,rent",
    ],
]


def run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


@pytest.mark.parametrize("n", [0, 1, 5, 16, 17, 400])
def test_tasks_cover_the_points_in_order(n: int) -> None:
    parts = split(n)
    assert [i for p in parts for i in p] == list(range(n))
    assert len(parts) == min(n, MAX_TASKS)
    sizes = {len(p) for p in parts}
    assert not sizes or max(sizes) - min(sizes) <= 1


@pytest.mark.slow
@pytest.mark.parametrize("args", SWEEPS)
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_sweep_is_the_same_on_every_executor(args: list[str], fmt: str, dask_cluster: str) -> None:
    base = ["sweep", *args, "--format", fmt, "--no-timings"]
    code, serial = run(*base, "--executor", "serial")
    assert code == 0, serial
    assert "OPTIMAL" in serial
    for extra in (
        ["--executor", "local", "--jobs", "2"],
        ["--executor", "local", "--jobs", "1"],
        ["--executor", "dask", "--executor-address", dask_cluster],
    ):
        code, text = run(*base, *extra)
        assert code == 0, text
        assert text == serial, extra


@pytest.mark.slow
def test_frontier_is_the_same_on_every_executor(dask_cluster: str) -> None:
    base = ["frontier", "problems/chat-70b.yaml", "--points", "4", "--format", "json"]
    code, serial = run(*base, "--no-timings", "--executor", "serial")
    assert code == 0, serial
    for extra in (["--executor", "local", "--jobs", "2"], ["--executor-address", dask_cluster]):
        opts = [*extra, "--executor", "dask"] if "--executor-address" in extra else extra
        code, text = run(*base, "--no-timings", *opts)
        assert code == 0, text
        assert text == serial, extra


def test_a_missing_dask_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if absent
    code, text = run("sweep", *SWEEPS[0], "--executor", "dask")
    assert code == 2
    assert "--executor dask" in text and "pip install 'planner[dask]'" in text
    assert "Traceback" not in text


def test_an_address_needs_the_dask_executor() -> None:
    code, text = run("sweep", *SWEEPS[0], "--executor-address", "tcp://127.0.0.1:1")
    assert code == 2
    assert "--executor dask" in text


def test_an_unknown_executor_kind_is_refused() -> None:
    with pytest.raises(Exception, match="serial, local, dask"):
        Executor("threads")


@pytest.mark.slow
def test_pool_workers_see_the_overlay_and_file_models(tmp_path: Path) -> None:
    """A worker process rebuilds the user's catalog from the task: the overlay's device and a
    model named by config.json are there, as in this process."""
    from test_user_catalog import OVERLAY_DEVICE, QWEN3_8B

    overlay = tmp_path / "cat"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(OVERLAY_DEVICE, encoding="utf-8")
    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_text(json.dumps(QWEN3_8B), encoding="utf-8")
    text = Path("problems/chat-70b.yaml").read_text(encoding="utf-8")
    problem = tmp_path / "p.yaml"
    problem.write_text(text.replace("llama-3.1-70b", "./qwen3-8b"), encoding="utf-8")
    args = ["--catalog", str(overlay), "sweep", str(problem), "--format", "json", "--no-timings"]
    args += ["--vary", "horizon.utilization=0.3,0.5,0.7,0.9"]
    try:
        code, serial = run(*args, "--executor", "serial")
        assert code == 0, serial
        code, local = run(*args, "--executor", "local", "--jobs", "2")
        assert code == 0, local
    finally:
        use_overlays([])
    assert local == serial
    assert "acme-x1" in serial


def test_a_bad_scheduler_address_is_an_input_error() -> None:
    pytest.importorskip("dask.distributed")
    code, text = run(
        "sweep", *SWEEPS[0], "--executor", "dask", "--executor-address", "nonsense://x"
    )
    assert code == 2
    assert "--executor-address nonsense://x" in text and "Traceback" not in text


@pytest.mark.slow
def test_ctrl_c_in_a_pool_keeps_the_rows_done_in_order() -> None:
    """Ctrl-C once the first task has come back: the tasks not started are cancelled, the
    workers stop their solves, and the rows are a prefix of the serial rows."""
    doc = read_yaml(Path("problems/chat-70b.yaml"))
    problems = [parse_problem(doc, [f"constraints.max_devices={n}"]) for n in range(1, 33)]
    settings = Settings(time_limit=20)
    serial = solve_all(problems, settings, Executor("serial")).rows

    def ctrl_c(done: int, total: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    interrupt.clear()
    # As from a terminal: a test run started in the background by a shell without job control
    # inherits SIGINT ignored, and the planner rightly keeps an ignored Ctrl-C so.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        out = solve_all(problems, settings, Executor("local", jobs=2), ctrl_c)
        assert interrupt.requested()
    finally:
        signal.signal(signal.SIGINT, previous)
        interrupt.clear()
    assert out.interrupted
    assert 0 < len(out.rows) < len(problems)
    strip = [{k: v for k, v in r.items() if k != "solve_seconds"} for r in out.rows]
    assert strip == [
        {k: v for k, v in r.items() if k != "solve_seconds"} for r in serial[: len(out.rows)]
    ]
