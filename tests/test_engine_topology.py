"""distributed-llama's releases as they exchange: bytes pinned to the engine's own published
transfer sizes, times to hand arithmetic, and the ring-equivalent link to the layout's time."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.comm import ring_allreduce_seconds
from planner.estimator.engine_topology import (
    MESH,
    STAR,
    ExchangeLayout,
    exchange_layout,
    head_divisor,
    root_block_seconds,
)
from planner.estimator.perf import LAYER_ALLREDUCES
from planner.estimator.replica import StageSpec

CAT = load_catalog()
LLAMA3_8B = CAT.model("llama-3.1-8b")  # 32 blocks, d 4096, FFN 14336, 8 KV heads x 128
Q80 = 34 / 32  # bytes per value: 32 int8 values and one fp16 scale
KIB = 1024


def test_star_bytes_are_the_engines_published_transfer_sizes() -> None:
    # distributed-llama PR #46 (release 0.3.0), Llama 3 8B per token: 2 machines sent 646 kB
    # and received 476 kB at the root; 4 machines 2295 and 714 kB (kB = KiB in its table).
    # Hand: sent (n-1) b [3d + h(n-1)/n], received (n-1) b (3d + 2kv + h)/n per block, x 32.
    star = exchange_layout(CAT, "distributed-llama-0.3", LLAMA3_8B)
    assert star is not None and star.kind == STAR and star.value_bytes == Q80
    sent2 = Q80 * (3 * 4096 + 14336 / 2) * 32  # 661,504 B
    recv2 = Q80 * (3 * 4096 + 2 * 1024 + 14336) / 2 * 32  # 487,424 B
    assert (sent2 / KIB, recv2 / KIB) == pytest.approx((646, 476))
    assert star.bytes_per_token(2) * 32 == pytest.approx(sent2 + recv2)
    assert star.bytes_per_token(4) * 32 / KIB == pytest.approx(2295 + 714)


def test_mesh_bytes_are_the_readme_transfer_per_token() -> None:
    # distributed-llama README, "Network Transfer for Generating Single Token (0.7.1)", Llama 3
    # 8B: 544 / 1632 / 3808 kB per token on 2 / 4 / 8 machines, sent plus received per machine;
    # hand: each way 2 all-gathers x (n - 1) x 4096 x 34/32 B x 32 blocks = 272 KiB x (n - 1).
    mesh = exchange_layout(CAT, "distributed-llama", LLAMA3_8B)
    assert mesh is not None and mesh.kind == MESH
    for n, kib in ((2, 544), (4, 1632), (8, 3808)):
        assert 2 * mesh.bytes_per_token(n) * 32 / KIB == pytest.approx(kib)


def test_engines_without_a_layout_keep_the_ring() -> None:
    assert exchange_layout(CAT, "vllm", LLAMA3_8B) is None
    assert exchange_layout(CAT, None, LLAMA3_8B) is None
    assert head_divisor(None, 4) == 4


@pytest.mark.parametrize("kind", [MESH, STAR])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_the_ring_equivalent_link_charges_the_layouts_time(kind: str, n: int) -> None:
    layout = ExchangeLayout(kind, d=4096, h=14336, kv=1024, value_bytes=Q80)
    bw, lat, own = 0.125e9, 50e-6, 172e-6
    bw_eq, step = layout.ring_equivalent(n, bw, lat, own)
    for tokens in (1.0, 7.0, 512.0):
        ring = LAYER_ALLREDUCES * float(ring_allreduce_seconds(tokens * 4096 * 2, n, bw_eq, step))
        assert ring == pytest.approx(layout.block_seconds(n, tokens, bw, lat, own))


def test_star_block_on_two_pis_is_the_hand_arithmetic() -> None:
    """Two Raspberry Pi 5s on eth-1g (125 MB/s, 50 us one way) under release 0.3: ten exchanges
    per block, each 50 us of latency and the engine's own 172 us (catalog, fitted on the 0.3.1
    table's 2 x Pi 5 row), and 35,904 B through the root's port:
      10 x (50 + 172) us + 35,904 / 125e6 s = 2.220 + 0.287 = 2.507 ms per block;
    x 32 blocks = 80.2 ms per token, where that row states T = 80.11 ms."""
    pi5, link = CAT.accelerator("raspberry-pi-5-8gb"), CAT.link("eth-1g")
    own = CAT.engines["distributed-llama-0.3"].exchange_overhead_us * 1e-6
    assert own == pytest.approx(172e-6)
    star = exchange_layout(CAT, "distributed-llama-0.3", LLAMA3_8B)
    assert star is not None
    block = star.block_seconds(2, 1.0, link.bandwidth_gb_s * 1e9, link.latency_us * 1e-6, own)
    assert block == pytest.approx(10 * (50e-6 + 172e-6) + 35904 / 125e6)
    assert 32 * block * 1e3 == pytest.approx(80.11, rel=0.01)
    # A stage of that engine hands the per-layer estimator the ring-equivalent link.
    st = StageSpec(pi5, 2, 32, link=link, exchange_s=own, layout=star)
    bw_eq, step = st.link_args()
    ring = LAYER_ALLREDUCES * float(ring_allreduce_seconds(4096 * 2, 2, bw_eq, step))
    assert ring == pytest.approx(block)


def test_star_root_runs_the_head_and_reads_the_whole_kv_cache() -> None:
    from planner.estimator.devices import device_table

    star = exchange_layout(CAT, "distributed-llama-0.3", LLAMA3_8B)
    dev = device_table([CAT.accelerator("raspberry-pi-5-8gb")])
    assert head_divisor(star, 4) == 1
    # 256 tokens x 2 (K and V) x 8 KV heads x 128 x 2 B = 1,048,576 B per block; the per-layer
    # estimator charges each of 2 devices half (4 KV heads each); the root reads the other half.
    # Pi 5: 17.1 GB/s x 0.91 achieved (device table: the unified-memory class's fitted factor).
    extra = float(root_block_seconds(star, LLAMA3_8B, 2.0, dev, 1.0, 256, 2)[0])
    assert extra == pytest.approx(1048576 / 2 / (17.1e9 * 0.91), rel=0.01)
    assert root_block_seconds(star, LLAMA3_8B, 2.0, dev, 1.0, 256, 1) == 0.0
    assert root_block_seconds(None, LLAMA3_8B, 2.0, dev, 1.0, 256, 2) == 0.0


PI_POOL = """
name: pi-pool
workloads:
  - name: chat
    kind: inference
    model: llama-3.1-8b
    weights: q4_0
    kv: fp32
    engine: {engine}
    context_tokens: 256
    prompt_tokens: 64
    output_tokens: 128
    concurrency: 1
