"""How an engine's tensor-parallel group exchanges activations between machines, by release.

The planner's default (planner.estimator.perf, `_tp_allreduce_seconds`) is Megatron-LM's layout
(Shoeybi et al. 2019): every matrix of a block split over the n machines, attention by heads,
and two ring all-reduces of the hidden state per block. distributed-llama's releases divide the
work otherwise (benchmarks/pooled/distributed-llama.md records each from the engine's source):

- `mesh-allgather` (PR #64, release 0.7 and later; src/nn/nn-network.cpp): two exchanges per
  block; in each, every machine sends its partial sum of the block's output (d values) to every
  other machine over a full mesh and adds the others' locally. Per token, each machine's port
  sends and receives (n - 1) d b bytes at once (full duplex); each exchange takes one link
  latency and the engine's own time per exchange. The README's "Network Transfer for
  Generating Single Token (0.7.1)" (544 / 1632 / 3808 kB for Llama 3 8B on 2 / 4 / 8
  machines) is 4 (n - 1) d b L, exactly: 2 (n - 1) d b L sent and as much received.
- `star-root` (releases 0.1.0 to 0.3.x; src/llama2-tasks.cpp, the `llamaSync*` tasks): ten
  exchanges per block, each between the root and every worker in one direction; the bytes at
  the root's port per token are sent (n - 1) b [3d + h (n - 1) / n] and received
  (n - 1) b (3d + 2 kv + h) / n (the formula reproduces every transfer size the project
  published for those releases), one after another, so a block takes 10 (latency + the
  engine's own time) + (sent + received) / bandwidth. The root alone runs attention over the
  whole KV cache, the norms and the output head; only the seven matrices of a block are split.
  The formula is the Llama tasks' (dense blocks, h the FFN width); the releases' Mixtral and
  Grok tasks exchange expert outputs otherwise and are not modelled.

Notation: d hidden size, h FFN width, kv = KV heads x head size, n machines, b the engine's
bytes per exchanged value (Engine.exchange_value_bytes; Q80's 34 / 32 for distributed-llama).

The per-layer estimator charges a tensor-parallel group's exchanges as LAYER_ALLREDUCES ring
all-reduces of tokens x d x 2 bytes over a link given as (bytes/s, latency per ring step)
(planner.estimator.replica.StageSpec.link_args). Both that formula and each layout's are a
fixed time plus a time per token, so `ExchangeLayout.ring_equivalent` returns the pair under
which the ring formula gives the layout's time exactly, for any number of tokens: every path
that charges a tensor-parallel exchange (decode, prefill, the serving grid, the verifier)
charges the layout's. The star's root-only work is added per block and per step
(`root_block_seconds`, `head_divisor`), and its memory is the root's: the ends and the whole
KV cache beside its share of the blocks' matrices (`root_alone`, `kv_divisor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.catalog import Catalog
from planner.estimator.architecture import (
    attended_tokens,
    kv_elements_per_token_per_layer,
    recurrent_state_bytes_per_layer,
)
from planner.estimator.devices import DeviceTable
from planner.estimator.memory import kv_shard_divisor, kv_shards, state_shards
from planner.estimator.perf import LAYER_ALLREDUCES
from planner.schema.catalog import ModelArch

RING = "ring-allreduce"
MESH = "mesh-allgather"
STAR = "star-root"
EXCHANGES_PER_BLOCK = {MESH: 2, STAR: 10}


@dataclass(frozen=True)
class ExchangeLayout:
    """An engine release's exchanges for one model: `kind` (MESH or STAR), the model's hidden
    size `d`, FFN width `h` and KV width `kv` (KV heads x head size), and `value_bytes`, the
    bytes per exchanged value."""

    kind: str
    d: int
    h: int
    kv: int
    value_bytes: float

    def bytes_per_token(self, n: int) -> float:
        """Bytes per token per block through the busiest port (the layouts above)."""
        b, d, h, kv = self.value_bytes, self.d, self.h, self.kv
        if self.kind == MESH:
            return EXCHANGES_PER_BLOCK[MESH] * (n - 1) * d * b
        sent = (n - 1) * b * (3 * d + h * (n - 1) / n)
        received = (n - 1) * b * (3 * d + 2 * kv + h) / n
        return sent + received

    def block_seconds(
        self, n: int, tokens: float, bandwidth_bytes_s: float, latency_s: float, own_s: float
    ) -> float:
        """Seconds a block's exchanges take for `tokens` tokens over a link of
        `bandwidth_bytes_s` and `latency_s`, with the engine's `own_s` per exchange."""
        if n <= 1:
            return 0.0
        fixed = EXCHANGES_PER_BLOCK[self.kind] * (latency_s + own_s)
        return fixed + tokens * self.bytes_per_token(n) / bandwidth_bytes_s

    def ring_equivalent(
        self, n: int, bandwidth_bytes_s: float, latency_s: float, own_s: float
    ) -> tuple[float, float]:
        """(bytes/s, latency per ring step) under which LAYER_ALLREDUCES ring all-reduces of
        tokens x d x 2 bytes over n ranks (planner.estimator.comm.ring_allreduce_seconds: per
        all-reduce 2 (n - 1) / n x bytes / bandwidth + 2 (n - 1) x latency) take exactly
        `block_seconds`: the ring moves LAYER_ALLREDUCES x 2 (n - 1) / n x 2d bytes per token
        in LAYER_ALLREDUCES x 2 (n - 1) steps. One device exchanges nothing: the link as given."""
        if n <= 1:
            return bandwidth_bytes_s, latency_s
        ring_bytes = LAYER_ALLREDUCES * 2.0 * (n - 1) / n * 2.0 * self.d
        steps = LAYER_ALLREDUCES * 2.0 * (n - 1)
        fixed = EXCHANGES_PER_BLOCK[self.kind] * (latency_s + own_s)
        return bandwidth_bytes_s * ring_bytes / self.bytes_per_token(n), fixed / steps


