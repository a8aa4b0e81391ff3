"""llama.cpp RPC's time per pipeline hop from its protocol (planner.estimator.rpc_hop), pinned
to the byte counts of ggml/src/ggml-rpc/ggml-rpc.cpp and the measurements the catalog cites."""

from __future__ import annotations

from types import ModuleType

import pytest
from bench_scripts import load_script

from planner.catalog import load_catalog
from planner.estimator.rpc_hop import (
    RPC_TENSOR_BYTES,
    graph_bytes,
    remote_stage_seconds,
    rpc_hop_seconds,
)
from planner.estimator.support import engine_times

CAT = load_catalog()


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load_script("benchmarks/pooled/run.py", "bench_pooled_run")


def test_rpc_tensor_is_296_bytes() -> None:
    # struct rpc_tensor (packed): id u64, type u32, buffer u64, ne[4] u32, nb[4] u32, op u32,
    # op_params[GGML_MAX_OP_PARAMS / 4 = 16] i32, flags i32, src[GGML_MAX_SRC = 10] u64,
    # view_src u64, view_offs u64, data u64, name[GGML_MAX_NAME = 64], 4 bytes of padding.
    fields = [8, 4, 8, 4 * 4, 4 * 4, 4, 16 * 4, 4, 10 * 8, 8, 8, 8, 64, 4]
    assert sum(fields) == RPC_TENSOR_BYTES == 296


def test_graph_bytes_reproduce_the_published_graph_compute_log() -> None:
    # llama.cpp PR #15405, jukofyork (2025-10-24): GLM-4.6 with 15 blocks per RPC server,
    # "n_nodes: 1080, n_tensors: 1400", "1080*8 + 1400*296 = 423040" bytes, plus serialize_graph's
    # three uint32 counts (device, n_nodes, n_tensors).
    assert graph_bytes(15) == pytest.approx(423_040 + 12)
    # Per block: 1080 / 15 = 72 nodes of 8 bytes and 1400 / 15 tensors of 296 bytes.
    assert graph_bytes(1) - graph_bytes(0) == pytest.approx(72 * 8 + 1400 / 15 * 296)


def test_a_remote_stage_by_build_era() -> None:
    rt = 1.975e-3
    # Since PR #15405: one reply waited for (GET_TENSOR of the stage's output), no graph sent.
    assert remote_stage_seconds(rt, 1, False, 9, 1 / 0.625e9) == pytest.approx(1.975e-3)
    # April-November 2025 builds: GRAPH_COMPUTE's reply too, and the whole graph each token.
    # Nine blocks of a four-machine gpt-oss-120b pipeline (36 blocks) over 5 GbE (0.625 GB/s):
    # 12 + 9 x (72 x 8 + 1400 / 15 x 296) = 253,836 bytes = 0.406 ms; 2 x 1.975 + 0.406 ms.
    graph_s = (12 + 9 * (72 * 8 + 1400 / 15 * 296)) / 0.625e9
    assert graph_s == pytest.approx(0.406e-3, rel=1e-3)
    old = remote_stage_seconds(rt, 2, True, 9, 1 / 0.625e9)
    assert old == pytest.approx(2 * 1.975e-3 + graph_s)
    # Over 1 GbE the same graph takes five times as long; over 200 GbE it vanishes.
    slow = remote_stage_seconds(rt, 2, True, 9, 1 / 0.125e9)
    assert slow - old == pytest.approx(4 * graph_s)


def test_the_hops_of_a_token_sum_to_its_remote_stages() -> None:
    # S machines, the client's stage last (it holds the output head): S - 1 remote stages, the
    # planner's S hops between machines each carrying (S - 1) / S of one.
    for machines in (2, 3, 4, 8):
        per_hop = rpc_hop_seconds(1.975e-3, 2, False, 10, 0.0, machines)
        assert machines * per_hop == pytest.approx((machines - 1) * 2 * 1.975e-3)
    assert rpc_hop_seconds(1.975e-3, 1, True, 10, 1e-9, 1) == 0.0


def test_catalog_releases_carry_their_protocol() -> None:
    # The round trips per remote stage of each release (llama.cpp PRs #12943 and #15405):
    # current builds 1; April-November 2025 2 (GRAPH_COMPUTE's reply, GET_TENSOR's) with the
    # graph re-sent; 2023-2024 builds 2 + the four SET_TENSOR replies per token PR #12943 counts.
    rpc = {
        e: engine_times(CAT, e)["rpc"] for e in ("llama.cpp", "llama.cpp-2025", "llama.cpp-2024")
    }
    assert [(r.round_trips, r.graph_resent) for r in rpc.values()] == [
        (1, False),
        (2, True),
        (6, True),
    ]
    assert [r.round_trip_s for r in rpc.values()] == pytest.approx([1.975e-3] * 3)
    # Engines without an RPC backend add nothing.
    assert not engine_times(CAT, "vllm")["rpc"].charged


def test_the_round_trip_reproduces_its_two_spark_measurement(run: ModuleType) -> None:
    # LLMKube issue 1423: Qwopus 3.6 Fusion 27B (a Qwen3.6-27B fine-tune) Q4_K_M on two DGX
    # Sparks over the fabric's TCP (eth-200g) decodes at 12.42 tokens/s against 12.83 on one:
    # 1000 / 12.42 - 1000 / 12.83 = 2.573 ms more per token. The planner's two-Spark pipeline
    # under the catalog's llama.cpp adds the same over its one-Spark figure (ctx 8192 -> the
    # mean context of run.py's single stream, 4096). Within 0.15 ms: the added stage's own step
    # time comes from the calibrated device figures, which a refit moves.
    m, spark = CAT.model("qwen3.6-27b"), CAT.accelerator("dgx-spark")
    one = run.pipeline_seconds(m, "q4_k_m", [spark], None, 4096, "llama.cpp")
    two = run.pipeline_seconds(m, "q4_k_m", [spark] * 2, CAT.link("eth-200g"), 4096, "llama.cpp")
    assert (two - one) * 1e3 == pytest.approx(1000 / 12.42 - 1000 / 12.83, abs=0.15)
