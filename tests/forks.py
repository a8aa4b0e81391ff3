"""Whether the children fork_share forked in a test (conftest's `forked` fixture records them)
were reaped; other tests of the same session leave processes of their own (a pool's fork
server, a web server), so "no child at all" would not say it."""

from __future__ import annotations

import os


def reaped(pids: list[int]) -> bool:
    """Some children were forked, and none of them is running or waiting to be reaped."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped already: no such child of this process
        return False
    return bool(pids)
