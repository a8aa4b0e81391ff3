"""serving._both reads an iteration table's pair (with a chunk, without) by IterationTime's own
interpolation: the same figures to the last bit as two calls, on and off the grid, past its
edges and for a table of one decode row."""

from __future__ import annotations

import itertools

from planner.catalog import load_catalog
from planner.estimator.replica import IterationTime, StageSpec
from planner.estimator.serving import _both


def _table(batch: int) -> IterationTime:
    cat = load_catalog()
    dev = cat.accelerator("h100-sxm")
    m = cat.model("llama-3.1-70b")
    link = cat.link("infiniband-ndr") if "infiniband-ndr" in cat.links else cat.link("pcie5")
    stages = [StageSpec(device=dev, tp=4, layers=m.num_layers // 2) for _ in range(2)]
    return IterationTime(
        m, "fp8", "fp8", batch=batch, context=1200, prompt=1000, output=200, stages=stages,
        link=link,
    )  # fmt: skip


def test_the_pair_equals_two_calls_bit_for_bit() -> None:
    for batch in (1, 24, 200):
        it = _table(batch)
        xs, ys = it.n_grid.tolist(), it.p_grid.tolist()
        decodes = [-1.0, 0.0, 0.5, 1.0, 1.5, xs[-1] * 0.37, xs[-1], xs[-1] + 3.0]
        tokens = [0.0, 1.0, ys[1], ys[2] * 1.01, ys[-1] * 0.61, ys[-1], ys[-1] * 2.0]
        for n, p in itertools.product(decodes, tokens):
            assert _both(it, n, p) == (it(n, p), it(n, 0.0)), (batch, n, p)


def test_a_plain_function_is_called_twice() -> None:
    def f(n: float, p: float) -> float:
        return 1e-3 * n + 2e-6 * p

    assert _both(f, 3.0, 500.0) == (f(3.0, 500.0), f(3.0, 0.0))


def test_a_table_of_one_decode_row_reads_that_row() -> None:
    """A grid of one decode count (a prefill engine's table at no decodes): every decode count
    reads row 0, interpolated along the prompt tokens alone, by the pair as by the call."""
    it = _table(24)
    row = it.row(0)
    it._xs, it._z = [0.0], [row]
    ys = it._ys
    half = 0.5 * (ys[1] + ys[2])  # midway between the 2nd and 3rd prompt-token points
    want = row[1] * 0.5 + row[2] * 0.5
    for n in (0.0, 3.0, 500.0):
        assert it(n, half) == want
        assert _both(it, n, half) == (want, row[0])
