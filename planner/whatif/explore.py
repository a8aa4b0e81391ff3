"""What-if exploration: sweeps over parameters, Pareto frontiers and explanations.

Everything here is a sequence of ordinary solves through one `Solver`, so design tables are
reused and each solve starts from the previous plan. Results are plain rows (dicts) that the
report, CSV and plot layers print.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from planner.errors import InputError
from planner.load import parse_problem
from planner.model.cpsat import PlannerModel, Tables
from planner.plan.types import Plan
from planner.schema.overrides import split_assignment
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload
from planner.schema.yaml_io import Located, parse_text
from planner.solve import Solver, build_tables, constraint_slack

MAX_POINTS = 400  # points in one sweep (both parameters together)

# -------------------------------------------------------------------------------------------------
# Sweeps
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vary:
    """One swept parameter: a dotted path and its values (as `--set` would write them)."""

    path: str
    values: tuple[Any, ...]


def _number(text: str, spec: str) -> Fraction:
    try:
        return Fraction(text.strip().replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise InputError(
            f"--vary {spec}: `{text}` is not a number (ranges are FROM..TO:POINTS, "
            "e.g. constraints.power_w=5000..40000:8)"
        ) from None


def parse_vary(spec: str) -> Vary:
    """`PATH=FROM..TO:POINTS` (evenly spaced, both ends included), `PATH=FROM..TO` (5 points)
    or `PATH=A,B,C` (a list of YAML values)."""
    path, raw = split_assignment(spec)
    raw = raw.strip()
    if ".." in raw:
        span, _, count = raw.partition(":")
        lo_text, _, hi_text = span.partition("..")
        lo, hi = _number(lo_text, spec), _number(hi_text, spec)
        n = 5
        if count:
            try:
                n = int(count)
            except ValueError:
                raise InputError(f"--vary {spec}: POINTS `{count}` is not a whole number") from None
        if not 2 <= n <= MAX_POINTS:
            raise InputError(f"--vary {spec}: POINTS must be between 2 and {MAX_POINTS}")
        exact = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
        values: tuple[Any, ...] = tuple(int(v) if v.denominator == 1 else float(v) for v in exact)
        return Vary(path, values)
    items = [x for x in raw.split(",") if x.strip()]
    if len(items) < 1:
        raise InputError(f"--vary {spec}: no values; write A,B,C or FROM..TO:POINTS")
    return Vary(path, tuple(parse_text(x, f"--vary {path}").data for x in items))


def plan_row(plan: Plan) -> dict[str, Any]:
    """The figures a sweep or frontier reports for one plan."""
    has = plan.status in ("OPTIMAL", "FEASIBLE")
    thr = sum(w.tokens_per_s for w in plan.workloads if w.kind == "inference")
    mix = " + ".join(f"{d.count}x {d.type}" for d in plan.devices) if has else ""
    cpm = [w.usd_per_million_tokens for w in plan.workloads if w.usd_per_million_tokens]
    return {
        "status": plan.status,
        "objective": plan.objective,
        "gap": plan.gap,
        "tco_usd": plan.tco_usd if has else None,
        "capex_usd": plan.capex_usd if has else None,
        "tokens_per_s": thr if has else None,
        "power_w": plan.wall_power_w if has else None,
        "tokens_per_joule": (thr / plan.power_w) if has and plan.power_w else None,
        "usd_per_million_tokens": (sum(cpm) / len(cpm)) if cpm else None,
        "devices": mix,
        "solve_seconds": plan.solve_seconds,
    }


def sweep(
    doc: Located,
    sets: Sequence[str],
    varies: Sequence[Vary],
    solver: Solver,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Solve the problem at every point of one or two parameters (the last varies fastest)."""
    if not 1 <= len(varies) <= 2:
        raise InputError("sweep: give one or two --vary parameters")
    points = list(itertools.product(*(v.values for v in varies)))
    if len(points) > MAX_POINTS:
        raise InputError(f"sweep: {len(points)} points; at most {MAX_POINTS} at once")
    rows = []
    for i, values in enumerate(points):
        assignments = [f"{v.path}={_yaml(x)}" for v, x in zip(varies, values, strict=True)]
        problem = parse_problem(doc, [*sets, *assignments])
        row = {v.path: x for v, x in zip(varies, values, strict=True)}
        row.update(plan_row(solver.solve(problem)))
        rows.append(row)
        if progress:
            progress(i + 1, len(points))
    return rows


