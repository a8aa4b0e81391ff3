"""Ctrl-C at any moment: exit code 130 and "interrupted" on stderr, never a traceback; a solve
keeps its best plan so far, a sweep prints the rows done, and Python's SIGINT handler is in place
after every CP-SAT solve (OR-Tools' own catcher would leave the system default, which kills the
process with no message on the next Ctrl-C).

The process tests send a real SIGINT to the `planner` command in a subprocess; the waits before the
signal only place it at start-up or in a long solve, and nothing here measures speed."""

from __future__ import annotations

import importlib.abc
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import planner
from planner import process
from planner.model import interrupt
from planner.process import ctrl_c_in
from planner.schema.problem import Problem
from planner.solve import solve_problem

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "problems" / "chat-70b.yaml"
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
GUARD_S = 300  # a process that has not ended by then has hung


def hard_problem(folder: Path) -> Path:
    """Sixteen inference workloads and every procurement mode: CP-SAT needs far longer than the
    moments these tests wait to prove it optimal."""
    models = ["llama-3.1-70b", "llama-3.1-8b", "qwen2.5-72b", "mixtral-8x7b", "llama-3.1-405b"]
    workloads = [
        {
            "name": f"w{i}",
            "model": models[i % len(models)],
            "weights": "fp8",
            "kv": "fp8",
            "context_tokens": 8192 + 1024 * i,
            "prompt_tokens": 1000,
            "concurrency": 64 + 37 * i,
            "min_tokens_per_s": 1000 + 333 * i,
            "max_ms_per_token": 60,
        }
        for i in range(16)
    ]
    doc = {
        "name": "hard",
        "workloads": workloads,
        "constraints": {"power_w": "300 kW"},
        "horizon": {"procurement": ["buy", "on_demand", "reserved", "spot"]},
        "objective": {"goal": "min_cost", "tie_break": "min_power"},
    }
    path = folder / "hard.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _until_loaded(pid: int, library: str) -> None:
    """Wait until the child has mapped `library` (Linux /proc), so the signal lands in the
    planner's own start-up (pydantic_core loads while the command line is imported), not in the
    interpreter's site import a moment before, which no program can guard."""
    maps = Path(f"/proc/{pid}/maps")
    for _ in range(3000):
        try:
            if library in maps.read_text():
                return
        except OSError:
            time.sleep(1.0)  # no /proc here (or the child ended): a moment is enough
            return
        time.sleep(0.01)


