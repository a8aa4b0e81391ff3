"""Tasks of one computation run side by side: this process and processes forked from it take
the tasks one at a time from one queue, and every task's answer comes back here.

A forked child starts with this process's memory as it is (the catalog, the tables already
built, every module imported), so it costs a few milliseconds where a fresh interpreter would
cost a third of a second of imports: what lets a single command use a second core for work
that takes well under a second. The queue is a pipe holding the tasks' numbers, written whole
before the fork and read four bytes at a time (a read that small is atomic), so a process that
finishes early takes the next task and none waits on another's share (a queue its pipe
cannot hold runs here alone). A child forks no child of its own. A child only computes:
its output streams go to /dev/null, it sends its answers back pickled through a pipe and ends
with os._exit (no exit handlers, no flushing of buffers it shares with this process).

Nothing depends on a child: a task whose answer no child sent back (one could not be forked,
died, or sent something that does not unpickle) is computed here, so the answers are the same,
only later. The work must therefore give the same answer wherever it runs, and an exception in
this process (a deadline passed, an interrupt) stops the children before it propagates, and a
child whose parent was killed outright takes no further task. A Ctrl-C this process ignores
(nohup, a background job) the children ignore too.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

# Set in a process that is itself one of a pool's (planner.whatif.executor): its siblings
# already use the other cores, so its work runs in it alone.
ALONE = False

R = TypeVar("R")
_WIDE = 4  # bytes of a task's number in the queue
_QUEUE_BYTES = 65536  # a pipe's buffer on Linux (pipe(7)): the queue is written before the fork
# Seconds a child may take past this process's own share before it is taken for hung (_collect)
WAIT_S = 5.0


@dataclass(frozen=True)
class Handback(Generic[R]):
    """What a child hands back besides its answers: `start()` runs in the child before its
    first task, `end()` there after its last (what it returns travels back), and `take(x)` runs
    here on what each child's `end()` returned."""

    start: Callable[[], None]
    end: Callable[[], Any]
    take: Callable[[Any], None]


# At most this many processes work side by side (a command's solve runs two threads).
PROCESSES = 2


def side_by_side() -> int:
    """Processes a computation may run on (run_queue): PROCESSES, or fewer where fewer cores
    are this process's to run on; one where this process runs other threads (a web server's, a
    cluster worker's: a child forked from it would hold copies of their locks) or is itself one
    of a pool's processes (ALONE)."""
    if threading.active_count() > 1 or ALONE:
        return 1
    return max(1, min(PROCESSES, cores()))


def cores() -> int:
    """The CPUs this process may run on (its affinity, where the system reports one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_queue(
    work: Callable[[int], R], count: int, processes: int, handback: Handback[R] | None = None
) -> list[R]:
    """`work(i)` for i in range(count), in that order: the tasks shared by this process and
    `processes` - 1 forked children (where this system forks and there is more than one
    task), else all here one after the other."""
    if processes < 2 or count < 2 or not hasattr(os, "fork") or count * _WIDE > _QUEUE_BYTES:
        return [work(i) for i in range(count)]
    qr, qw = os.pipe()
    queue = b"".join(i.to_bytes(_WIDE, "little") for i in range(count))
    os.set_blocking(qw, False)  # a pipe may hold less (pipe(7): a user's pipes past their quota)
    try:
        whole = os.write(qw, queue) == len(queue)
    except BlockingIOError:
        whole = False
    os.close(qw)  # the queue ends where its tasks do: a read past them returns nothing
    if not whole:  # nothing waits to read it yet: writing on would never end
        os.close(qr)
        return [work(i) for i in range(count)]
    children: list[tuple[int, int]] = []  # (pid, read end of its answers' pipe)
    try:
        for _ in range(processes - 1):
            children.append(_fork(work, qr, handback))
        began = time.monotonic()
        answers = dict(_pull(work, qr))
        # A child is at most on its last task once the queue is empty here; one that has not
        # answered within twice this process's own time (and WAIT_S) is taken for hung.
        until = time.monotonic() + max(WAIT_S, 2.0 * (time.monotonic() - began))
        while children:
            got = _collect(*children.pop(0), until=until)
            if got is not None:
                answers.update(got[0])
                if handback is not None:
                    handback.take(got[1])
        return [answers[i] if i in answers else work(i) for i in range(count)]
    finally:
        os.close(qr)
        for pid, fd in children:  # this process raised: the children are not waited for
            _stop(pid, fd)


def _pull(work: Callable[[int], R], queue: int, parent: int | None = None) -> list[tuple[int, R]]:
    """Tasks taken from `queue` until it is empty, each with its answer. `parent` (in a child):
    the process that forked it; once that one is gone (killed, or ended without reaping this
    one), no further task is taken, since no one would read the answers."""
    done = []
    while len(b := os.read(queue, _WIDE)) == _WIDE:
        if parent is not None and os.getppid() != parent:
            os._exit(0)
        i = int.from_bytes(b, "little")
        done.append((i, work(i)))
    return done


def _fork(work: Callable[[int], R], queue: int, handback: Handback[R] | None) -> tuple[int, int]:
    """Fork a child working through `queue`: its pid and the read end of its answers' pipe
    (pid -1 where the fork failed, so its tasks are left to the others)."""
    r, w = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return -1, -1
    if pid == 0:  # pragma: no cover - runs in the child, whose coverage is not collected
        _child(work, queue, handback, r, w, parent)
    os.close(w)
    return pid, r


def _child(  # pragma: no cover - runs in the child
    work: Callable[[int], R],
    queue: int,
    handback: Handback[R] | None,
    r: int,
    w: int,
    parent: int,
) -> None:
    """The child's whole life: compute, send the pickled answers (or nothing), exit."""
    global ALONE
    ALONE = True  # its parent already uses the other cores: work it runs forks no further child
    data = b""
    try:
        os.close(r)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # an interrupt ends it at once
        # else Ctrl-C is ignored (nohup, a background job): as this process ignores it, so
        # must the child, or a Ctrl-C to the group would leave its share to be done again here
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        if handback is not None:
            handback.start()
        done = _pull(work, queue, parent)
        extra = handback.end() if handback is not None else None
        data = pickle.dumps((dict(done), extra), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        data = b""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]
    finally:
        os._exit(0)


def _collect(pid: int, fd: int, until: float = math.inf) -> tuple[dict[int, Any], Any] | None:
    """The answers of the child `pid` from its pipe `fd`, or None where it sent none before
    `until` (time.monotonic(); past it the child is stopped and its tasks are done here)."""
    if pid < 0:
        return None
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.0, until - time.monotonic()))
            if not ready:  # hung (a lock copied mid-use by the fork, a stopped process)
                os.kill(pid, signal.SIGKILL)
                return None
            if not (chunk := os.read(fd, 1 << 20)):
                break
            chunks.append(chunk)
    except BaseException:  # Ctrl-C here alone (not the child's group): its answer is not wanted
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    try:
        got = pickle.loads(b"".join(chunks)) if chunks else None
    except Exception:
        return None
    ok = isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], dict)
    return got if ok else None


def _stop(pid: int, fd: int) -> None:
    """End the child `pid` (its answers are no longer wanted) and reap it."""
    if pid < 0:
        return
    os.close(fd)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
