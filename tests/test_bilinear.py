"""The iteration table's bilinear reading (planner.estimator.bilinear): its clamps are spelled
as comparisons instead of builtin min and max, for speed; the figures must be the very floats the
builtins give (plans are compared byte for byte across revisions), at the edges, on grid
points, between them and past both ends, and the interpolation itself exact at grid points."""

from __future__ import annotations

import bisect
import itertools
import math
import random

import pytest

from planner.estimator.bilinear import BilinearTable


class _Table(BilinearTable):
    def __init__(self, xs: list[float], ys: list[float], z: list[list[float]]) -> None:
        self._xs, self._ys, self._z = xs, ys, z


def _builtin(t: _Table, decodes: float, tokens: float) -> float:
    """The reading as written with builtin min and max (before the comparisons)."""
    xs, ys, z = t._xs, t._ys, t._z
    y = min(max(tokens, ys[0]), ys[-1])
    j = min(bisect.bisect_right(ys, y) - 1, len(ys) - 2)
    b = (y - ys[j]) / (ys[j + 1] - ys[j])
    if len(xs) == 1:
        return z[0][j] * (1 - b) + z[0][j + 1] * b
    x = min(max(decodes, xs[0]), xs[-1])
    i = min(bisect.bisect_right(xs, x) - 1, len(xs) - 2)
    a = (x - xs[i]) / (xs[i + 1] - xs[i])
    lo = z[i][j] * (1 - a) + z[i + 1][j] * a
    hi = z[i][j + 1] * (1 - a) + z[i + 1][j + 1] * a
    return lo * (1 - b) + hi * b


def _table(rng: random.Random, rows: int) -> _Table:
    xs = sorted({float(round(rng.uniform(0, 256))) for _ in range(rows)} | {0.0})
    ys = sorted({rng.uniform(0, 4096) for _ in range(9)} | {0.0, 4096.0})
    z = [[rng.uniform(1e-3, 1.0) for _ in ys] for _ in xs]
    return _Table(xs, ys, z)


@pytest.mark.parametrize("rows", [1, 2, 5, 65])
def test_readings_are_the_builtins_floats(rows: int) -> None:
    rng = random.Random(rows)
    t = _table(rng, rows) if rows > 1 else _Table([1.0], [0.0, 512.0], [[0.25, 0.75]])
    edges = [-1.0, -0.0, 0.0, math.inf, -math.inf, 1e-300]
    points = t._xs + t._ys + edges + [rng.uniform(-50, 5000) for _ in range(200)]
    for d, p in itertools.product(points[:60], points):
        want = _builtin(t, d, p)
        assert t(d, p) == want or (math.isnan(want) and math.isnan(t(d, p)))
        got, alone = t.pair(d, p)
        assert got == t(d, p) or math.isnan(got)
        assert alone == t(d, 0.0) or math.isnan(alone)


def test_grid_points_read_their_own_figures() -> None:
    t = _Table(
        [0.0, 4.0, 8.0], [0.0, 100.0, 200.0], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
    )
    assert t(4.0, 100.0) == 5.0
    assert t(8.0, 200.0) == 9.0  # the last row and column (the clamp's upper ends)
    assert t(-3.0, -5.0) == 1.0  # below both ends: the first figure
    assert t(2.0, 50.0) == 3.0  # halfway between four figures 1, 2, 4, 5 by hand
