"""Where the solves of a sweep, frontier or study run: in this process (`serial`), in a pool of
local processes (`local`), or on a Dask cluster (`dask`, an optional extra).

The points are cut into tasks by their count alone (at most MAX_TASKS contiguous runs of points,
sizes differing by at most one), each task is plain data (problem documents as JSON-ready dicts,
the solver settings, the user's catalog overlays) and is solved by one fresh solver session in
order, each solve warm-started from the one before. Results come back in the points' order. So
the rows are the same, byte for byte, whatever the executor and however many processes run it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from typing import Any

from planner.catalog import catalog_state, use_catalog_state
from planner.errors import InputError, InternalError
from planner.estimator import fork_share
from planner.model import interrupt
from planner.plan.types import Plan
from planner.schema.problem import Problem
from planner.solve import Solver

KINDS = ("serial", "local", "dask")
MAX_TASKS = 16  # tasks a run is cut into: enough to keep 16 processes busy, few enough that
# each task's session reuses its design tables and warm starts over a run of points
DASK_INSTALL = "pip install 'planner[dask]' (from a checkout: pip install '.[dask]')"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Settings:
    """How each point is solved (CP-SAT threads per solve: `workers`, as `solve --workers`)."""

    time_limit: float = 30.0
    workers: int = 1
    seed: int = 0
    gap: float = 0.0


@dataclass(frozen=True)
class Executor:
    """Where tasks run. `jobs`: processes of the local pool, or workers of the Dask cluster
    started on this machine when no `address` is given; None = one per available CPU and per
    POINTS_PER_JOB points (a run of fewer points than that stays in this process)."""

    kind: str = "local"
    jobs: int | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"--executor `{self.kind}`: choose one of {', '.join(KINDS)}")
        if self.address and self.kind != "dask":
            raise InputError(
                f"--executor-address names a Dask scheduler; add --executor dask (not {self.kind})"
            )


SERIAL = Executor("serial")


@dataclass
class Outcome:
    rows: list[dict[str, Any]]  # one per point solved, in the points' order
    interrupted: bool = False  # Ctrl-C: the rows are the points done before it, in order


def plan_row(plan: Plan) -> dict[str, Any]:
    """The figures a sweep, frontier or study reports for one plan."""
    has = plan.has_plan
    parts = [f"{d.count}x {d.type}" for d in plan.devices]
    # Training jobs rented for their own hours hold devices the fleet lines do not list.
    parts += [
        f"{k}x {dev} (rented for {w.name})"
        for w in plan.workloads
        if w.kind == "training" and w.site != "on-premises"
        for dev, k in w.devices().items()
    ]
    mix = " + ".join(parts) if has else ""
    return {
        "status": plan.status,
        "objective": plan.objective,
        "gap": plan.gap,
        "tco_usd": plan.tco_usd if has else None,
        "capex_usd": plan.capex_usd if has else None,
        "tokens_per_s": plan.peak_tokens_per_s,
        "power_w": plan.wall_power_w if has else None,
        "tokens_per_joule": plan.tokens_per_joule if has else None,
        "usd_per_million_tokens": plan.usd_per_million_tokens,
        "devices": mix,
        "solve_seconds": plan.solve_seconds,
    }


def device_lines(plan: Plan) -> dict[str, dict[str, int]]:
    """How many of each device type the plan holds and how it has them (rented: reserved,
    on-demand and spot at their peaks)."""
    return {
        d.type: {
            "count": d.count,
            "owned": d.owned,
            "bought": d.bought,
            "rented": d.reserved + d.on_demand + d.spot,
        }
        for d in plan.devices
    }


def split(n: int) -> list[range]:
    """Contiguous runs of point indices: min(n, MAX_TASKS) of them, sizes within one."""
    tasks = min(n, MAX_TASKS)
    bounds = [n * i // tasks for i in range(tasks + 1)] if tasks else [0]
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


def solve_task(task: dict[str, Any]) -> dict[str, Any]:
    """Solve a task's problems in order with one session (runs in a worker: plain data in,
    plain data out). Stops at a Ctrl-C, returning the rows done before it."""
    use_catalog_state(task["catalog"])
    return _run(task)


_sessions: dict[str, Solver] = {}  # per process: design tables kept from task to task


def _session(task: dict[str, Any]) -> Solver:
    """This process's session for the task's settings and catalog, with no warm start: the
    design tables of earlier tasks are reused (they are the same whoever built them), the
    previous plan is not (it would make a task's plans depend on what ran before it here)."""
    key = json.dumps([task["settings"], task["catalog"]], sort_keys=True)
    if key not in _sessions:
        if len(_sessions) >= 4:
            _sessions.clear()
        s = task["settings"]
        _sessions[key] = Solver(
            time_limit=s["time_limit"],
            workers=s["workers"],
            seed=s["seed"],
            gap=s["gap"],
            why=False,
        )
    solver = _sessions[key]
    solver.forget_plan()
    return solver


def _run(task: dict[str, Any], session: Solver | None = None) -> dict[str, Any]:
    """A task solved in this process, with this process's catalog (in `session` when given:
    a caller's own session, e.g. one whose solves share a deadline)."""
    solver = _session(task) if session is None else session
    solver.forget_plan()
    rows: list[dict[str, Any]] = []
    for data in task["problems"]:
        if interrupt.requested():  # Ctrl-C came before this point: it is not started
            return {"rows": rows, "interrupted": True}
        try:
            plan = solver.solve(Problem.model_validate(data))
            row = plan_row(plan)
            if task.get("details"):
                row["device_lines"] = device_lines(plan) if plan.has_plan else {}
        except KeyboardInterrupt:
            interrupt.request()
        if interrupt.requested():
            return {"rows": rows, "interrupted": True}
        rows.append(row)
    return {"rows": rows, "interrupted": False}


def solve_all(
    problems: Sequence[Problem],
    settings: Settings,
    executor: Executor,
    progress: Progress | None = None,
    *,
    details: bool = False,
    session: Solver | None = None,
) -> Outcome:
    """Solve every problem (no explanation of infeasible points: a row reports its status) and
    return one plan row per problem, in order; with `details`, each row also holds its
    `device_lines`. A serial run solves in `session` when one is given."""
    catalog = catalog_state()
    tasks = [
        {
            "problems": [problems[i].model_dump(mode="json") for i in part],
            "settings": asdict(settings),
            "catalog": catalog,
            "details": details,
        }
        for part in split(len(problems))
    ]
    jobs = _jobs(executor, len(tasks), len(problems))
    if executor.kind == "dask":
        results = _dask(tasks, executor, jobs, progress)
    elif executor.kind == "local" and jobs > 1:
        results = _local(tasks, jobs, progress)
    else:
        results = _serial(tasks, progress, session)
    out = Outcome([])
    for r in results:
        out.rows.extend(r["rows"])
        if r["interrupted"]:
            out.interrupted = True
            break
    return out


# By default a process is started for every 16 points (up to one per CPU): starting the pool
# costs about what a dozen quick solves do (benchmarks/bench_executor.py: 32 points of
# serve-405b, 1.9 s in this process, 5.6 s in a pool of two on a busy two-core machine).
POINTS_PER_JOB = 16


def _jobs(executor: Executor, tasks: int, points: int) -> int:
    """Processes (or Dask workers) to use: as asked, else one per CPU and per POINTS_PER_JOB
    points; never more than there are tasks."""
    wanted = executor.jobs or min(fork_share.cores(), points // POINTS_PER_JOB)
    return max(1, min(tasks, wanted))


def _serial(
    tasks: list[dict[str, Any]], progress: Progress | None, session: Solver | None = None
) -> list[dict[str, Any]]:
    results = []
    total = sum(len(t["problems"]) for t in tasks)
    for t in tasks:
        results.append(_run(t, session))
        if progress:
            progress(sum(len(r["rows"]) for r in results), total)
        if results[-1]["interrupted"]:
            break
    return results


def _note_sigint(signum: int, frame: Any) -> None:
    interrupt.request()


def _worker_start() -> None:
    """A pool worker notes Ctrl-C (from the terminal, or passed on by the parent) instead of
    dying: the solve under way stops, and its task returns the rows done before it."""
    signal.signal(signal.SIGINT, _note_sigint)
    fork_share.ALONE = True  # the pool's other processes use the other cores


def _local(
    tasks: list[dict[str, Any]], jobs: int, progress: Progress | None
) -> list[dict[str, Any]]:
    """A pool of `jobs` processes (forkserver: each starts from a clean process that has
    imported the planner once, never from a copy of this one mid-solve).

    Ctrl-C (here, or in the whole terminal's process group) cancels the tasks not started and
    asks every worker to stop its solve (SIGINT, repeated until its task returns the rows it has
    done); a second Ctrl-C stops waiting. Long because the wait, the interrupt and a dead worker
    are handled in one loop."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "planner.whatif.warm"])
    total = sum(len(t["problems"]) for t in tasks)
    results: list[dict[str, Any]] = []
    futures: list[Future[dict[str, Any]]] = []
    pool = ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_start)
    stopping = False
    try:
        try:
            for t in tasks:
                futures.append(pool.submit(solve_task, t))
        except KeyboardInterrupt:
            stopping = _stop(futures)
        while len(results) < len(futures):
            try:
                results.append(futures[len(results)].result(timeout=0.5 if stopping else None))
                if progress:
                    progress(sum(len(x["rows"]) for x in results), total)
            except TimeoutError:
                _signal_workers(signal.SIGINT)  # a worker started after the first signal
                continue
            except CancelledError:
                break
            except KeyboardInterrupt:
                if stopping:
                    _signal_workers(signal.SIGTERM)
                    break
                stopping = _stop(futures)
                continue
            except BrokenProcessPool:
                raise InternalError(
                    "a process of the local pool died (out of memory?); run with fewer --jobs "
                    "or --executor serial"
                ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if stopping and not any(r["interrupted"] for r in results):
        results.append({"rows": [], "interrupted": True})
    return results


def _stop(futures: list[Future[dict[str, Any]]]) -> bool:
    """The first Ctrl-C: remember it, cancel the tasks not started, stop the solves under way."""
    interrupt.request()
    for f in futures:
        f.cancel()
    _signal_workers(signal.SIGINT)
    return True


def _signal_workers(signum: int) -> None:
    for child in multiprocessing.active_children():
        if child.pid:
            with contextlib.suppress(OSError):
                os.kill(child.pid, signum)


def _dask(
    tasks: list[dict[str, Any]], executor: Executor, jobs: int, progress: Progress | None
) -> list[dict[str, Any]]:
    """Tasks on a Dask cluster: the one at `executor.address`, or one started on 127.0.0.1
    for this run (its workers are processes, one thread each) and closed after it."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError(
            f"--executor dask: Dask is not installed; install the extra: {DASK_INSTALL}"
        ) from None
    cluster = None
    try:
        if executor.address:
            try:
                client = Client(executor.address, timeout=10)
            except (OSError, TimeoutError, ValueError) as e:  # ValueError: a bad address
                raise InputError(
                    f"--executor-address {executor.address}: no Dask scheduler answered ({e}); "
                    "give the address `dask scheduler` prints, e.g. tcp://10.0.0.5:8786"
                ) from None
        else:
            cluster = LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
            client = Client(cluster)
        with client:
            futures = client.map(solve_task, tasks, pure=False)
            total = sum(len(t["problems"]) for t in tasks)
            done = 0
            for f in as_completed(futures):
                done += len(f.result()["rows"])
                if progress:
                    progress(done, total)
            return list(client.gather(futures))
    finally:
        if cluster is not None:
            cluster.close()
