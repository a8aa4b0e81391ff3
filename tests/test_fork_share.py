"""planner.estimator.fork_share: tasks shared by this process and forked children come back
in order, with what each child hands back; a child that dies, or a process that cannot fork,
leaves its tasks to this process; an exception here (Ctrl-C too, while a child's answer is
awaited) reaps the children; an ignored Ctrl-C stays ignored in a child; a child whose parent
is gone takes no further task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from forks import reaped

from planner.estimator import fork_share
from planner.estimator.fork_share import Handback, run_queue

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the system does not fork")


def test_every_task_comes_back_in_order_and_the_work_was_shared(forked: list[int]) -> None:
    here = os.getpid()
    seen: list[int] = []

    def work(i: int) -> tuple[int, int]:
        time.sleep(0.002)  # long enough for the child to take some of the tasks
        return i * i, os.getpid()

    got = run_queue(work, 60, 2, Handback(lambda: None, lambda: [os.getpid()], seen.extend))
    assert [sq for sq, _ in got] == [i * i for i in range(60)]
    ran = {pid for _, pid in got}
    assert here in ran and len(ran) == 2  # both processes took tasks
    assert seen and seen[0] != here  # the child's handback arrived here
    assert reaped(forked)


def test_a_child_that_dies_leaves_its_tasks_here(forked: list[int]) -> None:
    here = os.getpid()

    def work(i: int) -> int:
        if os.getpid() != here:
            os._exit(3)  # the child dies on its first task
        return i + 1

    assert run_queue(work, 10, 2) == list(range(1, 11))
    assert reaped(forked)


def test_a_child_whose_answer_does_not_pickle_leaves_its_tasks_here() -> None:
    here = os.getpid()

    def work(i: int) -> object:
        time.sleep(0.002)
        return (lambda: i) if os.getpid() != here else i  # a lambda does not pickle

    got = run_queue(work, 20, 2)
    assert got == list(range(20))


def test_an_exception_here_stops_and_reaps_the_children(forked: list[int]) -> None:
    here = os.getpid()

    def work(i: int) -> int:
        if os.getpid() == here:
            raise TimeoutError("deadline")
        time.sleep(5)  # a child that would run on for a long time
        return i

    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        run_queue(work, 4, 2)
    assert time.monotonic() - t0 < 4  # the child was killed, not waited for
    assert reaped(forked)


def test_one_process_or_no_fork_runs_everything_here(monkeypatch: pytest.MonkeyPatch) -> None:
    here = os.getpid()
    assert run_queue(lambda i: (i, os.getpid()), 5, 1) == [(i, here) for i in range(5)]

    def no_fork() -> int:
        raise OSError("no processes left")

    monkeypatch.setattr(fork_share.os, "fork", no_fork)
    assert run_queue(lambda i: (i, os.getpid()), 5, 2) == [(i, here) for i in range(5)]


def test_a_pools_process_or_a_threaded_one_works_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process of the sweep pool, or one running other threads (a web server), forks no
    child: the pool's other processes already use the cores, and a child forked beside other
    threads would hold copies of their locks."""
    monkeypatch.setattr(fork_share, "ALONE", True)
    assert fork_share.side_by_side() == 1
    monkeypatch.setattr(fork_share, "ALONE", False)
    monkeypatch.setattr(fork_share, "cores", lambda: 8)
    assert fork_share.side_by_side() == fork_share.PROCESSES
    monkeypatch.setattr(fork_share, "cores", lambda: 1)
    assert fork_share.side_by_side() == 1
    monkeypatch.setattr(fork_share, "cores", lambda: 8)
    stop = threading.Event()
    beside = threading.Thread(target=stop.wait)
    beside.start()
    try:
        assert fork_share.side_by_side() == 1
    finally:
        stop.set()
        beside.join()


def _ctrl_c_at_start(seen: list[int]) -> Handback[int]:
    """A child that sends itself Ctrl-C before its first task, then hands back its pid."""
    return Handback(lambda: os.kill(os.getpid(), signal.SIGINT), os.getpid, seen.append)