def _sigint_as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted_run(
    args: list[str], wait_s: float, library: str = "pydantic_core"
) -> tuple[int, str, str]:
    """Run the `planner` command with ARGS; once `library` is loaded, wait `wait_s` and send
    SIGINT; return (code, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import planner; planner.main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        # As from a terminal: a test run started in the background by a shell without job
        # control inherits SIGINT ignored, and the planner rightly keeps an ignored Ctrl-C so.
        preexec_fn=_sigint_as_from_a_terminal,
    )
    _until_loaded(proc.pid, library)
    time.sleep(wait_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=GUARD_S)
    return proc.returncode, out, err


@posix_only
@pytest.mark.slow
@pytest.mark.parametrize("wait_s", [0.0, 0.25, 0.5, 0.75, 4.0])
def test_ctrl_c_at_start_up_or_in_a_solve(tmp_path: Path, wait_s: float) -> None:
    out_file = tmp_path / "plan.json"
    code, out, err = interrupted_run(
        ["solve", str(hard_problem(tmp_path)), "--time-limit", "120", "--out", str(out_file)],
        wait_s,
    )
    assert code == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err + out
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@posix_only
@pytest.mark.slow
@pytest.mark.parametrize("wait_s", [0.0, 0.005, 0.02])
def test_ctrl_c_while_or_tools_loads(tmp_path: Path, wait_s: float) -> None:
    # The moment OR-Tools' core library is mapped, CP-SAT is loading: a KeyboardInterrupt
    # raised in a module that compiled code imports (protobuf's, when the LP interface was
    # loaded with it) was printed as a traceback and lost, and the solve then ran to its time
    # limit. (The LP interface now loads only for a linear relaxation, under the same guard.)
    code, out, err = interrupted_run(
        ["solve", str(hard_problem(tmp_path)), "--time-limit", "120"], wait_s, "libortools"
    )
    assert code == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err + out
    assert "solved in" not in out  # no search began after the Ctrl-C


def test_ctrl_c_while_a_library_loads_is_raised_once_it_has_loaded() -> None:
    # As from a terminal: a test run started in the background inherits SIGINT ignored, which
    # the command rightly leaves as it is.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    loaded = False
    try:
        assert process.note_ctrl_c()
        with pytest.raises(KeyboardInterrupt), process.libraries_loading():
            signal.raise_signal(signal.SIGINT)  # noted, not raised inside the load
            loaded = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        reached = False
        with pytest.raises(KeyboardInterrupt), process.libraries_loading():
            signal.raise_signal(signal.SIGINT)  # Python's own handler: raised at once
            reached = True
        assert not reached
    finally:
        signal.signal(signal.SIGINT, before)
        sys.unraisablehook = sys.__unraisablehook__
        process._ctrl_c_seen.clear()
    assert loaded


@posix_only
@pytest.mark.slow
def test_ctrl_c_stops_a_sweep_and_prints_the_rows_done(tmp_path: Path) -> None:
    # In this process: the timing is the shell's; a local pool's Ctrl-C is tested in
    # test_executor.py without timing.
    args = ["sweep", str(CHAT), "--vary", "constraints.max_devices=1..400:400", "--format", "json"]
    args += ["--executor", "serial"]
    code, out, err = interrupted_run(args, 8.0)
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    rows = yaml.safe_load(out)  # the JSON rows printed before the exit
    assert 0 < len(rows) < 400
    assert {r["status"] for r in rows} <= {"OPTIMAL", "INFEASIBLE"}  # no stopped point shown


def test_an_error_that_ctrl_c_caused_counts_as_ctrl_c() -> None:
    # A SIGINT while OR-Tools' solver core initialises surfaces as this ImportError.
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ctrl_c:
            raise ImportError("initialization failed") from ctrl_c
    except ImportError as e:
        assert ctrl_c_in(e)
    assert not ctrl_c_in(ImportError("no module named x"))
    assert not ctrl_c_in(ValueError("bad input"))


def test_a_ctrl_c_python_could_not_raise_still_ends_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Ctrl-C inside a clean-up callback (a module lock's, while a library loads) is printed by
    # Python as "Exception ignored" and lost; the command's handler has noted it all the same.
    class Lost:
        exc_value = KeyboardInterrupt()

    process._quiet_ctrl_c(Lost())
    assert capsys.readouterr().err == ""
    process._ctrl_c_seen.append(True)
    try:
        assert interrupt.requested()
    finally:
        process._ctrl_c_seen.clear()
    assert not interrupt.requested()


def _exit_code_after_ctrl_c(error: Exception) -> int:
    """The exit code a command ends with when `error` is raised after a Ctrl-C was noted."""
    import typer

    from planner.cli import user_errors

    process._ctrl_c_seen.append(True)
    try:
        with pytest.raises(typer.Exit) as e, user_errors():
            raise error
    finally:
        process._ctrl_c_seen.clear()
    return int(e.value.exit_code)


def test_an_input_error_that_ctrl_c_caused_ends_as_ctrl_c(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Ctrl-C inside a pydantic validator (a pattern's regex, while the catalog loads) makes a
    # valid value look invalid; the command must not blame the file.
    import typer

    from planner.cli import user_errors
    from planner.errors import CatalogError

    code = _exit_code_after_ctrl_c(
        CatalogError("support.yaml:176: date: String should match pattern")
    )
    assert code == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "support.yaml" not in err
    with pytest.raises(typer.Exit) as e, user_errors():  # without Ctrl-C: the error as ever
        raise CatalogError("support.yaml:176: date: String should match pattern")
    assert e.value.exit_code != 130
    assert "support.yaml" in capsys.readouterr().err


def test_the_sigint_handler_is_python_s_after_a_solve() -> None:
    problem = Problem.model_validate(yaml.safe_load(CHAT.read_text(encoding="utf-8")))
    before = signal.getsignal(signal.SIGINT)
    solve_problem(problem, time_limit=10)
    assert signal.getsignal(signal.SIGINT) is before
    assert not interrupt.requested()


class _InterruptImport(importlib.abc.MetaPathFinder):
    """Ctrl-C while `planner.cli` (typer, rich, ...) is being imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "planner.cli":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_command_line_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "planner.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptImport(), *sys.meta_path])
    with pytest.raises(SystemExit) as e:
        planner.main()
    assert e.value.code == 130
    assert "interrupted" in capsys.readouterr().err


def test_ctrl_c_that_surfaces_as_a_broken_connection_ends_as_ctrl_c(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A local pool's connection reset after Ctrl-C is an OSError: it is the user's stop, not
    # output that could not be written.
    assert _exit_code_after_ctrl_c(ConnectionResetError(104, "Connection reset by peer")) == 130
    assert "interrupted" in capsys.readouterr().err
