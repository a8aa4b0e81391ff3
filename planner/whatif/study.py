"""Monte-Carlo studies of uncertain prices, demand and electricity: draw N variants of a problem,
solve each (on the executor asked for), and summarize what it costs and what it buys.

A distribution multiplies a figure of the problem by a random factor (`--vary-dist
TARGET=KIND:PARAMS`):

- targets: `prices.DEVICE` (every price of that device: purchase and rents, the problem's own or
  the catalog's), `prices.*` (every device, each drawing its own factor), `electricity` (the
  electricity price), `demand` (every inference workload's tokens/s, requests/s and
  concurrency, one factor for all), or any dotted path of the problem that holds a number
  (`horizon.utilization`, `workloads.chat.min_tokens_per_s`), as `--set` writes it;
- kinds: `lognormal:SIGMA` (median 1, the log of the factor has standard deviation SIGMA),
  `normal:SD` (mean 1, standard deviation SD, never below 0), `uniform:LO..HI`, and
  `triangular:LO..MODE..HI`.

Sample i draws its factors from the i-th child of `numpy.random.SeedSequence(seed)`, in the
order the distributions were given, so a sample's variant depends on the seed and its index
only: not on the sample count, the executor or how many processes solve it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from planner.catalog import load_catalog
from planner.errors import InputError, did_you_mean
from planner.schema.overrides import split_assignment
from planner.schema.problem import Problem
from planner.whatif.executor import Executor, Progress, Settings, solve_all

MAX_SAMPLES = 5000
KINDS = {"lognormal": 1, "normal": 1, "uniform": 2, "triangular": 3}  # kind -> parameters
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
PRICE_FIELDS = ("purchase_usd", "rent_usd_per_hour", "reserved_usd_per_hour", "spot_usd_per_hour")
DEMAND_FIELDS = ("min_tokens_per_s", "requests_per_s", "concurrency")
SYNTAX = (
    "write TARGET=KIND:PARAMS, e.g. prices.h200-sxm=lognormal:0.2, electricity=uniform:0.8..1.5, "
    "demand=triangular:0.5..1..2 (kinds: lognormal:SIGMA, normal:SD, uniform:LO..HI, "
    "triangular:LO..MODE..HI)"
)


@dataclass(frozen=True)
class Dist:
    """A random factor on one target."""

    spec: str  # as the user wrote it, for messages
    target: str
    kind: str
    params: tuple[float, ...]

    def draw(self, rng: np.random.Generator) -> float:
        p = self.params
        if self.kind == "lognormal":
            return float(np.exp(rng.normal(0.0, p[0])))
        if self.kind == "normal":
            return max(0.0, float(rng.normal(1.0, p[0])))
        if self.kind == "uniform":
            return float(rng.uniform(p[0], p[1]))
        return float(rng.triangular(p[0], p[1], p[2]))


def parse_dist(spec: str) -> Dist:
    """`TARGET=KIND:PARAMS`, checked for form and bounds (the target is checked against the
    problem by `study`)."""
    target, raw = split_assignment(spec, "--vary-dist")
    kind, colon, args = raw.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS or not colon:
        raise InputError(
            f"--vary-dist {spec}: unknown distribution `{kind}`{did_you_mean(kind, KINDS)}; {SYNTAX}"
        )
    parts = [a for a in args.split("..")]
    try:
        params = tuple(float(a.strip().replace("_", "")) for a in parts)
    except ValueError:
        raise InputError(f"--vary-dist {spec}: `{args}` is not numbers; {SYNTAX}") from None
    if len(params) != KINDS[kind] or not all(math.isfinite(x) for x in params):
        raise InputError(f"--vary-dist {spec}: {kind} takes {KINDS[kind]} number(s); {SYNTAX}")
    if kind in ("lognormal", "normal") and not 0 < params[0] <= 3:
        raise InputError(f"--vary-dist {spec}: the spread must be above 0 and at most 3")
    if kind in ("uniform", "triangular") and not (
        0 <= params[0] < params[-1] <= 1000 and params[0] <= params[1] <= params[-1]
    ):
        raise InputError(
            f"--vary-dist {spec}: factors must rise from LO to HI, with 0 <= LO < HI <= 1000"
        )
    return Dist(spec, target.strip(), kind, params)


@dataclass
class Study:
    samples: list[dict[str, Any]]  # per sample: index, factors drawn, plan row
    factors: list[str]  # the factor columns, in the order drawn
    summary: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False


def study(
    problem: Problem,
    dists: Sequence[Dist],
    n: int,
    seed: int,
    settings: Settings,
    executor: Executor,
    progress: Progress | None = None,
) -> Study:
    """Solve `n` random variants of the problem and summarize cost and device choice."""
    if not dists:
        raise InputError(f"study: give at least one --vary-dist; {SYNTAX}")
    if not 1 <= n <= MAX_SAMPLES:
        raise InputError(f"study: --samples must be between 1 and {MAX_SAMPLES}")
    base = problem.model_dump(mode="json")
    moves = [m for d in dists for m in _moves(d, base)]
    columns = [m.column for m in moves]
    if len(set(columns)) != len(columns):
        twice = next(c for c in columns if columns.count(c) > 1)
        raise InputError(f"--vary-dist: `{twice}` is given two distributions; give it one")
    variants, drawn = [], []
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(n)):
        rng = np.random.default_rng(child)
        data = copy.deepcopy(base)
        factors = {}
        for m in moves:
            factors[m.column] = m.dist.draw(rng)
            m.apply(data, factors[m.column])
        try:
            variants.append(Problem.model_validate(data))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise InputError(
                f"--vary-dist: sample {i} (factors {_show(factors)}) makes {where} invalid: "
                f"{err['msg'].removeprefix('Value error, ')}; narrow the distribution"
            ) from None
        drawn.append(factors)
    done = solve_all(variants, settings, executor, progress, details=True)
    samples = [
        {"sample": i, **{f"factor.{k}": v for k, v in factors.items()}, **row}
        for i, (factors, row) in enumerate(zip(drawn, done.rows, strict=False))
    ]
    out = Study(samples, columns, interrupted=done.interrupted)
    out.summary = summarize(samples, n)
    return out


def _show(factors: dict[str, float]) -> str:
    return ", ".join(f"{k} x{v:.3g}" for k, v in factors.items())


@dataclass(frozen=True)
class _Move:
    """One factor drawn per sample and where it applies in the problem document."""

    dist: Dist
    column: str
    paths: tuple[tuple[tuple[Any, ...], float, bool], ...]  # (path, base value, whole number)

    def apply(self, data: dict[str, Any], factor: float) -> None:
        for path, value, whole in self.paths:
            node = data
            for key in path[:-1]:
                node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
            scaled = value * factor
            node[path[-1]] = max(1, round(scaled)) if whole else scaled


def _moves(d: Dist, base: dict[str, Any]) -> list[_Move]:
    """The factor(s) a distribution draws and the figures each multiplies."""
    if d.target == "electricity":
        path = ("horizon", "electricity_usd_per_kwh")
        return [_Move(d, d.target, ((path, base["horizon"]["electricity_usd_per_kwh"], False),))]
    if d.target == "demand":
        paths = []
        for i, w in enumerate(base["workloads"]):
            for key in DEMAND_FIELDS:
                if w.get("kind") == "inference" and _number(w.get(key)):
                    paths.append((("workloads", i, key), float(w[key]), key == "concurrency"))
        if not paths:
            raise InputError(f"--vary-dist {d.spec}: no inference workload states a demand")
        return [_Move(d, d.target, tuple(paths))]
    if d.target == "prices.*" or d.target.startswith("prices."):
        return _price_moves(d, base)
    path, value = _resolve(d, base)
    return [_Move(d, d.target, ((path, float(value), isinstance(value, int)),))]


def _price_moves(d: Dist, base: dict[str, Any]) -> list[_Move]:
    cat = load_catalog()
    device = d.target.removeprefix("prices.")
    names = sorted(cat.accelerators) if device == "*" else [device]
    if device != "*" and device not in cat.accelerators:
        raise InputError(
            f"--vary-dist {d.spec}: unknown device `{device}`"
            f"{did_you_mean(device, cat.accelerators)} (see `planner catalog list devices`)"
        )
    moves = []
    for name in names:
        own = base["market"]["prices"].get(name, {})
        shipped = cat.accelerators[name].price
        paths = []
        for key in PRICE_FIELDS:
            value = own.get(key)
            if value is None:
                value = getattr(shipped, key)
            if value is not None:
                paths.append((("market", "prices", name, key), float(value), False))
        if paths:
            moves.append(_Move(d, f"prices.{name}", tuple(paths)))
        elif device != "*":
            raise InputError(f"--vary-dist {d.spec}: `{name}` has no price to vary")
    return moves


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _resolve(d: Dist, base: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
    """A dotted path into the problem (list items by name or index) that holds a number."""
    node: Any = base
    path: list[Any] = []
    for part in d.target.split("."):
        if isinstance(node, list):
            names = [x.get("name") if isinstance(x, dict) else None for x in node]
            if part in names:
                key: Any = names.index(part)
            elif part.isdigit() and int(part) < len(node):
                key = int(part)
            else:
                raise InputError(
                    f"--vary-dist {d.spec}: no `{part}` at {'.'.join(map(str, path)) or 'top'}"
                    f"{did_you_mean(part, [n for n in names if n])}"
                )
        elif isinstance(node, dict) and part in node:
            key = part
        else:
            known = list(node) if isinstance(node, dict) else []
            raise InputError(
                f"--vary-dist {d.spec}: no `{part}` in {'.'.join(map(str, path)) or 'the problem'}"
                f"{did_you_mean(part, known)} (targets: prices.DEVICE, prices.*, electricity, "
                "demand, or a path of the problem holding a number)"
            )
        path.append(key)
        node = node[key]
    if not _number(node):
        raise InputError(
            f"--vary-dist {d.spec}: `{d.target}` is {node!r} in this problem, not a number to vary"
        )
    return tuple(path), node


def summarize(samples: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Quantiles of the cost over the samples with a plan, and for each device type the share
    of all samples whose plan uses it and buys it."""
    costs = np.array([s["tco_usd"] for s in samples if s.get("tco_usd") is not None], dtype=float)
    statuses: dict[str, int] = {}
    for s in samples:
        statuses[s["status"]] = statuses.get(s["status"], 0) + 1
    cost: dict[str, Any] = {}
    if costs.size:
        cost = {f"p{round(q * 100)}": float(np.quantile(costs, q)) for q in QUANTILES}
        cost.update(mean=float(costs.mean()), min=float(costs.min()), max=float(costs.max()))
    used: dict[str, list[dict[str, int]]] = {}
    for s in samples:
        for name, line in (s.get("device_lines") or {}).items():
            used.setdefault(name, []).append(line)
    shares = {
        name: {
            "share_used": len(lines) / n,
            "share_buying": sum(x["bought"] > 0 for x in lines) / n,
            "share_renting": sum(x["rented"] > 0 for x in lines) / n,
            "median_count": float(np.median([x["count"] for x in lines])),
        }
        for name, lines in sorted(used.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    }
    return {
        "samples": n,
        "solved": len(samples),
        "statuses": dict(sorted(statuses.items())),
        "cost_usd": cost,
        "devices": shares,
    }
