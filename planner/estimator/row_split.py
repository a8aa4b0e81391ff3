"""A llama.cpp decode step split by rows over several GPUs, as its builds before 2024 ran it.

Before llama.cpp PR #4766 ("llama : ggml-backend integration", merged January 2024) a CUDA run on
several GPUs had one mode, the one PR #4766 kept as `--split-mode row`: every weight matrix is
split by rows over the GPUs (`--tensor-split`, by free memory: evenly over equal cards), each GPU
multiplies its rows, the results are copied back to the main GPU, and the main GPU runs
everything else (norms, RoPE, attention over the KV cache it holds alone). PR #4766 made the
layer split the default ("the advantages (faster pp, ...) outweigh the disadvantages (slower tg
than row split)", slaren, 2024-01-07); PR #19378 (2026) describes the row split as requiring "a
synchronization after every single operation". So a step reads each GPU's share of the weights
at once, and pays, per split matrix product, the host's orchestration of that product over the
GPUs: the activation sent to each, the launches, the partial results copied back, the events
waited on.

That time per split product is derived from llama.cpp's own 1-GPU against 3-GPU tables on three
Tesla P40s (7B, 13B and 33B q4_0, tg128), where the step difference is
t_3 - t_1 = -(2/3) x weights / bandwidth + products x sync, solved by least squares over the
three models for the bandwidth and `sync`:

- PR #2448 ("CUDA: faster multi GPU synchronization", 2023-07-29, 'master' column, before peer
  access): 47.41 / 43.45, 26.30 / 29.83, 11.51 / 15.37 t/s -> 304 GB/s, 43.6 us;
- PR #2470 ("CUDA: enable peer access between devices", 2023-07-31): 'master' 50.29 / 44.48,
  27.86 / 30.32, 12.11 / 15.85 t/s -> 313 GB/s, 46.6 us; with peer access ('PR' column,
  56.23, 37.46, 18.54 t/s) 312 GB/s, 25.2 us.

(LLaMA 1 q4_0 weights 3.83, 7.37 and 18.4 GB; 7 split products a block, q, k, v, o, gate, up,
down, and the output head: 225, 281 and 421.) The bandwidths found, 88-90 % of the P40's
346 GB/s, are what the part streams, which checks the split. Without peer access the copies
go through host memory: about 45 us per split product; with it, 25 us. In PR #4766 (2024-01-04,
'master', with peer access) two and three P40s ran 7B q4_0 at 50.20 and 55.16 t/s; against PR
#2470's one-P40 figure (50.29 t/s, 312 GB/s) the same arithmetic reads 27.4 and 28.6 us per
product: the time does not grow with the GPUs from two to three, so it is charged per product,
not per GPU.
"""

from __future__ import annotations

import numpy as np

from planner.estimator.architecture import attended_tokens, kv_elements_per_token_per_layer
from planner.estimator.decode_reads import kv_read_seconds_per_byte
from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import WeightFormat
from planner.estimator.memory import kv_shards
from planner.estimator.perf import _tp_allreduce_seconds, decode_step_seconds
from planner.estimator.prefill_path import Kernels
from planner.schema.catalog import ModelArch

# Host time per split matrix product of one step (the module docstring's derivation), seconds:
# copies between GPUs staged through host memory (no peer access), and with peer access.
ROW_SPLIT_SYNC_S = {False: 45e-6, True: 25e-6}

ATTENTION_PRODUCTS = 4  # q, k, v and output projections (llama.cpp's Llama graph)


def split_products_per_step(m: ModelArch) -> float:
    """Weight matrices one decode step multiplies, each split by rows: a block's attention
    projections and the MLP's matrices of every expert a token goes through (3 gated, 2
    plain), averaged over the layers, times the layers, plus the output head."""
    mlp = 3 if m.mlp == "gated" else 2
    per_block = float(ATTENTION_PRODUCTS + mlp)
    if m.moe is not None:
        moe_blocks = m.num_layers - m.moe.first_dense_layers
        routed = mlp * (m.moe.experts_per_token + m.moe.shared_experts) + 1  # + the router
        return (
            m.moe.first_dense_layers * per_block + moe_blocks * (ATTENTION_PRODUCTS + routed) + 1.0
        )
    return m.num_layers * per_block + 1.0


def row_split_step_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    batch: float,
    context: float,
    devices: int,
    kernels: Kernels,
    peer_access: bool,
) -> Array:
    """One decode step of `batch` sequences split by rows over `devices` GPUs of the table's
    one device: the step with the weights (and their products) shared by the GPUs
    (perf.decode_step_seconds at tp = devices), without the tensor-parallel all-reduces it
    charges (the partial results go back to the main GPU, a part of each product's host time),
    with the KV cache read whole on the main GPU, plus ROW_SPLIT_SYNC_S per split product."""
    shared = decode_step_seconds(
        m, fmt, kv_dtype_bytes, dev, batch=batch, context=context, tp=devices, kernels=kernels
    )
    reduces = m.num_layers * np.asarray(
        _tp_allreduce_seconds(m, dev, batch, devices, None, 5e-6), dtype=np.float64
    )
    kv = batch * attended_tokens(m, context) * kv_elements_per_token_per_layer(m) * kv_dtype_bytes
    unshared = 1.0 - 1.0 / np.asarray(kv_shards(m, devices), dtype=np.float64)
    kv_s = m.num_layers * kv * unshared * kv_read_seconds_per_byte(dev, kernels)
    sync = split_products_per_step(m) * ROW_SPLIT_SYNC_S[peer_access]
    return np.asarray(shared - reduces + kv_s + sync, dtype=np.float64)
