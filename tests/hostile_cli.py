"""Shared by the hostile-input tests: run the command line in process and read its output."""

from __future__ import annotations

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()


def flat(text: str) -> str:
    """The console wraps long lines at spaces; compare with every run of whitespace as one."""
    return " ".join(text.split())


def run(*args: str) -> tuple[int, str]:
    """Exit code and flattened output of `planner ARGS`; a Python exception fails the test."""
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r.exit_code, flat(r.output)
