"""Design enumeration of a request mix (planner.estimator.request_mix): every class's designs,
the requests/s each serves of every class it fits, pruned as that module's docstring says.

The rates are most of the work (a latency search per design and role), and bound-first pruning
compares a design only with designs of its own kind (its role and the hosts its devices need,
planner.estimator.mix_pruning.Witnesses). So the kinds are dealt into shares of about equal
numbers of designs and the shares run side by side (planner.estimator.fork_share), each in the
same order as one process would run them: every design is beaten, or found, exactly as it would
be in one process, so the designs, their rates and the classes they were sized for are the same
whichever number of processes ran them. Another process's remembered figures come back with its
answer (request_mix.journal), so later solves in this process find them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from planner.catalog import Catalog
from planner.estimator import request_mix as rm
from planner.estimator.designs import Design, PerDevice, Role, inference_designs, stage_specs
from planner.estimator.fork_share import Handback, run_queue
from planner.estimator.hosts import design_hosts
from planner.estimator.measured import with_measured
from planner.estimator.mix_pruning import Witnesses, undominated
from planner.estimator.network import network_link
from planner.estimator.pools import in_role
from planner.estimator.replica import StageSpec
from planner.schema.catalog import Accelerator, Link
from planner.schema.problem import InferenceWorkload, Problem

# Designs (times roles) below which one process enumerates them all: a second process costs a
# fork and its answer's pickling (about 10 ms), worth it only where the rates take a tenth of a
# second or more (about 0.2 ms a design).
SHARED_FROM = 500

Kind = tuple[object, ...]

# Whether a child's remembered figures (request_mix.journal) come back to this process: set off
# by a command that solves one problem and ends (`planner solve`), which never reads them again
# (about 40 ms of pickling on p95-latency-70b); on in a session that solves variants.
HAND_BACK = True


class OutOfTime(Exception):
    """Design enumeration of a request mix passed its deadline (mix_designs)."""

    def __init__(self, workload: str, done: int, jobs: int) -> None:
        super().__init__(
            f"the designs of workload `{workload}` were still being enumerated (at least {done} "
            f"of its {jobs} design searches done)"
        )


@dataclass(frozen=True)
class _Class:
    """One class's part of the enumeration: its sizing workload, its network link, the
    (design, role) jobs whose rates are searched and the kind of each (Witnesses)."""

    sub: InferenceWorkload
    link: Link
    jobs: list[tuple[Design, Role]]
    kinds: list[Kind]


class _Hosts:
    """The hosts each device type of a design needs (planner.estimator.hosts.design_hosts),
    computed once per distinct list of stages."""

    def __init__(self, cat: Catalog, problem: Problem) -> None:
        self.cat, self.problem = cat, problem
        self.need: dict[tuple[object, ...], tuple[tuple[str, tuple[str, ...]], ...]] = {}

    def __call__(self, d: Design) -> tuple[tuple[str, tuple[str, ...]], ...]:
        stages = tuple((s.device, s.host_tp, s.dense) for s in d.stages)
        if stages not in self.need:
            self.need[stages] = design_hosts(self.cat, self.problem, stages)
        return self.need[stages]


def mix_designs(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool,
    where: str = "",
    deadline: float | None = None,
    processes: int = 1,
) -> tuple[list[Design], list[dict[int, float]], list[int]]:
    """Designs for every class of `w`, the requests/s each serves per class it fits, and the
    class each was sized for. `deadline` (time.monotonic()): OutOfTime once it has passed, so a
    command's time limit holds while its designs are enumerated. `processes`: how many
    processes may search the rates side by side (the module's docstring; the answer is the
    same for any number)."""
    assert w.request_mix is not None
    hosts = _Hosts(cat, problem)
    classes: list[_Class] = []
    shared = PerDevice()  # the classes' designs share their per-device figures
    for c_i in range(len(w.request_mix)):
        sub = rm.class_workload(w, c_i)
        made = inference_designs(sub, problem, cat, devs, prune=prune, for_mix=True, shared=shared)
        keep = with_measured(w, c_i, sub, made, problem, cat, devs, prune=prune, where=where)
        jobs = [(d, role) for d in keep for role in rm.ROLES[w.disaggregation]]
        kinds: list[Kind] = [(role, hosts(d)) for d, role in jobs]
        classes.append(_Class(sub, network_link(problem, cat), jobs, kinds))
    tasks = _tasks(classes, prune)
    witnesses = Witnesses(sorted(d.id for d in devs), len(classes)) if prune else None
    settled: rm.Ends = {}  # which end of its rate search settled each role's and class's last one
    searches = sum(len(t) for t in tasks)
    clock = _Clock(w.name, deadline, searches)
    specs: dict[tuple[object, ...], list[StageSpec]] = {}  # each process's own (_rates)

    def work(t: int) -> dict[tuple[int, int], tuple[Design, dict[int, float]]]:
        return _rates(w, problem, cat, classes, tasks[t], witnesses, settled, clock, specs)

    handback: Handback[dict[tuple[int, int], tuple[Design, dict[int, float]]]] | None = None
    if HAND_BACK:
        handback = Handback(rm.open_journal, rm.journal, lambda noted: rm.replay(noted, cat))
    found: dict[tuple[int, int], tuple[Design, dict[int, float]]] = {}
    many = searches >= SHARED_FROM
    for got in run_queue(work, len(tasks), processes if many else 1, handback):
        found.update(got)
    designs, serves, sized = _assemble(classes, found)
    if prune and designs:
        designs, serves, sized = _undominated(designs, serves, sized, hosts)
    return designs, serves, sized


def _tasks(classes: list[_Class], prune: bool) -> list[list[tuple[int, int]]]:
    """The jobs as (class, job) of one kind per task, in the order one process searches them
    (class by class; pruning computes the rates of designs that use less first, undominated's
    order, since they are the ones that can beat the others' bounds), the kinds with more jobs
    first (so that the last task to end is a short one)."""
    by_kind: dict[Kind, list[tuple[int, int]]] = {}
    for c_i, c in enumerate(classes):
        jobs = c.jobs
        order = range(len(jobs))
        if prune:
            order = sorted(  # type: ignore[assignment]
                order, key=lambda i: (jobs[i][0].power_w, sum(jobs[i][0].devices.values()), i)
            )
        for i in order:
            by_kind.setdefault(c.kinds[i], []).append((c_i, i))
    return sorted(by_kind.values(), key=len, reverse=True)  # stable: first seen first


class _Clock:
    """The enumeration's deadline (time.monotonic(); None: none), and how many jobs this
    process had done when it passed, for OutOfTime (a child's count stays in the child)."""

    def __init__(self, workload: str, deadline: float | None, jobs: int) -> None:
        self.workload, self.deadline, self.jobs, self.done = workload, deadline, jobs, 0

    def tick(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime(self.workload, self.done, self.jobs)
        self.done += 1


def _rates(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    classes: list[_Class],
    task: list[tuple[int, int]],
    witnesses: Witnesses | None,
    settled: rm.Ends,
    clock: _Clock,
    specs: dict[tuple[object, ...], list[StageSpec]],
) -> dict[tuple[int, int], tuple[Design, dict[int, float]]]:
    """The jobs of one kind (`task`, in order) that serve their own class, by (class, job):
    each design in its role and its rates. `witnesses`: None where nothing is pruned; `specs`:
    the stage specs this process built, by what they are built from."""
    out: dict[tuple[int, int], tuple[Design, dict[int, float]]] = {}
    for c_i, i in task:
        clock.tick()
        c = classes[c_i]
        d, role = c.jobs[i]
        kind = c.kinds[i]
        # What stage_specs reads of a design: its workload, engine and stages (not its batch,
        # so a layout's batches and roles share one list).
        at = (
            d.workload,
            d.engine,
            *((x.device, x.tp, x.layers, x.dense, x.across_machines) for x in d.stages),
        )
        spec = specs.get(at) or specs.setdefault(at, stage_specs(cat, problem, d))
        beaten = witnesses.beaten(kind, d, (c_i, i)) if witnesses is not None else None
        rates = rm._class_rates(w, cat, c.link, d, spec, c_i, role, beaten, settled)
        if rates is not None and c_i in rates:
            # Its figures in its role, made here where its tables are (a Design holds plain
            # values only, so one made in a child comes back as it is).
            out[(c_i, i)] = (in_role(d, role, c.sub, cat, spec, c.link), rates)
            if witnesses is not None:
                witnesses.add(kind, d, rates, (c_i, i))
    return out


def _assemble(
    classes: list[_Class], found: dict[tuple[int, int], tuple[Design, dict[int, float]]]
) -> tuple[list[Design], list[dict[int, float]], list[int]]:
    """The designs in their roles whose rates were found, in the order of the jobs."""
    designs: list[Design] = []
    serves: list[dict[int, float]] = []
    sized: list[int] = []
    for c_i, c in enumerate(classes):
        for i in range(len(c.jobs)):
            got = found.get((c_i, i))
            if got is None:
                continue  # beaten by its bound, or no load of its own class meets the ceilings
            designs.append(got[0])
            serves.append(got[1])
            sized.append(c_i)
    return designs, serves, sized


def _undominated(
    designs: list[Design],
    serves: list[dict[int, float]],
    sized: list[int],
    hosts: _Hosts,
) -> tuple[list[Design], list[dict[int, float]], list[int]]:
    """The designs undominated keeps, in order. A pool is only ever beaten by its own kind, and
    a design only by one that fits the same hosts (planner.estimator.hosts.design_hosts)."""
    chosen: list[int] = []
    kinds: dict[tuple[object, ...], list[int]] = {}
    for i, d in enumerate(designs):
        kinds.setdefault((d.role, hosts(d)), []).append(i)
    for at in kinds.values():
        kept = undominated([designs[i] for i in at], [serves[i] for i in at])
        chosen += [at[i] for i in kept.tolist()]
    chosen.sort()
    return [designs[i] for i in chosen], [serves[i] for i in chosen], [sized[i] for i in chosen]
