"""The notes of a plan that state figures, rebuilt from figures the verifier has already
recomputed: a note is read by the buyer like any other line of the plan, so a note whose hours,
device count or cost were changed fails like the field it repeats."""

from __future__ import annotations

from collections import Counter

from planner.catalog import Catalog
from planner.estimator.economics import device_prices, rented_devices
from planner.plan.types import Plan, WorkloadPlan
from planner.schema.problem import Problem
from planner.verify_workloads import PREM, fail


def training_note(plan: Plan, wp: WorkloadPlan, cat: Catalog, problem: Problem) -> str:
    """The note the plan builder writes for a training job (planner.plan.build), from the
    job's verified figures: `finish_hours`, its devices (replicas x the stages' degrees) and
    `job_usd`; a job rented in whole instances names them."""
    devices: Counter[str] = Counter()
    for s in wp.stages:
        devices[s.device] += wp.replicas * s.tp
    whole = []
    if wp.site != PREM:
        for dev, n in devices.items():
            acc = cat.accelerator(dev)
            prices = device_prices(problem, acc, cat.instances_of(acc.id))
            if prices.instance:
                whole.append(f"{rented_devices(n, prices) // prices.rent_unit} x {prices.instance}")
    return (
        f"training `{wp.name}`: {wp.finish_hours or 0.0:,.1f} h on {sum(devices.values())} devices"
        + (f" (rented whole: {', '.join(whole)})" if whole else "")
        + f"; {'energy' if wp.site == PREM else 'rent'} for the job ${wp.job_usd or 0.0:,.0f}"
    )


def check_training_notes(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """Each training job has its note, as its figures give it; no note speaks of a job the
    plan does not run."""
    jobs = {wp.name: wp for wp in plan.workloads if wp.kind == "training"}
    for name, wp in jobs.items():
        want = training_note(plan, wp, cat, problem)
        got = [n for n in plan.notes if n.startswith(f"training `{name}`:")]
        if got != [want]:
            fail(
                problem,
                f"`notes`: {got or 'no note'} for training `{name}`, its figures give `{want}`",
            )
    for i, note in enumerate(plan.notes):
        if note.startswith("training `") and note.split("`")[1] not in jobs:
            fail(problem, f"`notes.{i}`: `{note}` speaks of a training job the plan does not run")
