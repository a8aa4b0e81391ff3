"""What the web page asks, answered on the command line's own path: a problem (an example the
operator serves, or YAML text the user sent) read and changed by `--set` overrides, solved by
the session and re-checked by the verifier; explanations, charts and the purchase memo from the
same modules as `planner explain`, `sweep`, `frontier`, `tco` and `solve --format md`.

No web framework is imported here, so every answer is tested without a server. What a request
may do is bounded: its text and overrides in size (`ProblemRequest`), model paths refused or
confined to the operator's models folder, each solve by the server's time limit, charts by a
number of points; no request names a file, a catalog folder or anything that runs."""

from __future__ import annotations

import math
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from planner.catalog import load_catalog
from planner.errors import InputError, PlannerError, did_you_mean
from planner.load import parse_problem
from planner.model.tables import Tables
from planner.plan.io import plan_document
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.schema.yaml_io import Located, parse_text, read_yaml
from planner.solve import Solver

MAX_PROBLEM_CHARS = 200_000  # the largest example problem is about 3,000 characters
MAX_SET_CHARS = 2_000
MAX_SETS = 64  # as many as the command line's --set takes
EXAMPLE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
SOURCE_NAME = r"^[^/\\\x00-\x1f]{1,100}$"  # a file name shown in messages, never a path
UPLOADED = "uploaded problem"
# matplotlib's style settings are process-wide: one chart is drawn at a time (the solves
# behind charts still run side by side).
_DRAWING = threading.Lock()


@dataclass(frozen=True)
class ServeConfig:
    """What the operator sets on `planner serve`."""

    time_limit: float = 30.0  # seconds per request, shared by the solves it makes
    max_solves: int = 2  # solves running at once
    queue: int = 4  # requests waiting for a solve slot; more are refused with 429
    queue_wait_s: float = 30.0  # a request waiting longer is refused with 503
    max_body_bytes: int = 256 * 1024
    max_points: int = 12  # points of one sweep or frontier chart
    models_dir: Path | None = None  # model paths in problems resolve inside it; None refuses them
    examples_dir: Path | None = None

    @property
    def retry_after_s(self) -> int:
        """Seconds a refused client should wait: about one solve."""
        return max(1, math.ceil(self.time_limit))


class ProblemRequest(BaseModel):
    """A problem to answer: an example by name or the text of a problem file, with overrides
    written as on the command line (`constraints.budget_usd=800000`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    example: Annotated[str, StringConstraints(pattern=EXAMPLE_NAME)] | None = None
    problem: Annotated[str, StringConstraints(max_length=MAX_PROBLEM_CHARS)] | None = None
    source: Annotated[str, StringConstraints(pattern=SOURCE_NAME)] = UPLOADED
    sets: list[Annotated[str, StringConstraints(max_length=MAX_SET_CHARS)]] = Field(
        default_factory=list, max_length=MAX_SETS
    )


class ChartRequest(ProblemRequest):
    """A chart of the problem: a sweep of one parameter, a Pareto frontier, or cost over time."""

    kind: Literal["sweep", "frontier", "tco"]
    vary: Annotated[str, StringConstraints(max_length=MAX_SET_CHARS)] | None = None
    x: Literal["cost", "power"] = "cost"
    y: Literal["tokens_per_s", "tokens_per_joule"] = "tokens_per_s"
    points: int = Field(6, ge=2, le=100)


# ------------------------------------------------------------------------------------------------
# problems
# ------------------------------------------------------------------------------------------------


def default_examples_dir() -> Path | None:
    """The `problems/` folder beside the package in a source checkout, if there is one."""
    here = Path(__file__).resolve().parents[2] / "problems"
    return here if here.is_dir() else None


def example_files(cfg: ServeConfig) -> dict[str, Path]:
    """Example problems by name (file stem): the YAML files of the examples folder."""
    if cfg.examples_dir is None or not cfg.examples_dir.is_dir():
        return {}
    return {
        p.stem: p
        for p in sorted(cfg.examples_dir.iterdir())
        if p.suffix in (".yaml", ".yml") and p.is_file()
    }


def example_list(cfg: ServeConfig) -> list[dict[str, str]]:
    """Name and description of each example that reads as a mapping."""
    out = []
    for name, path in example_files(cfg).items():
        try:
            data = read_yaml(path).data
        except InputError:
            continue
        if isinstance(data, dict):
            out.append({"name": name, "description": str(data.get("description") or "").strip()})
    return out


def document(cfg: ServeConfig, req: ProblemRequest) -> Located:
    """The parsed problem the request names: an example, or its own text."""
    if (req.example is None) == (req.problem is None):
        raise InputError("give either `example` (a name) or `problem` (the text of a problem file)")
    if req.problem is not None:
        return parse_text(req.problem, req.source)
    files = example_files(cfg)
    if req.example not in files:
        assert req.example is not None
        raise InputError(f"no example named `{req.example}`{did_you_mean(req.example, files)}")
    return parse_text(files[req.example].read_text(encoding="utf-8"), f"{req.example}.yaml")


def load(cfg: ServeConfig, req: ProblemRequest) -> tuple[Problem, Located]:
    """The validated problem with the request's overrides, names checked, model paths refused
    or kept inside the models folder."""
    doc = document(cfg, req)
    return parse_problem(doc, req.sets, base=cfg.models_dir, confine=True), doc


class OutOfTime(PlannerError):
    """A request's solves used up its time limit before it had an answer."""


