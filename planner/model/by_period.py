"""A plan improved one demand period at a time: every variable that is not a period's own (the
devices bought, the fleet, its hosts, reserved devices, network gear) held at the plan's value,
each period's replicas, sequences and rented devices searched again alone, over every design.

Why it pays: with the shared variables held, nothing but them ties one period to another (the
model's rows are each within one period or over shared variables), so the periods' own
variables split into independent blocks and the best plan with those purchases is the best
choice in each block, one small search each. The whole model searched at once does not find it
in the time a plan has: on a week of hourly demand in 34 levels (benchmarks/bench_week.py,
22,644 replica variables over 453 designs) a plan over the relaxation's 6 designs with 16 H200
held cost $1,889,976; period by period over every design it cost $1,870,618 (1.0 % less),
in 34 searches of 0.2-2 s (2026-11-29, a loaded 2-core machine).

Why the plan stays feasible: a period's search sees every constraint that reads one of its own
variables, with every other variable fixed at the plan's value; a constraint that reads none of
them keeps the plan's values and holds as it did. The search starts from the plan's values (a
complete hint), so it never returns a worse block, and a block is replaced only when its cost
is lower. A model holding a constraint kind this module does not read is left as it is.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np

from planner.model import interrupt
from planner.model.ortools_cp import cp_model
from planner.model.variables import ModelBase

SHARED = -1  # the label of a variable no single demand period owns
LISTS = ("bool_or", "bool_and", "at_most_one", "exactly_one")
MIN_PERIOD_S = 0.05  # the least search worth giving one period


def _var(ref: int) -> int:
    """The variable a literal or reference reads (a negative ref -i-1 is the negation of i)."""
    return ref if ref >= 0 else -ref - 1


def _exprs(ct: Any) -> list[Any] | None:
    """The linear expressions and literal lists a constraint reads, or None for a kind not read
    here (the model holds only linear, boolean and lin_max constraints)."""
    if ct.has_linear():
        return [ct.linear.vars]
    for kind in LISTS:
        if getattr(ct, f"has_{kind}")():
            return [getattr(ct, kind).literals]
    if ct.has_lin_max():
        return [ct.lin_max.target.vars, *(e.vars for e in ct.lin_max.exprs)]
    return None


def _reads(ct: Any) -> list[int] | None:
    """Every variable a constraint reads, enforcement literals included (None: see _exprs)."""
    parts = _exprs(ct)
    if parts is None:
        return None
    return [_var(r) for r in ct.enforcement_literal] + [_var(r) for p in parts for r in p]


def period_labels(model: ModelBase, reads: list[list[int]]) -> Any:
    """Per variable of the model's proto, the demand period it belongs to, or SHARED: replicas,
    sequences, request shares and rented devices per period are their period's; a helper
    variable (the instances an on-demand count is made of, spot devices up) that only
    constraints of one period read is that period's too."""
    label = np.full(len(model.m.proto.variables), SHARED, dtype=np.int64)
    for keyed in (model.R, model.X, model.Y):
        for key, v in keyed.items():
            label[v.index] = key.period
    for (_, p_i), e in [*model.od.items(), *model.spot.items(), *model.spot_up.items()]:
        if isinstance(e, cp_model.IntVar):
            label[e.index] = p_i
    seen: dict[int, set[int]] = defaultdict(set)
    for vs in reads:
        periods = {int(label[j]) for j in vs if label[j] >= 0} or {SHARED}
        for j in vs:
            if label[j] == SHARED:
                seen[j] |= periods
    for j, periods in seen.items():
        if len(periods) == 1 and SHARED not in periods:
            label[j] = periods.pop()
    return label


def labels(model: ModelBase) -> Any:
    """period_labels over the model's proto as it stands, or None when it holds a constraint
    kind this module does not read."""
    reads = [_reads(ct) for ct in model.m.proto.constraints]
    if any(r is None for r in reads):
        return None
    return period_labels(model, [r for r in reads if r is not None])


