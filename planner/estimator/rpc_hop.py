"""The time llama.cpp's RPC backend adds to a pipeline over several machines, from its protocol.

llama.cpp splits the layers over remote servers with its RPC backend (ggml/src/ggml-rpc/
ggml-rpc.cpp in ggml-org/llama.cpp): the client runs the scheduler, the RPC servers come first
in its device list and the client's own device holds the last layers and the output head, so a
token visits each remote server once and every hidden state crosses the client
(`ggml_backend_rpc_buffer_cpy_tensor` copies only between buffers of one server; a boundary
between two servers falls back to a GET_TENSOR into the client and a SET_TENSOR out, as
unsloth's llama.cpp PR #196 describes). One decode step sends each remote stage, in order:

- SET_TENSOR of its inputs (the hidden state, the positions, the attention mask): no reply since
  llama.cpp PR #12943 (2025-04, "RPC_CMD_SET_TENSOR always returns an empty response and we send
  this 4 times per token"); before it, each waited for its reply.
- GRAPH_COMPUTE with the stage's whole graph serialized, `serialize_graph`:
  | device (4 bytes) | n_nodes (4) | node ids (8 each) | n_tensors (4) | rpc_tensor (296 each) |,
  for every node and every tensor they reach (weights, KV-cache views, inputs). The client
  waited for its status reply (rpc_msg_graph_compute_rsp; in PR #16276, 2025-10-08, slaren:
  "every command blocks until a response is received from the server"). From PR #15405
  ("rpc : reuse compute graphs", its review thread 2025-11-26) the server keeps the last graph
  and an unchanged one is replayed with GRAPH_RECOMPUTE, a 4-byte request; the source after
  PR #22701 (2026-05) sends both without a reply.
- GET_TENSOR of the stage's output: the one reply every release waits for.

So a remote stage costs per token a number of synchronous round trips (`Engine.rpc_round_trips`:
1 in current builds, 2 in those between PRs #12943 and #15405, and, before PR #12943, 2 plus the
four SET_TENSOR replies PR #12943 counts) of the engine's own time each
(`Engine.rpc_round_trip_us`, measured: LLMKube issue 1423), plus, in builds before PR #15405
(`Engine.rpc_graph_resent`), the serialized graph over the link. The hidden states themselves
cross the link as the hop's own transfer (replica.hop_seconds), not here.

The client's own stage makes no round trip: with S machines, S - 1 remote stages. The planner
charges the engine's time on each of the S hops between machines (the last one's back to the
first), so each carries (S - 1) / S of a remote stage's time (`rpc_hop_seconds`), which sums to
the S - 1 remote stages per token of one sequence. A remote stage's graph is that of the
model's blocks shared evenly over the machines (L / S blocks), over the slowest route between
them (planner.estimator.replica.hop_extras; the design enumeration charges the same), so the
time is one figure per hop whatever the split the enumeration is still choosing.

Not charged: the hidden state crosses as F32 (hidden x 4 bytes), where replica.hop_bytes counts
2 bytes per value; the positions and attention mask each remote stage also receives per token
(SET_TENSOR, no reply; the mask's size depends on the build's padding of it); a pipeline of
local GPUs and RPC servers where the client holds more than the last stage.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

# sizeof(rpc_tensor) in ggml-rpc.cpp (packed): id 8 + type 4 + buffer 8 + ne[4] x 4 + nb[4] x 4
# + op 4 + op_params 64 (GGML_MAX_OP_PARAMS) + flags 4 + src[10] x 8 (GGML_MAX_SRC) + view_src 8
# + view_offs 8 + data 8 + name 64 (GGML_MAX_NAME) + 4 (padding, later use_count) = 296 bytes.
RPC_TENSOR_BYTES = 296
NODE_ID_BYTES = 8  # each graph node's id, a uint64_t
GRAPH_HEADER_BYTES = 12  # device, n_nodes and n_tensors, a uint32_t each
# Nodes and tensors of one block's decode graph: jukofyork's GRAPH_COMPUTE log in llama.cpp
# PR #15405 (2025-10-24), GLM-4.6 355B (glm4moe, Q6_K, flash attention) with 15 blocks on each
# RPC server: "n_nodes: 1080, n_tensors: 1400", 423,040 bytes = 1080 x 8 + 1400 x 296. Per block:
# 72 nodes and 93.3 tensors. The one published count; a dense block has fewer (no router, no
# expert selection), so it is an upper figure there.
NODES_PER_BLOCK = 1080 / 15
TENSORS_PER_BLOCK = 1400 / 15

_Num = Any  # a float or a numpy array of them


def graph_bytes(layers: _Num) -> _Num:
    """Bytes of one GRAPH_COMPUTE request for a stage of `layers` blocks (serialize_graph)."""
    per_block = NODES_PER_BLOCK * NODE_ID_BYTES + TENSORS_PER_BLOCK * RPC_TENSOR_BYTES
    return GRAPH_HEADER_BYTES + np.asarray(layers, dtype=np.float64) * per_block


def remote_stage_seconds(
    round_trip_s: _Num, round_trips: _Num, graph_resent: _Num, layers: _Num, byte_s: _Num
) -> npt.NDArray[np.float64]:
    """Seconds one remote stage of `layers` blocks adds to a token: `round_trips` synchronous
    round trips of `round_trip_s` each, and where the release sends the whole graph each step
    (`graph_resent`), its bytes at `byte_s` seconds per byte of the link (1 / bandwidth).
    Numbers or numpy arrays (an enumeration's options), broadcast together."""
    graph = np.where(np.asarray(graph_resent, dtype=bool), graph_bytes(layers) * byte_s, 0.0)
    return np.asarray(np.asarray(round_trips) * round_trip_s + graph, dtype=np.float64)


def rpc_hop_seconds(
    round_trip_s: _Num,
    round_trips: _Num,
    graph_resent: _Num,
    layers: _Num,
    byte_s: _Num,
    machines: _Num,
) -> npt.NDArray[np.float64]:
    """The engine's own seconds on each hop between machines of a pipeline over `machines`
    machines whose remote stages hold `layers` blocks: (machines - 1) / machines of a remote
    stage's time (remote_stage_seconds), so the hops of one token sum to its machines - 1
    remote stages; 0 for one machine."""
    n = np.asarray(machines, dtype=np.float64)
    share = np.where(n > 1, (n - 1) / np.maximum(n, 1), 0.0)
    stage = remote_stage_seconds(round_trip_s, round_trips, graph_resent, layers, byte_s)
    return np.asarray(share * stage, dtype=np.float64)


class RpcTimes(NamedTuple):
    """An engine release's RPC protocol (Engine.rpc_round_trip_us, rpc_round_trips,
    rpc_graph_resent), seconds per round trip."""

    round_trip_s: float = 0.0
    round_trips: int = 0
    graph_resent: bool = False

    @property
    def charged(self) -> bool:
        """Whether the protocol adds any time to a hop between machines."""
        return self.round_trip_s * self.round_trips > 0 or self.graph_resent

    def hop_seconds(self, layers: _Num, byte_s: _Num, machines: _Num) -> npt.NDArray[np.float64]:
        """rpc_hop_seconds with this release's protocol."""
        return rpc_hop_seconds(
            self.round_trip_s, self.round_trips, self.graph_resent, layers, byte_s, machines
        )


NO_RPC = RpcTimes()
