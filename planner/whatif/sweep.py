"""Sweeps: solve a problem at every point of one or two parameters, on the executor asked for
(planner.whatif.executor: runs of points per solver session, design tables reused and each solve
started from the previous plan). Rows carry the plan's own summary metrics
(planner.plan.types.Plan), so a sweep prints what the plan prints."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from planner.errors import InputError
from planner.load import parse_problem
from planner.schema.overrides import resolved_path, split_assignment
from planner.schema.yaml_io import Located, parse_text
from planner.solve import Solver
from planner.whatif.executor import Executor, Outcome, Progress, Settings, solve_all

MAX_POINTS = 400  # points in one sweep (both parameters together)


@dataclass(frozen=True)
class Vary:
    """One swept parameter: a dotted path and its values (as `--set` would write them)."""

    path: str
    values: tuple[Any, ...]


MAX_RANGE_END = 1e18  # above every quantity a problem holds (the largest limit is 1e15 tokens)


# Magnitudes a unit may start with (`k` of kW, `M` of $1M): where the two ends of a range differ
# in them and carry a unit or a `$` ($100k..$1M, 5 kW..2 MW), they are taken into the number (SI,
# as money and power read them). A bare `8k..32k` keeps its `k` for the field to read (1,024
# for token counts).
_MAGNITUDE = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_END = re.compile(
    r"\s*(?P<pre>\$?)(?P<num>[-+]?[0-9_]*\.?[0-9_]+(?:[eE][-+]?[0-9]+)?)(?P<sp>\s*)"
    r"(?P<mag>[kKMGT]?)(?P<rest>.*?)\s*"
)


def _end(text: str, spec: str) -> tuple[Fraction, re.Match[str] | None]:
    """A range end: its number, and how it is written around it (None for a plain number,
    `1/2` included)."""
    try:
        value = Fraction(text.strip().replace("_", ""))
        m = None
    except (ValueError, ZeroDivisionError):
        m = _END.fullmatch(text)
        if m is None:
            raise InputError(
                f"--vary {spec}: `{text}` is not a number (ranges are FROM..TO:POINTS, "
                "e.g. constraints.power_w=5000..40000:8 or 5 kW..40 kW:8)"
            ) from None
        value = Fraction(m["num"].replace("_", ""))
    if abs(value) > MAX_RANGE_END:
        raise InputError(f"--vary {spec}: `{text}` is beyond any value a problem holds")
    return value, m


def _range_ends(lo_text: str, hi_text: str, spec: str) -> tuple[Fraction, Fraction, str]:
    """The two ends as numbers and the form every point is written in (`{}` for the number;
    empty: plain numbers)."""
    (lo, a), (hi, b) = _end(lo_text, spec), _end(hi_text, spec)
    if a is None and b is None:
        return lo, hi, ""
    if a is None or b is None or (a["pre"], a["rest"].strip()) != (b["pre"], b["rest"].strip()):
        raise InputError(
            f"--vary {spec}: the ends are written `{lo_text.strip()}` and `{hi_text.strip()}`; "
            "write both in one unit"
        )
    if a["mag"] == b["mag"]:  # the same suffix: the field reads it at every point
        return lo, hi, a["pre"] + "{}" + a["sp"] + a["mag"] + a["rest"]
    if not (a["pre"] or a["rest"].strip()):
        raise InputError(
            f"--vary {spec}: `{lo_text.strip()}` and `{hi_text.strip()}` differ in their "
            "suffix and name no unit (k is 1,024 for token counts, 1,000 elsewhere); write "
            "both ends with one suffix"
        )
    scale = (_MAGNITUDE.get(a["mag"], 1), _MAGNITUDE.get(b["mag"], 1))
    return lo * scale[0], hi * scale[1], a["pre"] + "{}" + a["sp"] + a["rest"]


def _split_values(raw: str) -> list[str]:
    """`A,B,C` split at the commas outside brackets and quotes, so `[h100-sxm, l4],[mi300x]`
    is two list values."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(raw):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(raw[start:i])
            start = i + 1
    items.append(raw[start:])
    return items


def parse_vary(spec: str) -> Vary:
    """`PATH=FROM..TO:POINTS` (evenly spaced, both ends included), `PATH=FROM..TO` (5 points)
    or `PATH=A,B,C` (a list of YAML values)."""
    path, raw = split_assignment(spec, "--vary")
    raw = raw.strip()
    if ".." in raw:
        span, _, count = raw.partition(":")
        lo_text, _, hi_text = span.partition("..")
        lo, hi, unit = _range_ends(lo_text, hi_text, spec)
        if lo == hi:  # once as many identical rows as POINTS, each solved
            raise InputError(
                f"--vary {spec}: FROM and TO are the same value, so every point would be the "
                f"same problem; give two different ends, or set one value with --set {path}=..."
            )
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
        return Vary(path, tuple(unit.format(v) for v in values) if unit else values)
    parts = _split_values(raw)
    items = [x for x in parts if x.strip()]
    if len(items) < 1:
        raise InputError(f"--vary {spec}: no values; write A,B,C or FROM..TO:POINTS")
    if len(items) < len(parts):  # `1,,2` or a trailing comma: a value left out by mistake?
        raise InputError(
            f"--vary {spec}: an empty value between commas; write each value (A,B,C), or quote "
            'an empty text as ""'
        )
    return Vary(path, tuple(parse_text(x, f"--vary {path}").data for x in items))


def sweep(
    doc: Located,
    sets: Sequence[str],
    varies: Sequence[Vary],
    settings: Settings,
    executor: Executor,
    progress: Progress | None = None,
    base: Path | None = None,
    session: Solver | None = None,
) -> Outcome:
    """Solve the problem at every point of one or two parameters (the last varies fastest).
    Every point's problem is read and checked here, before any solve, so a bad value is a
    located error; the solves run where `executor` says (a serial run in `session` if given)."""
    if not 1 <= len(varies) <= 2:
        raise InputError("sweep: give one or two --vary parameters")
    if len(varies) == 2 and resolved_path(doc, varies[0].path) == resolved_path(
        doc, varies[1].path
    ):
        raise InputError(
            f"sweep: --vary {varies[0].path} is given twice; a sweep varies two different "
            "parameters (put all the values of one in a single --vary: PATH=A,B,C)"
        )
    points = list(itertools.product(*(v.values for v in varies)))
    if len(points) > MAX_POINTS:
        raise InputError(f"sweep: {len(points)} points; at most {MAX_POINTS} at once")
    problems = []
    for values in points:
        assignments = [f"{v.path}={_yaml(x)}" for v, x in zip(varies, values, strict=True)]
        # Errors name a point's value as the --vary point it is (a range's step may not be
        # whole), not as a --set the user typed.
        problems.append(parse_problem(doc, sets, base=base, points=assignments))
    out = solve_all(problems, settings, executor, progress, session=session)
    out.rows = [
        {**{v.path: x for v, x in zip(varies, values, strict=True)}, **row}
        for values, row in zip(points, out.rows, strict=False)
    ]
    return out


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
