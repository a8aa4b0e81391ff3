"""planner.estimator.fork_share: tasks shared by this process and forked children come back
in order, with what each child hands back; a child that dies, or a process that cannot fork,
leaves its tasks to this process; an exception here reaps the children."""

from __future__ import annotations

import os
import threading
import time

import pytest

from planner.estimator import fork_share
from planner.estimator.fork_share import Handback, run_queue

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the system does not fork")


def _no_children_left() -> bool:
    """No child of this process is running or waiting to be reaped."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_every_task_comes_back_in_order_and_the_work_was_shared() -> None:
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
    assert _no_children_left()


def test_a_child_that_dies_leaves_its_tasks_here() -> None:
    here = os.getpid()

    def work(i: int) -> int:
        if os.getpid() != here:
            os._exit(3)  # the child dies on its first task
        return i + 1

    assert run_queue(work, 10, 2) == list(range(1, 11))
    assert _no_children_left()


def test_a_child_whose_answer_does_not_pickle_leaves_its_tasks_here() -> None:
    here = os.getpid()

    def work(i: int) -> object:
        time.sleep(0.002)
        return (lambda: i) if os.getpid() != here else i  # a lambda does not pickle

    got = run_queue(work, 20, 2)
    assert got == list(range(20))


def test_an_exception_here_stops_and_reaps_the_children() -> None:
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
    assert _no_children_left()


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
