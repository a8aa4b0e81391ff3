"""What a request mix's design enumeration reuses gives the figures it would compute afresh, to
the last bit: an iteration table's rows made as lists when first read, its pipeline hops made
once per grid and route, and a prefill engine's rate searched once for designs that differ only
in their batch (the search never reads the batch: test_request_mix_prefill_table)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator import request_mix as rm
from planner.estimator.comm import pipeline_activation_bytes, sampled_token_bytes
from planner.estimator.designs import allowed_devices
from planner.estimator.hosts import with_machines
from planner.estimator.iteration_parts import grid_hops
from planner.estimator.mix_enumeration import mix_designs
from planner.estimator.replica import IterationTime, StageSpec, _grid, hop_bytes, hop_seconds
from planner.estimator.routes import Route
from planner.estimator.serving import RateSearch
from planner.load import load_problem

ROOT = Path(__file__).resolve().parent.parent


def _stages(n: int, routed: bool) -> tuple[list[StageSpec], object]:
    cat = load_catalog()
    dev = cat.accelerator("h100-sxm")
    link = cat.link("pcie5")
    slow = cat.link("ib-hdr")
    hop = Route((link, slow)) if routed else None
    layers = cat.model("llama-3.1-70b").num_layers // n
    return [StageSpec(device=dev, tp=2, layers=layers, hop=hop) for _ in range(n)], link


@pytest.mark.parametrize(("depth", "routed"), [(1, False), (2, False), (3, True)])
def test_grid_hops_equal_hop_seconds_over_the_grid(depth: int, routed: bool) -> None:
    """The cached hops are replica.hop_seconds over the grid's hop bytes, as the table built
    them before, bit for bit, on the first call and on a repeated one."""
    stages, link = _stages(depth, routed)
    m = load_catalog().model("llama-3.1-70b")
    _, _, n, p = _grid(48, 2048.0, 1000)
    fwd, back = hop_bytes(n, p, 1000, m.hidden_size)
    fwd = np.maximum(fwd, pipeline_activation_bytes(1, 1, m.hidden_size))
    back = np.maximum(back, sampled_token_bytes(1.0))
    want = hop_seconds(stages, link, fwd, back)  # type: ignore[arg-type]
    for _ in range(2):
        got = grid_hops(stages, link, n, p, 1000, m)  # type: ignore[arg-type]
        assert len(got) == depth
        for g, w in zip(got, want, strict=True):
            assert g.shape == n.shape and np.array_equal(g, w)
    if depth > 1:  # a hop costs something: the comparison is not of zeros
        assert all(float(g.min()) > 0 for g in got)


def test_rows_made_when_read_equal_the_whole_table() -> None:
    """A table's rows are lists only once read; each equals that row of the whole table, and a
    reading gives the same figure as on a table whose rows were all made beforehand."""
    stages, link = _stages(2, False)
    cat = load_catalog()
    kw = dict(batch=40, context=1200, prompt=1000, output=200, stages=stages, link=link)
    lazy = IterationTime(cat.model("llama-3.1-70b"), "fp8", "fp8", **kw)  # type: ignore[arg-type]
    eager = IterationTime(cat.model("llama-3.1-70b"), "fp8", "fp8", **kw)  # type: ignore[arg-type]
    assert all(r is None for r in lazy._z)
    eager._z = eager.table.tolist()
    xs, ys = lazy._xs, lazy._ys
    for n, q in itertools.product([0.0, 1.0, 2.5, xs[-1] * 0.4, xs[-1], 99.0], [0.0, ys[3], 700.0]):
        assert lazy(n, q) == eager(n, q)
        assert lazy.pair(n, q) == eager.pair(n, q)
    made = [i for i, r in enumerate(lazy._z) if r is not None]
    assert 0 < len(made) < len(xs)  # read rows only
    for i in made:
        assert lazy.row(i) == eager.table[i].tolist()


def test_a_prefill_search_runs_once_for_every_batch() -> None:
    """No latency of a prefill engine is evaluated twice at one rate on the same stages: the
    designs that differ only in their batch share one remembered rate or one stopped search
    resumed (before, each batch searched its prefill rate from the start again)."""
    p = load_problem(ROOT / "problems" / "p95-latency-70b.yaml")
    cat = with_machines(load_catalog(), p)
    w = p.workloads[0]
    rm._RATES.clear()
    rm._STOPPED.clear()
    rm._PREFILL.clear()
    seen: Counter[tuple[object, ...]] = Counter()
    real = rm.prefill_search

    def counted(w, it, stages, link, P):  # type: ignore[no-untyped-def]
        search: RateSearch = real(w, it, stages, link, P)
        latency = search.latency
        shape = tuple((st.device.id, st.tp, st.layers, st.link_args()) for st in stages)

        def each(r: float):  # type: ignore[no-untyped-def]
            seen[(shape, P, tuple(it._ys), tuple(it.row(0)), r)] += 1
            return latency(r)

        search.latency = each
        return search

    mp = pytest.MonkeyPatch()
    mp.setattr(rm, "prefill_search", counted)
    try:
        designs, _, _ = mix_designs(w, p, cat, allowed_devices(p, cat), prune=True)  # type: ignore[arg-type]
    finally:
        mp.undo()
    assert designs and any(d.role == "prefill" for d in designs)
    assert sum(seen.values()) > 100  # prefill searches ran
    assert max(seen.values()) == 1, [k[0] for k, v in seen.items() if v > 1][:3]