class RequestSolver(Solver):
    """The session for one request: its solves share the request's time limit, each given
    what is left of it; none starts once it is spent (the request is answered OutOfTime)."""

    def __init__(self, seconds: float, *, why: bool = True) -> None:
        super().__init__(time_limit=seconds, workers=1, seed=0, why=why)
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def _budget(self) -> None:
        left = self.deadline - time.monotonic()
        if left < 0.1:
            raise OutOfTime(
                f"the request used its whole time limit of {self.seconds:g} s before it had an "
                "answer; ask for fewer points, or run it with the command line"
            )
        self.time_limit = left

    def solve(self, problem: Problem, given: Tables | None = None) -> Plan:
        self._budget()
        return super().solve(problem, given)

    def least_status(
        self, problem: Problem, quantity: str, relax: frozenset[str]
    ) -> tuple[float | None, Status]:
        # `least` (explain) and the frontier's first solve both come through here.
        self._budget()
        return super().least_status(problem, quantity, relax)

    def conflict(self, problem: Problem) -> list[str] | None:
        self._budget()
        return super().conflict(problem)


def _solver(cfg: ServeConfig, *, why: bool = True) -> Solver:
    return RequestSolver(cfg.time_limit, why=why)


# ------------------------------------------------------------------------------------------------
# answers
# ------------------------------------------------------------------------------------------------


def confidence(plan: Plan) -> str:
    """How sure the plan is, in words: proved optimal, or within a gap of the bound."""
    if not plan.has_plan:
        return f"no plan ({plan.status})"
    if plan.status == "OPTIMAL":
        return "proved optimal; every figure re-checked by the verifier"
    gap = f" within {plan.gap:.2%} of the bound" if plan.gap is not None else ""
    return f"feasible{gap}, not proved optimal; every figure re-checked by the verifier"


def solve(cfg: ServeConfig, req: ProblemRequest) -> dict[str, Any]:
    """The verified plan as the JSON plan document, with the purchase memo in Markdown."""
    from planner.report.memo import plan_markdown

    problem, _ = load(cfg, req)
    plan = _solver(cfg).solve(problem)
    return {
        "status": str(plan.status),
        "has_plan": plan.has_plan,
        "confidence": confidence(plan),
        "plan": plan_document(plan, problem, load_catalog()),
        "markdown": plan_markdown(plan, problem),
    }


def explain(cfg: ServeConfig, req: ProblemRequest) -> dict[str, Any]:
    """`planner explain`'s answer: why nothing fits and the least change that gives a plan, or
    which limits bind."""
    from planner.whatif.explain import explain as run_explain

    problem, _ = load(cfg, req)
    ex = run_explain(problem, _solver(cfg))
    return {
        "feasible": ex.feasible,
        "status": str(ex.plan.status) if ex.plan else None,
        "sentences": ex.sentences,
        "core": ex.core,
        "relaxations": ex.relaxations,
        "marginal": ex.marginal,
    }


def chart(cfg: ServeConfig, req: ChartRequest) -> str:
    """An SVG chart drawn by the command line's plot code."""
    problem, doc = load(cfg, req)
    with tempfile.TemporaryDirectory(prefix="planner-chart-") as tmp:
        path = Path(tmp) / "chart.svg"
        if req.kind == "sweep":
            _sweep_chart(cfg, req, doc, problem.name, path)
        elif req.kind == "frontier":
            _frontier_chart(cfg, req, problem, path)
        else:
            _tco_chart(cfg, problem, path)
        return path.read_text(encoding="utf-8")


