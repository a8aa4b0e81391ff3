"""Pruning of request-mix designs (planner.estimator.request_mix.mix_designs): `undominated`
drops a design that m replicas of another beat, and `Witnesses`, designs whose rates are
known, rule out others before their rates are searched (bound first)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.estimator.designs import Design


@dataclass(frozen=True)
class Beaten:
    """Witnesses.beaten's answer for one design: `test(bounds)`, whether its bounds (rate
    per class) are beaten, and `threshold(bounds, k)`, the most class k's bound may be for a
    witness to beat them (so a search can narrow that bound without testing each step)."""

    test: Callable[[dict[int, float]], bool]
    threshold: Callable[[dict[int, float], int], float]

    def __call__(self, bound: dict[int, float]) -> bool:
        return self.test(bound)


class Witnesses:
    """Designs whose rates are known, per pruning kind, to rule out others before their rates
    are searched (bound-first pruning for mix_designs).

    Design B is beaten when m >= 1 replicas of a known design A of its kind (the same role and
    hosts) use no more of each device type and no more power than one replica of B, and serve
    at least B's bounds (a full-load capacity no rate exceeds) of every class: then m x
    rate_A >= bound_B >= rate_B, which is the test undominated drops B by (planner.estimator.request_mix).
    A comes before B in undominated's order (less power, else fewer devices, else a larger rate
    sum, else an earlier position; a tie in everything counts only where A's position is
    earlier), so undominated would drop B against A or against whatever drops A (m1 copies of
    m2 copies): leaving B out beforehand changes nothing it returns."""

    def __init__(self, types: list[str], classes: int) -> None:
        self.types = types
        self.classes = classes
        self.rows: dict[object, list[tuple[list[float], list[float], tuple[int, int]]]] = {}
        self.packed: dict[object, tuple[npt.NDArray[Any], ...]] = {}

    def _use(self, d: Design) -> list[float]:
        return [float(d.devices.get(x, 0)) for x in self.types] + [d.power_w]

    def add(self, kind: object, d: Design, rates: dict[int, float], pos: tuple[int, int]) -> None:
        row = [0.0] * self.classes
        for k, r in rates.items():
            row[k] = r
        self.rows.setdefault(kind, []).append((self._use(d), row, pos))
        self.packed.pop(kind, None)

    @staticmethod
    def _pack(
        rows: list[tuple[list[float], list[float], tuple[int, int]]],
    ) -> tuple[npt.NDArray[Any], ...]:
        """A kind's witnesses as arrays: rates, positions, which resources each uses, the
        inverse of each use (0 where unused), power and devices; what `fitting` reads of them
        for every design it tests, worked out once per witness added."""
        use = np.array([r[0] for r in rows])
        held = use > 0
        inv = np.where(held, 1.0 / np.where(held, use, 1.0), 0.0)
        rate = np.array([r[1] for r in rows])
        where = np.array([r[2] for r in rows], dtype=np.float64)
        return rate, where, held, inv, use[:, -1], use[:, :-1].sum(axis=1)

    def beaten(self, kind: object, d: Design, pos: tuple[int, int]) -> Beaten:
        """The test for `d` at `pos` (class, place): whether its bounds are beaten."""

        # The witnesses that fit in one replica of d, as of the last witness added: their
        # rates times the copies that fit, and whether each ties d (rechecked per bound).
        cache: dict[str, object] = {"n": -1}

        def fitting() -> tuple[npt.NDArray[np.float64], ...]:
            rows = self.rows[kind]
            if cache["n"] != len(rows):
                if kind not in self.packed:
                    self.packed[kind] = self._pack(rows)
                rate, where, held, inv, power, devices = self.packed[kind]
                mine = np.array(self._use(d))
                # As undominated counts them: replicas of each known design that fit in one of d.
                copies = np.floor(np.where(held, mine * inv, np.inf).min(axis=1) * (1 + 1e-12))
                fit = copies >= 1
                same = (copies == 1) & (power == mine[-1]) & (devices == mine[:-1].sum())
                earlier = (where[:, 0] < pos[0]) | (
                    (where[:, 0] == pos[0]) & (where[:, 1] < pos[1])
                )
                cache["n"] = len(rows)
                cache["arrays"] = (
                    copies[fit, None] * rate[fit],
                    rate[fit],
                    (same & ~earlier)[fit],
                )
            return cache["arrays"]  # type: ignore[return-value]

        def test(bound: dict[int, float]) -> bool:
            if not self.rows.get(kind):
                return False
            served, rate, tie_later = fitting()
            if not len(served):
                return False
            need = np.zeros(self.classes)
            for k, r in bound.items():
                need[k] = r
            beats = (served >= need).all(axis=1)
            # A tie in everything beats d only from an earlier position.
            tie = tie_later & (rate == need).all(axis=1)
            return bool((beats & ~tie).any())

        def threshold(bound: dict[int, float], k: int) -> float:
            """The most class `k`'s bound may be, the others' as in `bound`, for a witness to
            serve at least every bound (-inf: none does). Above it `test` is False whatever
            the ties; at or below it `test` is True but for an exact tie."""
            if not self.rows.get(kind):
                return -math.inf
            served = fitting()[0]
            if not len(served):
                return -math.inf
            need = np.zeros(self.classes)
            for c, r in bound.items():
                need[c] = r
            need[k] = 0.0
            covers = (served >= need).all(axis=1)
            return float(served[covers, k].max()) if covers.any() else -math.inf

        return Beaten(test, threshold)


def undominated(designs: list[Design], serves: list[dict[int, float]]) -> npt.NDArray[np.int64]:
    """Indices, in order, of the designs no multiple of another design beats (module docstring);
    of identical ones the first stays.

    Rows go by rising power, then devices, then falling rates: whatever beats a row comes before
    it. Each row is tried against the rows kept so far only, since a row beaten by a dropped one
    is beaten by whatever dropped it (m1 copies of m2 copies).
    """
    types = sorted({x for d in designs for x in d.devices})
    n = len(designs)
    use = np.array(
        [[d.devices.get(x, 0) for x in types] + [d.power_w] for d in designs], dtype=np.float64
    )
    classes = 1 + max((k for s in serves for k in s), default=0)
    rate = np.zeros((n, classes))
    for j, s in enumerate(serves):
        for k, r in s.items():
            rate[j, k] = r
    order = np.lexsort([np.arange(n), -rate.sum(axis=1), use[:, :-1].sum(axis=1), use[:, -1]])
    held = use > 0
    inv = np.where(held, 1.0 / np.where(held, use, 1.0), 0.0)
    kept = np.zeros(n, dtype=np.int64)
    count = 0
    for j in order.tolist():
        if count:
            at = kept[:count]
            # Replicas of each kept design that fit in one of j: the tightest of its columns.
            ratio = np.where(held[at], use[j] * inv[at], np.inf).min(axis=1)
            copies = np.floor(ratio * (1 + 1e-12))
            if np.any((copies >= 1) & np.all(copies[:, None] * rate[at] >= rate[j], axis=1)):
                continue
        kept[count] = j
        count += 1
    return np.sort(kept[:count])
