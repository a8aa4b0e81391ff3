"""A table of seconds over (sequences decoding, prompt tokens) read by bilinear interpolation,
clamped to its edges: replica.IterationTime's reading, in plain Python (the queueing model of
planner.estimator.serving calls it in its inner loops)."""

from __future__ import annotations

import bisect


class BilinearTable:
    """Reads `_xs` (decode counts, ascending), `_ys` (prompt tokens, ascending, at least two)
    and `_z` (one row of `_ys` values per entry of `_xs`), which a subclass sets. A row may be
    None until it is first read: `_fill` then makes it (and puts it in `_z`)."""

    _xs: list[float]
    _ys: list[float]
    _z: list[list[float] | None]

    def _fill(self, i: int) -> list[float]:
        """Make row i, put it in `_z` and return it (a subclass that leaves rows None)."""
        raise NotImplementedError(f"row {i} of the table was never made")

    def row(self, i: int) -> list[float]:
        """Row i of the table (the values at decode count `_xs[i]`)."""
        got = self._z[i]
        return self._fill(i) if got is None else got

    def __call__(self, decodes: float, prefill_tokens: float) -> float:
        """Bilinear interpolation on the grid, clamped to its edges (plain Python: this is
        called in the queueing model's inner loops)."""
        xs = self._xs
        if len(xs) == 1:
            return self._at(0, 0.0, prefill_tokens)
        i, a = self._row(xs, decodes)
        return self._at(i, a, prefill_tokens)

    def pair(self, decodes: float, prefill_tokens: float) -> tuple[float, float]:
        """(self(decodes, prefill_tokens), self(decodes, 0)), the queueing model's pair at
        every step (serving._both), with the decodes' row looked up once: the same arithmetic,
        so the same figures to the last bit."""
        xs = self._xs
        if len(xs) == 1:
            return self._at(0, 0.0, prefill_tokens), self._at(0, 0.0, 0.0)
        i, a = self._row(xs, decodes)
        return self._at(i, a, prefill_tokens), self._at(i, a, 0.0)

    @staticmethod
    def _row(xs: list[float], decodes: float) -> tuple[int, float]:
        """The decode row below `decodes` clamped to the grid, and the weight of the row
        above. min(max(decodes, xs[0]), xs[-1]) and min(row, len(xs) - 2) are spelled out as
        comparisons (the same floats, the same ties: max keeps its first argument unless the
        second is greater, min unless the second is less): the builtins' calls were about a
        sixth of an iteration-table read, which the queueing model makes about 20 of per
        latency evaluation."""
        lo, hi = xs[0], xs[-1]
        x = lo if lo > decodes else decodes
        if hi < x:
            x = hi
        i = bisect.bisect_right(xs, x) - 1
        if i > len(xs) - 2:
            i = len(xs) - 2
        return i, (x - xs[i]) / (xs[i + 1] - xs[i])

    def _at(self, i: int, a: float, prefill_tokens: float) -> float:
        """The interpolation between decode rows i and i + 1 at weight `a` (0: row i alone,
        the only row of a one-row grid), at `prefill_tokens` clamped to the grid."""
        ys, z = self._ys, self._z
        lo, hi = ys[0], ys[-1]  # clamped as _row clamps the decodes
        y = lo if lo > prefill_tokens else prefill_tokens
        if hi < y:
            y = hi
        j = bisect.bisect_right(ys, y) - 1
        if j > len(ys) - 2:
            j = len(ys) - 2
        b = (y - ys[j]) / (ys[j + 1] - ys[j])
        under = z[i]
        if under is None:
            under = self._fill(i)
        if len(z) == 1:
            return under[j] * (1 - b) + under[j + 1] * b
        over = z[i + 1]
        if over is None:
            over = self._fill(i + 1)
        lo = under[j] * (1 - a) + over[j] * a
        hi = under[j + 1] * (1 - a) + over[j + 1] * a
        return lo * (1 - b) + hi * b
