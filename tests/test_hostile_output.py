"""Output that cannot be written (standard output sent to a full disk): a one-line error and exit
code 1, never a traceback, for commands whose output is written inside their own guard and for
those typer writes itself (--help, `schema`). Run as real processes: the failure is the
operating system's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FULL = Path("/dev/full")  # Linux: every write fails with ENOSPC


@pytest.mark.skipif(not FULL.exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["solve", "problems/chat-70b.yaml"],
        ["solve", "problems/chat-70b.yaml", "--format", "json"],
        ["estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm"],
        ["schema"],
        ["--help"],
    ],
)
def test_output_to_a_full_disk(args: list[str]) -> None:
    with FULL.open("w") as full:
        proc = subprocess.run(
            [sys.executable, "-c", "import planner; planner.main()", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "120"},
            timeout=300,
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert "the output could not be written: No space left on device" in proc.stderr
