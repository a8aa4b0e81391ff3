"""Progress of long solves: best objective, bound and gap on one rewritten line of stderr, only
when stderr is a terminal; never in the bytes of a pipe."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_hostile_interrupt import hard_problem

from planner.load import load_problem
from planner.model import progress
from planner.solve import solve_problem

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "import planner; planner.main()"]


def test_the_line_says_best_bound_and_gap() -> None:
    text = progress.line("solving (min_cost)", 110.0, 100.0, 3.4, lambda v: f"${v:,.0f}")
    assert text == "solving (min_cost): 3 s, best $110, bound $100, gap 9.1%"  # 10 / 110
    assert progress.line("x", None, None, 1.0, str) == "x: 1 s, no plan yet"
    assert progress.line("ratio step 2", 5.0, 4.0, 2.0, None) == "ratio step 2: 2 s"


def test_a_watched_solve_reports_and_erases_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    buf = io.StringIO()
    progress.show_on(buf)
    try:
        plan = solve_problem(load_problem(ROOT / "problems/chat-70b.yaml"), time_limit=20)
    finally:
        progress.show_on(None)
    text = buf.getvalue()
    assert plan.status == "OPTIMAL"
    assert "solving (min_cost)" in text and "best $" in text and "gap " in text
    assert text.endswith("\r\x1b[K")  # erased before the plan is printed


def test_no_progress_without_a_sink() -> None:
    buf = io.StringIO()
    solve_problem(load_problem(ROOT / "problems/chat-70b.yaml"), time_limit=20)
    assert buf.getvalue() == ""


def _solve(stderr: int, tmp_path: Path, seconds: int = 3) -> subprocess.Popen[bytes]:
    limit = str(seconds)
    return subprocess.Popen(
        [*CLI, "solve", str(hard_problem(tmp_path)), "--time-limit", limit, "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=ROOT,
    )


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
def test_progress_on_a_terminal_and_not_in_a_pipe(tmp_path: Path) -> None:
    import pty

    master, slave = pty.openpty()
    seen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            seen.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # The limit covers the whole command: on a loaded machine start-up and design enumeration
    # can take most of a short one, leaving the solver less than the second before the line shows.
    proc = _solve(slave, tmp_path, seconds=15)
    os.close(slave)
    proc.communicate(timeout=300)
    reader.join(5)
    os.close(master)
    on_tty = b"".join(seen)
    assert b"solving (min_cost): " in on_tty and b"\x1b[K" in on_tty

    piped = _solve(subprocess.PIPE, tmp_path)
    _, err = piped.communicate(timeout=300)
    assert b"solving (" not in err and b"\r" not in err and b"\x1b[K" not in err
