"""The notes of a plan that state figures, rebuilt from figures the verifier has already
recomputed or from the problem and the catalog: a note is read by the buyer like any other line
of the plan, so a note whose hours, device count, cost or share were changed fails like the
field it repeats. (Notes about the search itself, such as the best single device type's cost,
come from solves the verifier does not repeat.)"""

from __future__ import annotations

from collections import Counter

from planner.catalog import Catalog
from planner.estimator.built_in_link import ASSUMED_NOTE, rule_network
from planner.estimator.designs import carbon_unknown_left_out
from planner.estimator.economics import (
    LEFT_OUT_NOTE,
    UNKNOWN_EMBODIED_NOTE,
    carbon_notes,
    carbon_promise,
    demand_quantization,
    device_prices,
    rented_devices,
)
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


# The start of each note the plan builder writes from the problem and the catalog alone.
_DEMAND = "demand: the "


def _problem_notes(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """The notes planner.plan.build writes from the problem, the catalog and the verified
    carbon lines: how hourly demand was merged into levels, which devices' making is not
    counted, and which ones a carbon promise kept out."""
    notes = []
    if (merged := demand_quantization(problem)) is not None:
        notes.append(merged.note())
    unknown = (plan.carbon.embodied_unknown if plan.carbon else None) or ()
    left_out = carbon_unknown_left_out(problem, cat)
    notes += carbon_notes(unknown, left_out, carbon_promise(problem))
    return notes


def check_problem_notes(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """Each note the problem and the catalog call for is there word for word, and no note of
    those kinds says anything else."""
    want = _problem_notes(plan, problem, cat)
    for note in want:
        if note not in plan.notes:
            fail(problem, f"`notes`: missing `{note}`")
    _check_assumed_link(plan, problem, cat)
    for i, note in enumerate(plan.notes):
        ours = note.startswith((_DEMAND, UNKNOWN_EMBODIED_NOTE)) or LEFT_OUT_NOTE in note
        if ours and note not in want:
            fail(problem, f"`notes.{i}`: `{note}`, the problem and the catalog give {want}")


def _check_assumed_link(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """A note that the network was assumed (planner.estimator.built_in_link) names the link the
    rule gives the problem's machines, which is the problem's network, word for word. A plan
    without the note is not failed: its problem holds the link as named either way."""
    rule = rule_network(problem, cat)
    want = rule.note if rule is not None and rule.link.id == problem.constraints.network else None
    for i, note in enumerate(plan.notes):
        if note.startswith(ASSUMED_NOTE) and note != want:
            fail(
                problem,
                f"`notes.{i}`: `{note}`, but the problem's network is "
                f"`{problem.constraints.network}`"
                + (f" and the built-in-port rule notes `{want}`" if want else "")
                + " (planner.estimator.built_in_link)",
            )