constraints:
  allowed_devices: [raspberry-pi-5-8gb]
  inventory:
    - {{device: raspberry-pi-5-8gb, count: 2}}
  capex_usd: 0
  network: eth-1g
horizon: {{lifetime_years: 3, utilization: 0.3, electricity_usd_per_kwh: 0.25, pue: 1.0}}
objective: {{goal: max_throughput}}
"""


@pytest.mark.parametrize("engine", ["distributed-llama", "distributed-llama-0.3"])
def test_a_workload_naming_the_release_plans_its_layout(tmp_path: object, engine: str) -> None:
    """Design enumeration (numpy columns) and the replica figures the verifier recomputes
    (designs.stage_specs -> inference_replica) charge the release's own layout alike."""
    import math
    from pathlib import Path

    from planner.estimator.designs import allowed_devices, inference_designs, stage_specs
    from planner.estimator.network import network_link
    from planner.estimator.replica import inference_replica
    from planner.estimator.support import engine_kernels, hop_overhead_s
    from planner.load import load_problem

    path = Path(str(tmp_path)) / "pi.yaml"
    path.write_text(PI_POOL.format(engine=engine), encoding="utf-8")
    problem = load_problem(path)
    w = problem.workloads[0]
    designs = inference_designs(w, problem, CAT, allowed_devices(problem, CAT), prune=False)
    across = [d for d in designs if any(s.across_machines for s in d.stages)]
    assert across, "no group across the two Pis"
    for d in across:
        specs = stage_specs(CAT, problem, d)
        assert all(s.layout is not None for s in specs if s.link is not None)
        fig = inference_replica(
            CAT.model(w.model),
            w.weights,
            w.kv,
            batch=d.batch,
            context=w.context_tokens,
            prompt=w.prompt_tokens,
            output=w.output_tokens,
            stages=specs,
            link=network_link(problem, CAT),
            hop_overhead_s=hop_overhead_s(CAT, d.engine),
            # The engine's kernel family, as the plan and the verifier pass it (engine_times):
            # it sets the rate a decode reads the KV cache at (decode_reads.kv_read_seconds_per_byte).
            kernels=engine_kernels(CAT, d.engine),
        )
        assert math.isclose(d.tokens_per_s, fig.tokens_per_s, rel_tol=1e-9), (d, fig)
        assert math.isclose(d.ms_per_token, fig.ms_per_token, rel_tol=1e-9), (d, fig)


def test_one_device_exchanges_nothing() -> None:
    layout = ExchangeLayout(STAR, d=4096, h=14336, kv=1024, value_bytes=Q80)
    assert layout.block_seconds(1, 1.0, 0.125e9, 50e-6, 172e-6) == 0.0
    assert layout.ring_equivalent(1, 0.125e9, 50e-6, 172e-6) == (0.125e9, 50e-6)
