"""A prefill engine's rate from the one-decode table (request_mix.PREFILL_TABLE_BATCH) equals
the rate from the table at the design's own batch, as the enumeration computed it before: the
prefill search reads the table's row at no decodes only, which the batch does not change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator import request_mix as rm
from planner.estimator.designs import PerDevice, allowed_devices, inference_designs, stage_specs
from planner.estimator.hosts import with_machines
from planner.estimator.network import network_link
from planner.estimator.pools import prefill_search
from planner.estimator.replica import IterationTime
from planner.estimator.serving import prefill_pool_budget, prefill_prompt
from planner.estimator.support import engine_times
from planner.load import load_problem
from planner.schema.problem import InferenceWorkload

ROOT = Path(__file__).resolve().parent.parent


def _reference(w: InferenceWorkload, cat, link, d, specs, c_i: int) -> tuple[float, np.ndarray]:  # type: ignore[no-untyped-def]
    """The prefill rate and table row 0 with the table at the design's own batch (the
    computation before the one-decode table)."""
    assert w.request_mix is not None
    c = w.request_mix[c_i]
    P = prefill_prompt(c.input_tokens, w.prefix_cache_hit)
    it = IterationTime(
        cat.model(w.model), w.weights, w.kv, batch=d.batch,
        context=c.input_tokens + c.output_tokens, prompt=P, output=c.output_tokens,
        stages=specs, link=link, budget=prefill_pool_budget(P), **engine_times(cat, d.engine),
    )  # fmt: skip
    return prefill_search(w, it, specs, link, P).finish() * len(specs), it.table[0]


@pytest.mark.parametrize(
    ("problem", "sets"),
    [
        ("request-mix.yaml", ()),
        ("p95-latency-70b.yaml", ()),
        # Pipelines over several machines and a 24k-token class on small cards.
        ("request-mix.yaml", ("constraints.allowed_devices=[l4]",)),
    ],
)
def test_prefill_rate_from_the_one_decode_table_equals_the_full_table(
    problem: str, sets: tuple[str, ...]
) -> None:
    p = load_problem(ROOT / "problems" / problem, sets)
    cat = with_machines(load_catalog(), p)
    devs = allowed_devices(p, cat)
    link = network_link(p, cat)
    w = next(x for x in p.workloads if isinstance(x, InferenceWorkload) and x.request_mix)
    assert w.request_mix is not None
    checked, batches = 0, set()
    for c_i, c in enumerate(w.request_mix):
        sub = rm.class_workload(w, c_i)
        found = inference_designs(sub, p, cat, devs, prune=False, for_mix=True, shared=PerDevice())
        for d in found[:: max(1, len(found) // 25)]:
            specs = stage_specs(cat, p, d)
            want, row = _reference(w, cat, link, d, specs, c_i)
            got = rm._engine(w, cat, link, d.batch, specs, c, c, "prefill", d.engine)
            assert got.rate() == want, (d.id, d.batch)
            assert got.content is not None and got.content[-1] == tuple(row.tolist())
            checked += 1
            batches.add(d.batch)
    assert checked >= 20 and len(batches) >= 3  # the comparison spans designs and batches