def test_ctrl_c_ends_a_child_unless_ctrl_c_is_ignored(forked: list[int]) -> None:
    """Ctrl-C ends a child at once; but where this process ignores it (nohup, a background
    job of a script) the child ignores it too, or a Ctrl-C sent to the whole group would kill
    the child and leave its share to be done again here."""
    here = os.getpid()
    ended: list[int] = []
    kept: list[int] = []
    # Python's own handler first (an earlier test of the session may have left Ctrl-C ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert run_queue(lambda i: i, 8, 2, _ctrl_c_at_start(ended)) == list(range(8))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        assert run_queue(lambda i: i, 8, 2, _ctrl_c_at_start(kept)) == list(range(8))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ended == []  # the child died of its Ctrl-C: nothing handed back
    assert len(kept) == 1 and kept[0] != here  # the child lived on and handed back
    assert reaped(forked)


def test_ctrl_c_here_while_a_child_works_on_stops_it(forked: list[int]) -> None:
    """Ctrl-C that reaches this process alone (kill -INT of its pid) while it waits for a
    child's answer: the child is killed and reaped, not waited for."""
    here = os.getpid()

    def work(i: int) -> int:
        # The child's task outlasts this process's share (which leaves it time to take one).
        time.sleep(0.2 if os.getpid() == here else 10)
        return i

    # Ctrl-C 1.5 s in, as this process's own handler raises it (a timer's signal, so
    # that no thread but this one runs and the signal interrupts the wait, as in the command).
    previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_queue(work, 6, 2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - t0 < 5  # the child was killed, not waited for
    assert reaped(forked)


def _running(pid: int) -> bool:
    """Whether `pid` is alive and not a zombie (Linux's /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
def test_a_child_whose_parent_was_killed_takes_no_further_task(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL, SIGTERM) cannot stop its child: the child sees it gone
    before its next task and ends, rather than working through the rest of the queue (here
    about 10 s of it) for no one."""
    mark = tmp_path / "child"
    script = textwrap.dedent(
        f"""
        import os, time
        from planner.estimator.fork_share import run_queue
        here = os.getpid()
        def work(i):
            if os.getpid() != here:
                open({str(mark)!r}, "w").write(str(os.getpid()))
            time.sleep(0.2)
            return i
        run_queue(work, 100, 2)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        t0 = time.monotonic()
        while not mark.exists() or not mark.read_text():
            assert time.monotonic() - t0 < 30, "the child never started"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
    child = int(mark.read_text())
    t0 = time.monotonic()
    while _running(child) and time.monotonic() - t0 < 3:
        time.sleep(0.05)
    assert not _running(child)


def test_a_child_forks_no_further_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work run in a child (a single-type solve that enumerates a request mix again) may not
    fork again: the parent already uses the other core, so a grandchild would only crowd it."""
    monkeypatch.setattr(fork_share, "cores", lambda: 8)
    here = os.getpid()

    def work(i: int) -> tuple[int, int]:
        time.sleep(0.005)  # long enough for the child to take some of the tasks
        return os.getpid(), fork_share.side_by_side()

    got = run_queue(work, 40, 2)
    assert {n for pid, n in got if pid == here} == {fork_share.PROCESSES}
    assert {n for pid, n in got if pid != here} == {1}  # the child took tasks, alone


@pytest.mark.skipif(sys.platform != "linux", reason="a pipe's size is set on Linux alone")
def test_a_queue_its_pipe_cannot_hold_runs_here(
    monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    """A pipe holds a page alone once its user's pipes pass their quota (pipe(7)): a queue
    longer than that is not written whole before the fork (nothing reads it yet, so the write
    would never end); the tasks then run here, one after the other."""
    import fcntl

    real = os.pipe

    def one_page() -> tuple[int, int]:
        r, w = real()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        return r, w

    monkeypatch.setattr(fork_share.os, "pipe", one_page)

    def late(signum: int, frame: object) -> None:
        raise TimeoutError("the queue's write never ended")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        got = run_queue(lambda i: (i, os.getpid()), 2000, 2)  # 8,000 bytes of queue
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert got == [(i, os.getpid()) for i in range(2000)]
    assert forked == []  # no child was forked


def test_a_hung_child_is_stopped_and_its_tasks_done_here(
    monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    """A child that never answers (a lock copied mid-use by the fork, say) is killed once it is
    WAIT_S past this process's own share, and its tasks are done here."""
    here = os.getpid()
    monkeypatch.setattr(fork_share, "WAIT_S", 0.3)

    def work(i: int) -> int:
        if os.getpid() != here:
            time.sleep(60)  # hangs on its first task
        time.sleep(0.01)
        return i * 2

    t0 = time.monotonic()
    assert run_queue(work, 6, 2) == [i * 2 for i in range(6)]
    assert time.monotonic() - t0 < 10
    assert reaped(forked)