def _yaml(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


# -------------------------------------------------------------------------------------------------
# Frontiers (epsilon-constraint)
# -------------------------------------------------------------------------------------------------

# Axes a frontier can trade: resources are capped (epsilon), benefits maximized.
RESOURCES = {
    "cost": ("budget_usd", "min_cost", "tco_usd"),
    "power": ("power_w", "min_power", "power_w"),
}
BENEFITS = {
    "tokens_per_s": "max_throughput",
    "tokens_per_joule": "max_tokens_per_joule",
}


def axis_column(axis: str) -> str:
    """The plan-row key an axis reads: a resource's column, or the benefit itself."""
    return RESOURCES[axis][2] if axis in RESOURCES else axis


@dataclass
class Frontier:
    resource: str
    benefit: str
    points: list[dict[str, Any]] = field(default_factory=list)  # Pareto-optimal, by resource
    dominated: int = 0  # grid points that another point beats
    notes: list[str] = field(default_factory=list)


def frontier(problem: Problem, x: str, y: str, n_points: int, solver: Solver) -> Frontier:
    """Pareto frontier of a resource (cost or power) against a benefit (tokens/s or tokens per
    joule): for evenly spaced caps on the resource, the plan with the most benefit, and among
    those the least resource. Every point is a proved-optimal solve."""
    pair = {x, y}
    resource = next((a for a in pair if a in RESOURCES), None)
    benefit = next((a for a in pair if a in BENEFITS), None)
    if resource is None or benefit is None or len(pair) != 2:
        raise InputError(
            f"frontier: cannot trade `{x}` against `{y}`; pair one of {', '.join(RESOURCES)} "
            f"with one of {', '.join(BENEFITS)}"
        )
    if not 2 <= n_points <= 100:
        raise InputError("frontier: --points must be between 2 and 100")
    cap_key, least_goal, column = RESOURCES[resource]
    fr = Frontier(resource, benefit)
    # The low end: the least of the resource any plan needs; the high end: what the best plan
    # for the benefit uses under the problem's own limits.
    low = least_resource(problem, resource, solver)
    if low is None:
        fr.notes.append("no plan meets the problem's constraints; nothing to trade")
        return fr
    if benefit == "tokens_per_s" and not _has_limit(problem):
        high = low * 4
        fr.notes.append(
            f"the problem sets no limit on cost, power or devices: the frontier spans "
            f"{resource} from its least value to 4x that"
        )
    else:
        best = solver.solve(_variant(problem, benefit_goal=BENEFITS[benefit], tie=least_goal))
        row = plan_row(best)
        high = row[column] if row[column] is not None else low  # within the problem's own caps
    high = max(high, low)
    caps = [low + (high - low) * i / (n_points - 1) for i in range(n_points)]
    grid = []
    for cap in caps:
        cap_value = math.ceil(cap) if resource == "cost" else cap
        p = _variant(
            problem, benefit_goal=BENEFITS[benefit], tie=least_goal, **{cap_key: cap_value}
        )
        plan = solver.solve(p)
        row = plan_row(plan)
        row[f"{resource}_cap"] = cap_value
        grid.append(row)
    fr.points, fr.dominated = _pareto(grid, column, benefit)
    return fr


def _has_limit(problem: Problem) -> bool:
    c = problem.constraints
    return any(v is not None for v in (c.budget_usd, c.capex_usd, c.power_w, c.max_devices))


def _variant(problem: Problem, *, benefit_goal: str, tie: str, **constraints: Any) -> Problem:
    """The problem with another objective and some constraints changed (validated again)."""
    data = problem.model_dump(mode="json")
    data["objective"] = {"goal": benefit_goal, "tie_break": tie}
    data["constraints"].update(constraints)
    return Problem.model_validate(data)


def least_resource(problem: Problem, resource: str, solver: Solver) -> float | None:
    """The least total cost (USD) or wall power (W) of any plan meeting the constraints."""
    tables = solver.tables(problem)
    if any(not d for d in tables.designs.values()):
        return None
    least = _least(tables, resource, frozenset(), solver)
    if least is None:
        return None
    return least * (problem.horizon.pue if resource == "power" else 1.0)


def _pareto(
    rows: list[dict[str, Any]], column: str, benefit: str
) -> tuple[list[dict[str, Any]], int]:
    ok = [r for r in rows if r["status"] == "OPTIMAL" and r[column] is not None]
    ok.sort(key=lambda r: (r[column], -(r[benefit] or 0.0)))
    front: list[dict[str, Any]] = []
    for r in ok:
        if front and (r[benefit] or 0.0) <= (front[-1][benefit] or 0.0) * (1 + 1e-9):
            continue  # costs more for no more benefit
        front.append(r)
    return front, len(rows) - len(front)


# -------------------------------------------------------------------------------------------------
# Explanations
# -------------------------------------------------------------------------------------------------

# Constraint families a single number relaxes: family -> (quantity the model minimizes, field).
RELAXABLE = {
    "budget": ("cost", "budget_usd"),
    "capex": ("capex", "capex_usd"),
    "power": ("power", "power_w"),
    "max_devices": ("devices", "max_devices"),
    "rack_units": ("rack_units", "max_rack_units"),
}
STEP = 0.10  # binding limits are loosened by 10 % to price them


@dataclass
class Explanation:
    feasible: bool
    sentences: list[str] = field(default_factory=list)
    core: list[str] = field(default_factory=list)
    relaxations: list[dict[str, Any]] = field(default_factory=list)  # name, needed, current
    marginal: list[dict[str, Any]] = field(default_factory=list)  # binding constraint values
    plan: Plan | None = None


def explain(problem: Problem, solver: Solver) -> Explanation:
    """Why a problem is infeasible and what would make it feasible; or, when it is feasible,
    which limits bind and what loosening each is worth."""
    plan = solver.solve(problem)
    if plan.status in ("OPTIMAL", "FEASIBLE"):
        return _explain_feasible(problem, plan, solver)
    ex = Explanation(False, plan=plan)
    ex.sentences.extend(plan.notes)
    tables = solver.tables(problem)
    c = problem.constraints
    if all(tables.designs.values()):
        core = PlannerModel(tables).infeasible_core(time_limit=solver.time_limit, seed=solver.seed)
        ex.core = core or []
        if core:
            ex.sentences.append(
                "these constraints together admit no plan: " + ", ".join(f"`{n}`" for n in core)
            )
        relaxable = [n for n in RELAXABLE if getattr(c, RELAXABLE[n][1]) is not None]
        for name in relaxable:
            quantity, key = RELAXABLE[name]
            others = frozenset(n for n in relaxable if n != name)
            need = _least(tables, quantity, frozenset({name}), solver)
            alone = need is not None
            if need is None and others:
                need = _least(tables, quantity, frozenset({name}) | others, solver)
            if need is None:
                continue
            if name == "power":
                need *= problem.horizon.pue
            current = float(getattr(c, key))
            ex.relaxations.append(
                {
                    "constraint": name,
                    "key": f"constraints.{key}",
                    "current": current,
                    "needed": need,
                    "alone": alone,
                }
            )
            ex.sentences.append(_relax_sentence(name, key, current, need, alone, sorted(others)))
    for w in problem.workloads:
        if isinstance(w, InferenceWorkload) and w.max_ms_per_token is not None:
            need_ms = _least_latency(problem, w, solver)
            if need_ms is not None and need_ms > w.max_ms_per_token:
                ex.relaxations.append(
                    {
                        "constraint": f"latency:{w.name}",
                        "key": f"workloads.{w.name}.max_ms_per_token",
                        "current": w.max_ms_per_token,
                        "needed": need_ms,
                        "alone": True,
                    }
                )
                ex.sentences.append(
                    f"latency:{w.name}: a ceiling of {need_ms:,.1f} ms per token (now "
                    f"{w.max_ms_per_token:,.1f}) admits a plan; "
                    f"--set workloads.{w.name}.max_ms_per_token={math.ceil(need_ms * 10) / 10}"
                )
    headroom = _least_headroom_change(problem, solver)
    if headroom is not None:
        ex.relaxations.append(
            {
                "constraint": "memory_headroom",
                "key": "constraints.memory_headroom",
                "current": c.memory_headroom,
                "needed": headroom,
                "alone": True,
            }
        )
        ex.sentences.append(
            f"memory_headroom: keeping {headroom:.0%} of memory free instead of "
            f"{c.memory_headroom:.0%} admits a plan; --set constraints.memory_headroom={headroom:g}"
        )
    if not ex.relaxations:
        ex.sentences.append(
            "no single relaxation of budget, power, devices, latency or headroom admits a plan"
        )
    return ex


def _relax_sentence(
    name: str, key: str, current: float, need: float, alone: bool, others: list[str]
) -> str:
    unit = {"budget_usd": "$", "capex_usd": "$"}.get(key, "")
    suffix = {"power_w": " W", "max_devices": " devices", "max_rack_units": " U"}.get(key, "")
    value = math.ceil(need)
    text = (
        f"{name}: the least any plan needs is {unit}{need:,.0f}{suffix} "
        f"(the limit is {unit}{current:,.0f}{suffix}); --set constraints.{key}={value}"
    )
    if not alone:
        text += f", together with lifting {', '.join(f'`{o}`' for o in others)}"
    return text


def _least(tables: Tables, quantity: str, relax: frozenset[str], solver: Solver) -> float | None:
    sol = PlannerModel(tables).least(
        quantity,
        relax=relax,
        time_limit=solver.time_limit,
        workers=solver.workers,
        seed=solver.seed,
    )
    return None if sol.objective is None else float(sol.objective)


def _least_latency(problem: Problem, w: InferenceWorkload, solver: Solver) -> float | None:
    """The smallest ceiling on ms per token (for workload `w`) at which a plan exists, by
    bisection over the latencies the designs reach without a ceiling."""
    free = problem.model_copy(
        update={
            "workloads": [
                x.model_copy(update={"max_ms_per_token": None}) if x.name == w.name else x
                for x in problem.workloads
            ]
        }
    )
    full = build_tables(free, solver.cat, tuned=False)
    options = sorted({d.ms_per_token for d in full.designs[w.name]})
    if not options:
        return None

    def feasible(ceiling: float) -> bool:
        designs = dict(full.designs)
        designs[w.name] = [d for d in full.designs[w.name] if d.ms_per_token <= ceiling]
        if not designs[w.name]:
            return False
        t = Tables(problem, designs, full.econ, full.training_cost, True)
        sol = PlannerModel(t).solve(
            time_limit=solver.time_limit, workers=solver.workers, seed=solver.seed
        )
        return sol.status in ("OPTIMAL", "FEASIBLE")

    return _first_feasible(options, feasible)


def _first_feasible(options: Sequence[float], feasible: Callable[[float], bool]) -> float | None:
    """Bisection: the first option that admits a plan, when every later one does too."""
    lo, hi = 0, len(options) - 1
    if not feasible(options[hi]):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(options[mid]):
            hi = mid
        else:
            lo = mid + 1
    return options[lo]


def _least_headroom_change(problem: Problem, solver: Solver) -> float | None:
    """The largest memory headroom (in 1 % steps below the current one) at which a plan exists."""
    current = problem.constraints.memory_headroom
    steps = [round(current - k / 100, 2) for k in range(1, round(current * 100) + 1)]
    if not steps:
        return None

    def feasible(h: float) -> bool:
        p = problem.model_copy(
            update={"constraints": problem.constraints.model_copy(update={"memory_headroom": h})}
        )
        plan = Solver(solver.cat, time_limit=solver.time_limit, seed=solver.seed).solve(p)
        return plan.status in ("OPTIMAL", "FEASIBLE")

    return _first_feasible(steps, feasible)  # steps descend: the largest headroom that works


def _explain_feasible(problem: Problem, plan: Plan, solver: Solver) -> Explanation:
    ex = Explanation(True, plan=plan)
    slack = constraint_slack(plan, problem)
    for name, room in sorted(slack.items(), key=lambda kv: kv[1]):
        state = "binds" if name in plan.binding_constraints else "has room"
        ex.sentences.append(f"{name} {state}: {room:.1%} slack")
    for name in plan.binding_constraints:
        loosened = _loosen(problem, name)
        if loosened is None:
            continue
        label, variant = loosened
        other = solver.solve(variant)
        row = {
            "constraint": name,
            "change": label,
            "objective": plan.objective,
            "objective_after": other.objective,
            "status_after": other.status,
        }
        ex.marginal.append(row)
        if other.objective is not None and plan.objective is not None:
            delta = other.objective - plan.objective
            goal = problem.objective.goal
            ex.sentences.append(
                f"loosening {name} ({label}) moves {goal} from {_value(goal, plan.objective)} "
                f"to {_value(goal, other.objective)} ({_value(goal, delta, sign=True)})"
            )
    return ex


def _value(goal: str, v: float, *, sign: bool = False) -> str:
    """An objective value with its unit."""
    s = "+" if sign and v >= 0 else ("-" if v < 0 else "")
    a = abs(v)
    if goal == "min_cost":
        return f"{s}${a:,.0f}"
    if goal == "max_throughput":
        return f"{s}{a:,.0f} tokens/s"
    if goal == "max_tokens_per_joule":
        return f"{s}{a:,.3f} tokens/J"
    return f"{s}${a:,.4f} per million tokens"


def _loosen(problem: Problem, name: str) -> tuple[str, Problem] | None:
    """The problem with binding constraint `name` loosened by STEP, and a label saying how."""
    c = problem.constraints
    for fam, (_, key) in RELAXABLE.items():
        if name == fam:
            value = getattr(c, key)
            new = value * (1 + STEP)
            if key in ("max_devices", "max_rack_units"):
                new = max(value + 1, math.floor(new))
            return (
                f"{key} {value:,.6g} -> {new:,.6g}",
                problem.model_copy(update={"constraints": c.model_copy(update={key: new})}),
            )
    kind, _, wname = name.partition(":")
    out = []
    label = ""
    for w in problem.workloads:
        if w.name != wname:
            out.append(w)
            continue
        if kind == "throughput" and isinstance(w, InferenceWorkload):
            new_floor = w.min_tokens_per_s * (1 - STEP)
            label = f"{wname}.min_tokens_per_s {w.min_tokens_per_s:,.6g} -> {new_floor:,.6g}"
            out.append(w.model_copy(update={"min_tokens_per_s": new_floor}))
        elif kind == "latency" and isinstance(w, InferenceWorkload) and w.max_ms_per_token:
            new_ms = w.max_ms_per_token * (1 + STEP)
            label = f"{wname}.max_ms_per_token {w.max_ms_per_token:,.6g} -> {new_ms:,.6g}"
            out.append(w.model_copy(update={"max_ms_per_token": new_ms}))
        elif kind == "deadline" and isinstance(w, TrainingWorkload) and w.deadline_hours:
            new_h = w.deadline_hours * (1 + STEP)
            label = f"{wname}.deadline_hours {w.deadline_hours:,.6g} -> {new_h:,.6g}"
            out.append(w.model_copy(update={"deadline_hours": new_h}))
        else:
            return None
    if not label:
        return None
    return label, problem.model_copy(update={"workloads": out})