def _remapped(ct: Any, new: dict[int, int]) -> None:
    """`ct`'s variable references rewritten through `new` (old index -> new), signs kept."""

    def swap(refs: Any) -> None:
        out = [new[r] if r >= 0 else -new[-r - 1] - 1 for r in refs]
        refs.clear()
        refs.extend(out)

    swap(ct.enforcement_literal)
    for refs in _exprs(ct) or []:
        swap(refs)


def _block(
    proto: Any, rows: list[int], mine: Any, reads: list[list[int]], values: Any
) -> tuple[cp_model.CpModel, list[int]]:
    """The model of one period: its constraints `rows`, its variables `mine` free within their
    domains, every other variable those constraints read fixed at `values`; the objective's
    terms over its own variables; the plan's values as the hint. With the old index of each
    new variable."""
    used = sorted({v for r in rows for v in reads[r]} | set(np.flatnonzero(mine).tolist()))
    new = {old: i for i, old in enumerate(used)}
    sub = cp_model.CpModel()
    p = sub.proto
    for old in used:
        var = p.variables.add()
        if mine[old]:
            var.domain.extend(list(proto.variables[old].domain))
        else:
            var.domain.extend([int(values[old]), int(values[old])])
    for r in rows:
        ct = p.constraints.add()
        ct.copy_from(proto.constraints[r])
        _remapped(ct, new)
    obj = proto.objective
    for ref, c in zip(obj.vars, obj.coeffs, strict=True):
        v = _var(ref)
        if mine[v]:
            p.objective.vars.append(new[v] if ref >= 0 else -new[v] - 1)
            p.objective.coeffs.append(int(c))
    p.solution_hint.vars.extend(range(len(used)))
    p.solution_hint.values.extend(int(values[old]) for old in used)
    return sub, used


def _cost(proto: Any, values: Any, mine: Any) -> int:
    """The objective's terms over the variables `mine`, at `values`."""
    obj = proto.objective
    total = 0
    for ref, c in zip(obj.vars, obj.coeffs, strict=True):
        v = _var(ref)
        if mine[v]:
            total += int(c) * (int(values[v]) if ref >= 0 else -int(values[v]))
    return total


def improve(model: ModelBase, values: list[int], ends: float, seed: int = 0) -> list[int] | None:
    """The plan `values` (every variable of `model`'s proto, its objective set) improved period
    by period until `ends` (time.monotonic()), or None when no period was improved or the
    model holds a constraint this module does not read (see the module's notes)."""
    proto = model.m.proto
    if not len(proto.objective.vars):
        return None
    reads = [_reads(ct) for ct in proto.constraints]
    if any(r is None for r in reads):
        return None
    rs: list[list[int]] = [r for r in reads if r is not None]
    label = period_labels(model, rs)
    rows: dict[int, list[int]] = defaultdict(list)
    for i, vs in enumerate(rs):
        for p_i in {int(label[v]) for v in vs if label[v] >= 0}:
            rows[p_i].append(i)
    x = np.asarray(values, dtype=np.int64)
    improved = False
    periods = sorted(rows)
    for n, p_i in enumerate(periods):
        left = ends - time.monotonic()
        share = left / (len(periods) - n)
        if share < MIN_PERIOD_S:
            break
        mine = label == p_i
        sub, used = _block(proto, rows[p_i], mine, rs, x)
        s = cp_model.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.random_seed = seed
        s.parameters.max_time_in_seconds = share
        s.parameters.linearization_level = 2
        status = interrupt.solve(s, sub)  # Ctrl-C stops it with the plan kept
        if interrupt.requested():
            break
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            continue
        found = x.copy()
        got = np.asarray(s.response_proto.solution, dtype=np.int64)
        for i, old in enumerate(used):
            if mine[old]:
                found[old] = got[i]
        if _cost(proto, found, mine) < _cost(proto, x, mine):
            x, improved = found, True
    return x.tolist() if improved else None