def exchange_layout(cat: Catalog, engine: str | None, m: ModelArch) -> ExchangeLayout | None:
    """The layout of `engine`'s exchanges between machines for model `m` (Engine.tensor_layout),
    or None for the planner's default ring all-reduces (and without an engine)."""
    e = cat.engines.get(engine) if engine else None
    if e is None or e.tensor_layout == RING:
        return None
    kv = m.num_key_value_heads * m.attn_head_dim
    b = e.exchange_value_bytes or 2.0
    return ExchangeLayout(e.tensor_layout, m.hidden_size, m.intermediate_size, kv, b)


def head_divisor(layout: ExchangeLayout | None, tp: int) -> int:
    """Devices the output head is split over: the star's root runs it alone."""
    return 1 if root_alone(layout, tp) else tp


def root_alone(layout: ExchangeLayout | None, tp: int) -> bool:
    """A group of several machines in the star layout, whose root alone holds the embedding,
    the norms, the output head and the whole KV cache (it alone runs attention): the memory it
    needs is the root's (memory.inference_memory's `root_alone`)."""
    return layout is not None and layout.kind == STAR and tp > 1


def kv_divisor(layout: ExchangeLayout | None, m: ModelArch, tp: int) -> int:
    """Devices of a group the KV cache is split over, as its fullest device holds and reads
    it: 1 for the star's root, else memory.kv_shard_divisor."""
    return 1 if root_alone(layout, tp) else kv_shard_divisor(m, tp)


def root_block_seconds(
    layout: ExchangeLayout | None,
    m: ModelArch,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    decodes: Any,
    context: float,
    tp: int,
) -> Any:
    """Seconds per block the star's root spends beyond its share of a split block: it reads the
    whole KV cache of every decoding sequence where the per-layer estimator charges each device
    its KV heads' share (memory.kv_shards), and a hybrid model's whole recurrent state, read and
    written back, where it charges its heads' share (memory.state_shards). Attention's FLOPs and
    the norms are small beside that at decode and are not added. 0 for other layouts and one
    device."""
    if layout is None or layout.kind != STAR or tp <= 1:
        return 0.0
    kv_read = (
        np.asarray(decodes, dtype=np.float64)
        * attended_tokens(m, context)
        * kv_elements_per_token_per_layer(m)
        * kv_dtype_bytes
    )
    share = 1.0 - 1.0 / kv_shards(m, tp)
    state = np.asarray(decodes, dtype=np.float64) * 2.0 * recurrent_state_bytes_per_layer(m)
    state_share = 1.0 - 1.0 / float(state_shards(m, tp))
    return (kv_read * share + state * state_share) / (dev.bandwidth_bytes_s * dev.eff_bandwidth)