def _sweep_chart(cfg: ServeConfig, req: ChartRequest, doc: Located, name: str, path: Path) -> None:
    """Each point is read from the request's problem with its overrides and the varied value,
    as `planner sweep` does (a model path there is refused: it names no file of the server)."""
    from planner.report.plot import plot_sweep
    from planner.whatif.executor import SERIAL, Settings
    from planner.whatif.sweep import parse_vary, sweep

    if not req.vary:
        raise InputError("a sweep needs `vary`: PATH=FROM..TO:POINTS or PATH=A,B,C")
    vary = parse_vary(req.vary)
    if len(vary.values) > cfg.max_points:
        raise InputError(
            f"--vary {req.vary}: {len(vary.values)} points; this server draws at most "
            f"{cfg.max_points}"
        )
    # In the request's own process and session: its solves share the request's time limit.
    solver = _solver(cfg, why=False)
    settings = Settings(time_limit=cfg.time_limit)
    rows = sweep(doc, req.sets, [vary], settings, SERIAL, session=solver).rows
    with _DRAWING:
        plot_sweep(
            rows,
            vary.path,
            ["tco_usd", "tokens_per_s", "power_w"],
            path,
            title=f"{name}: sweep of {vary.path}",
        )


def _frontier_chart(cfg: ServeConfig, req: ChartRequest, problem: Problem, path: Path) -> None:
    from planner.report.plot import plot_frontier
    from planner.whatif.frontier import axis_column, frontier

    if req.points > cfg.max_points:
        raise InputError(f"points {req.points}: this server draws at most {cfg.max_points}")
    fr = frontier(problem, req.x, req.y, req.points, _solver(cfg))
    with _DRAWING:
        plot_frontier(
            fr.points,
            axis_column(req.x),
            axis_column(req.y),
            path,
            title=f"{problem.name}: {req.y} against {req.x}",
        )


def _tco_chart(cfg: ServeConfig, problem: Problem, path: Path) -> None:
    from planner.report.tco import plot_tco, tco_report

    plan = _solver(cfg, why=False).solve(problem)
    if not plan.has_plan:
        raise InputError(f"{problem.name}: no plan to chart ({plan.status}); ask why not")
    with _DRAWING:
        plot_tco(tco_report(plan, problem.horizon.lifetime_years), path)


# ------------------------------------------------------------------------------------------------
# the page's controls
# ------------------------------------------------------------------------------------------------


def _control(
    path: str, label: str, unit: str, value: float | None, low: float, high: float, step: float
) -> dict[str, Any]:
    """A slider: its override path, label, unit, current value and range; a limit the problem
    sets above the usual range widens it (shares keep theirs: they end at 1)."""
    top = max(high, 3 * value) if value and unit != "share" else high
    return {
        "path": path,
        "label": label,
        "unit": unit,
        "value": value,
        "min": low,
        "max": top,
        "step": step,
        "optional": path.startswith(("constraints.", "workloads.")),  # a limit that may be unset
    }


def inspect(cfg: ServeConfig, req: ProblemRequest) -> dict[str, Any]:
    """The problem's name, description and the figures the page offers as sliders (each an
    override path with its current value, None where the problem sets no limit), with the
    catalog's device ids for price overrides."""
    problem, _ = load(cfg, req)
    c, h, m = problem.constraints, problem.horizon, problem.market
    controls = [
        _control("constraints.budget_usd", "budget", "USD", c.budget_usd, 10_000, 2e6, 10_000),
        _control("constraints.power_w", "power cap", "W", c.power_w, 500, 100_000, 500),
    ]
    for w in problem.workloads:
        if not isinstance(w, InferenceWorkload):
            continue
        at = f"workloads.{w.name}"
        controls += [
            _control(
                f"{at}.min_tokens_per_s",
                f"{w.name}: demand",
                "tokens/s",
                w.min_tokens_per_s,
                100,
                10_000,
                100,
            ),
            _control(
                f"{at}.max_ms_per_token",
                f"{w.name}: latency target per token",
                "ms",
                w.max_ms_per_token,
                1,
                300,
                1,
            ),
            _control(
                f"{at}.max_ttft_s",
                f"{w.name}: time to first token",
                "s",
                w.max_ttft_s,
                0.05,
                30,
                0.05,
            ),
        ]
    controls += [
        _control(
            "horizon.electricity_usd_per_kwh",
            "electricity",
            "USD/kWh",
            h.electricity_usd_per_kwh,
            0,
            0.6,
            0.01,
        ),
        _control("horizon.utilization", "utilization", "share", h.utilization, 0.05, 1, 0.05),
        _control(
            "market.reserved_discount",
            "reserved discount",
            "share",
            m.reserved_discount,
            0,
            0.95,
            0.05,
        ),
        _control("market.spot_discount", "spot discount", "share", m.spot_discount, 0, 0.95, 0.05),
    ]
    return {
        "name": problem.name,
        "description": problem.description,
        "controls": controls,
        "devices": sorted(load_catalog().accelerators),
    }
