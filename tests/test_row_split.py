"""llama.cpp's row split (planner/estimator/row_split.py): its host time per split matrix
product comes from llama.cpp's own 1-GPU against 3-GPU tables, and a step is the shared step
plus that time for each product."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import decode_step_seconds
from planner.estimator.row_split import (
    ROW_SPLIT_SYNC_S,
    row_split_step_seconds,
    split_products_per_step,
)

ROOT = Path(__file__).resolve().parent.parent

# Tesla P40, LLaMA 1 q4_0, tg128, t/s on one GPU and on three: (weights GB, split products,
# one GPU, three GPUs) for 7B, 13B and 33B (q4_0 files of 3.56, 6.86 and 17.1 GiB).
# llama.cpp PR #2448 (2023-07-29), '1x P40' and 'master' columns, before peer access.
PR_2448_NO_PEER = [(3.83, 225, 47.41, 43.45), (7.37, 281, 26.30, 29.83), (18.4, 421, 11.51, 15.37)]
# llama.cpp PR #2470 (2023-07-31), '1x P40' with 'master' (no peer access) and 'PR' (peer access).
PR_2470_NO_PEER = [(3.83, 225, 50.29, 44.48), (7.37, 281, 27.86, 30.32), (18.4, 421, 12.11, 15.85)]
PR_2470_PEER = [(3.83, 225, 50.29, 56.23), (7.37, 281, 27.86, 37.46), (18.4, 421, 12.11, 18.54)]


def sync_from_table(rows: list[tuple[float, int, float, float]]) -> tuple[float, float]:
    """(bandwidth GB/s, seconds per split product) solving t_3 - t_1 = -(2/3) W / B + N s by
    least squares over the models."""
    a = np.array([[-(2 / 3) * gb, n] for gb, n, _, _ in rows])
    b = np.array([1 / t3 - 1 / t1 for _, _, t1, t3 in rows])
    (inv_bw, s), *_ = np.linalg.lstsq(a, b, rcond=None)
    return 1 / inv_bw, float(s)


def test_the_synchronization_times_are_the_p40_tables() -> None:
    fits = [sync_from_table(PR_2448_NO_PEER), sync_from_table(PR_2470_NO_PEER)]
    # 43.6 and 46.6 us; the bandwidths they imply (304 and 313 GB/s) are 88-90 % of the P40's
    # 346 GB/s, what the part streams.
    assert [round(s * 1e6, 1) for _, s in fits] == [43.6, 46.6]
    assert all(300 < bw < 346 for bw, _ in fits)
    assert ROW_SPLIT_SYNC_S[False] == pytest.approx(np.mean([s for _, s in fits]), abs=1e-6)
    bw, peer = sync_from_table(PR_2470_PEER)
    assert round(peer * 1e6, 1) == 25.2 and 300 < bw < 346
    assert ROW_SPLIT_SYNC_S[True] == pytest.approx(peer, abs=1e-6)


def test_split_products_count_the_matrices_of_a_step() -> None:
    cat = load_catalog()
    # Llama 2: q, k, v, o, gate, up, down in each block, and the output head.
    assert split_products_per_step(cat.model("llama-2-7b")) == 32 * 7 + 1
    assert split_products_per_step(cat.model("llama-2-70b")) == 80 * 7 + 1


def test_a_step_is_the_shared_step_plus_the_host_time_of_every_product() -> None:
    cat = load_catalog()
    m, fmt = cat.model("llama-2-70b"), weight_format("q4_0")
    dev = device_table([cat.accelerator("rtx-3090")])
    shape = {"batch": 1.0, "context": 385.0, "kernels": "llama.cpp-dequantizing"}
    host = row_split_step_seconds(m, fmt, 2.0, dev, devices=2, peer_access=False, **shape)
    peer = row_split_step_seconds(m, fmt, 2.0, dev, devices=2, peer_access=True, **shape)
    # 561 products x (45 - 25) us = 11.22 ms.
    assert float(host[0] - peer[0]) == pytest.approx(561 * 20e-6, rel=1e-9)
    # On one GPU nothing is shared: one device's step and the products' host time.
    one = row_split_step_seconds(m, fmt, 2.0, dev, devices=1, peer_access=False, **shape)
    whole = decode_step_seconds(m, fmt, 2.0, dev, tp=1, **shape)
    assert float(one[0] - whole[0]) == pytest.approx(561 * 45e-6, rel=1e-9)
    # Two GPUs read half the weights each: faster than one before the host time.
    assert float(host[0]) - 561 * 45e-6 < float(whole[0])


def test_the_december_2023_rows_run_the_row_split_without_peer_access() -> None:
    spec = importlib.util.spec_from_file_location("calibration_fit", ROOT / "calibration/fit.py")
    assert spec and spec.loader
    fit = importlib.util.module_from_spec(spec)
    sys.modules["calibration_fit"] = fit
    spec.loader.exec_module(fit)
    rows, _ = fit.load_rows()
    split = {(r.meas.source, r.meas.device): r for r in rows if fit.is_layer_split(r)}
    for device in ("rtx-3090", "rtx-4090"):
        dec = split[("xd-gpu-bench-llama2", device)]
        assert fit.is_row_split(dec) and fit.NO_PEER_ACCESS.search(dec.meas.notes)
        # May 2024 builds (after PR #4766) split the layers.
        assert not fit.is_row_split(split[("xd-gpu-bench-llama3", device)])
