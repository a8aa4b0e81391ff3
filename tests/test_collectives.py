"""Small all-reduce times per fabric: the catalog's measured figures reach the estimator in place
of steps x link latency, each pinned to its publication (planner/catalog_data/links.yaml)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from planner.catalog import load_catalog
from planner.estimator.comm import allreduce_bytes_read, tensor_parallel_allreduce_seconds
from planner.estimator.devices import device_table, kernel_rate_bytes_s, small_allreduce_grid
from planner.estimator.replica import StageSpec
from planner.schema.catalog import Link

CAT = load_catalog()


def test_all_to_all_fabric_interpolates_and_holds() -> None:
    # SGLang PR #2904, vLLM's custom all-reduce on H100, 32 KB: 8.7 / 9.2 / 11.8 us on 2 / 4 / 8.
    grid = small_allreduce_grid({2: 8.7, 4: 9.2, 8: 11.8}, ring=False) * 1e6
    assert grid[0] == grid[1] == 0.0  # nothing to reduce on one device
    assert grid[2] == pytest.approx(8.7)
    assert grid[6] == pytest.approx((9.2 + 11.8) / 2)  # halfway between 4 and 8
    assert grid[8] == pytest.approx(11.8)
    assert grid[16] == pytest.approx(11.8)  # one-shot kernels: the count barely matters


def test_ring_fabric_scales_with_its_steps() -> None:
    # NCCL issue #1439: 8 x RTX 3090 on PCIe 4.0, 54.2 us; a ring takes 2 (n - 1) steps, so
    # 2 GPUs take 1/7 of it and 4 GPUs 3/7.
    grid = small_allreduce_grid({8: 54.2}, ring=True) * 1e6
    assert grid[2] == pytest.approx(54.2 / 7)
    assert grid[4] == pytest.approx(54.2 * 3 / 7)
    assert grid[16] == pytest.approx(54.2 * 15 / 7)


def test_no_measurement_keeps_the_step_formula() -> None:
    assert np.isnan(small_allreduce_grid(None, ring=True)).all()
    # 8 ranks in a ring, 5 us per step, 16 KB at 31.5 GB/s: 14 x 5 us + 2 x 7/8 x 16 KB / bw.
    t = tensor_parallel_allreduce_seconds(16384, 8, 31.5e9, 5e-6, 0.0)
    assert float(t) == pytest.approx(14 * 5e-6 + 1.75 * 16384 / 31.5e9)
    # A measured 20 us replaces the 70 us of steps; the bytes stay.
    t = tensor_parallel_allreduce_seconds(16384, 8, 31.5e9, 5e-6, 0.0, 20e-6)
    assert float(t) == pytest.approx(20e-6 + 1.75 * 16384 / 31.5e9)


def test_catalog_devices_read_their_fabric() -> None:
    table = device_table([CAT.accelerator("h100-sxm"), CAT.accelerator("mi300x")])
    us = table.small_allreduce_s(np.array([8, 8])) * 1e6
    assert us[0] == pytest.approx(11.8)  # nvlink4: SGLang PR #2904
    assert us[1] == pytest.approx(7.26)  # infinity-fabric-mi300: vLLM PR #19744, TP=4, held
    link = CAT.link("nvlink4")
    assert link.allreduce_us and link.source_of("allreduce_us") in CAT.references


def test_a_measurement_needs_its_own_source() -> None:
    base = {
        "id": "x",
        "name": "x",
        "kind": "pcie",
        "scope": "intra-node",
        "bandwidth_gb_s": 1,
        "latency_us": 1,
        "sources": {"spec": "a"},
    }
    with pytest.raises(ValidationError, match="allreduce_us needs its own source"):
        Link.model_validate({**base, "allreduce_us": {2: 3.0}})
    with pytest.raises(ValidationError):
        Link.model_validate(
            {**base, "allreduce_us": {1: 3.0}, "sources": {"spec": "a", "allreduce_us": "a"}}
        )


def test_a_link_between_machines_charges_its_measured_all_reduce() -> None:
    # dgx-spark-playbooks PR #103: NCCL's 16 KB all-reduce between two DGX Sparks, 31.9 us.
    # The ring's 2 (tp - 1) = 2 steps share it, so the per-layer estimator charges 31.9 us per
    # all-reduce where two steps of the link's 2 us latency gave 4 us; an engine's own time per
    # exchange (here 716 us, of the size distributed-llama's releases take) adds on top, once
    # per all-reduce.
    spark, link = CAT.accelerator("dgx-spark"), CAT.link("roce-200g")
    bytes_s, step = StageSpec(device=spark, tp=2, layers=80, link=link).link_args()
    assert bytes_s == pytest.approx(25e9)
    assert 2 * step == pytest.approx(31.9e-6)
    _, step = StageSpec(device=spark, tp=2, layers=80, link=link, exchange_s=716e-6).link_args()
    assert 2 * step == pytest.approx(31.9e-6 + 716e-6)
    plain = CAT.link("eth-1g")  # no measurement: the link's 50 us latency per step
    _, step = StageSpec(device=spark, tp=4, layers=80, link=plain).link_args()
    assert step == pytest.approx(50e-6)


def test_tables_of_no_device_and_any_shape_of_degrees() -> None:
    # A constraint that removes every device leaves an empty table, not an error.
    assert len(device_table([])) == 0
    one = device_table([CAT.accelerator("h100-sxm")])
    us = one.small_allreduce_s(np.array([2, 4, 8])) * 1e6  # a one-row table: any shape
    assert us.tolist() == pytest.approx([8.7, 9.2, 11.8])


def test_the_links_given_are_the_ones_read() -> None:
    # A catalog's own links decide, not the loaded catalog's: without nvlink4's measurement
    # the H100's all-reduce has none (the step formula applies).
    links = {k: v for k, v in CAT.links.items() if k != "nvlink4"}
    table = device_table([CAT.accelerator("h100-sxm")], links=links)
    assert np.isnan(table.small_allreduce_s(8)).all()


def test_a_ring_between_many_machines_keeps_growing() -> None:
    # 200 machines in one NCCL ring over roce-200g: 31.9 us at 2 scaled by its 199 steps pairs.
    spark, link = CAT.accelerator("dgx-spark"), CAT.link("roce-200g")
    _, step = StageSpec(device=spark, tp=200, layers=80, link=link).link_args()
    assert step * 2 * 199 == pytest.approx(31.9e-6 * 199)


@pytest.mark.parametrize(
    ("model", "tp", "measured"),
    [
        # gpt-fast README, "Tensor Parallelism" table: batch 1, bf16, 8 x A100-80GB SXM (NVLink,
        # power limited to 330 W), 200 tokens from a 5-token prompt (calibration/measurements.yaml,
        # gpt-fast-readme). The issue this pins: 2(n-1) x 5 us per all-reduce made TP8 read 70 %
        # slower than these figures and a 70B model unable to reach 27 ms per token on 8 A100s.
        ("llama-2-70b", 2, 21.32),
        ("llama-2-70b", 4, 38.01),
        ("llama-2-70b", 8, 62.50),
        ("llama-2-7b", 8, 328.43),
    ],
)
def test_tensor_parallel_decode_matches_gpt_fast(model: str, tp: int, measured: float) -> None:
    from planner.estimator.formats import kv_bytes, weight_format
    from planner.estimator.perf import decode_step_seconds

    dev = device_table([CAT.accelerator("a100-80gb-sxm")])
    step = decode_step_seconds(
        CAT.model(model), weight_format("bf16"), kv_bytes("bf16"), dev, batch=1, context=100, tp=tp
    )
    assert 1.0 / float(step[0]) == pytest.approx(measured, rel=0.2)


def test_bytes_read_switch_where_vllm_switches() -> None:
    # vLLM csrc/custom_all_reduce.cuh: one shot for 2 ranks at any size, for up to 4 ranks below
    # 512 KiB, up to 8 below 256 KiB; each one-shot rank reads (n - 1) x S, two shots 2 (n-1)/n S.
    kib = 1024
    assert float(allreduce_bytes_read(4 * 1024 * kib, 2, 1.0)) == 4 * 1024 * kib
    assert float(allreduce_bytes_read(256 * kib, 4, 1.0)) == 3 * 256 * kib  # one shot
    assert float(allreduce_bytes_read(512 * kib, 4, 1.0)) == 1.5 * 512 * kib  # two shots
    assert float(allreduce_bytes_read(128 * kib, 8, 1.0)) == 7 * 128 * kib  # one shot
    assert float(allreduce_bytes_read(256 * kib, 8, 1.0)) == 1.75 * 256 * kib  # two shots
    assert float(allreduce_bytes_read(64 * kib, 16, 1.0)) == 2 * 15 / 16 * 64 * kib  # > 8: two
    assert float(allreduce_bytes_read(64 * kib, 4, 0.0)) == 1.5 * 64 * kib  # a ring: NCCL's


@pytest.mark.parametrize(
    ("nbytes", "measured_us"),
    [
        # vLLM PR #19744, vLLM's custom all-reduce on 4 MI300X: 256 KB 14.39 us (one shot),
        # 1 MB 22.91 us (two shots); the catalog's 105 GB/s is the mean of the two rates past
        # the 7.26 us floor (110 and 100.5 GB/s), so each point lands within 3.5 %.
        (256 * 1024, 14.39),
        (1024 * 1024, 22.91),
    ],
)
def test_mi300x_mid_size_all_reduce_matches_vllm_pr_19744(nbytes: int, measured_us: float) -> None:
    table = device_table([CAT.accelerator("mi300x")])
    t = tensor_parallel_allreduce_seconds(
        nbytes,
        4,
        table.scale_up_bytes_s,
        2e-6,
        table.all_to_all,
        table.small_allreduce_s(4),
        table.kernel_rate_bytes_s(4),
    )
    assert float(t[0]) * 1e6 == pytest.approx(measured_us, rel=0.035)
    # Hand arithmetic for 1 MiB: 7.26 us + 1.5 x 1,048,576 B / 105e9 B/s = 22.24 us.
    if nbytes == 1024 * 1024:
        assert float(t[0]) * 1e6 == pytest.approx(7.26 + 1.5 * 1048576 / 105e9 * 1e6)


def test_kernel_rate_falls_with_fewer_peers_and_holds_with_more() -> None:
    # 105 GB/s read from 3 peers on 4 MI300X (vLLM PR #19744): 35 per peer, so one peer on 2
    # reads 35. On 8 the kernel's 16 workgroups (vLLM csrc/custom_all_reduce.cuh,
    # defaultBlockLimit on ROCm) read at the same 105, not 7 x 35 = 245: vLLM PR #39080 times
    # that kernel on 8 MI355X at 1.75 x 1,572,864 B in 24.2 - 6.3 us, 154 GB/s per rank, 29 %
    # of its 7 links. A rate past the link's bandwidth is capped.
    table = device_table([CAT.accelerator("mi300x")])
    gb_s = table.kernel_rate_bytes_s(np.array([2, 4, 8])) / 1e9
    assert gb_s.tolist() == pytest.approx([35.0, 105.0, 105.0])
    assert float(kernel_rate_bytes_s({2: 100.0}, 8, 336e9)) == pytest.approx(100e9)
    assert float(kernel_rate_bytes_s({4: 400.0}, 8, 336e9)) == pytest.approx(336e9)
    assert np.isnan(kernel_rate_bytes_s(None, 8, 336e9))
    # No kernel rate measured (NVLink 4): the link's bandwidth, as before.
    h100 = device_table([CAT.accelerator("h100-sxm")])
    assert np.isnan(h100.kernel_rate_bytes_s(8)).all()


def test_mi300x_8_rank_two_shot_all_reduce_at_the_4_rank_rate() -> None:
    # 405B's decode all-reduce at batch 64 on 8 MI300X: 64 x 16,384 x 2 B = 2 MiB, two shots
    # (past the 256 KiB one-shot limit at 8 ranks), each rank reads 1.75 x 2 MiB at 105 GB/s:
    # 7.26 + 3,670,016 / 105e9 s = 7.26 + 34.95 = 42.2 us (at 245 GB/s it was 22.2 us).
    table = device_table([CAT.accelerator("mi300x")])
    t = tensor_parallel_allreduce_seconds(
        2 * 1024 * 1024,
        8,
        table.scale_up_bytes_s,
        2e-6,
        table.all_to_all,
        table.small_allreduce_s(8),
        table.kernel_rate_bytes_s(8),
    )
    assert float(t[0]) * 1e6 == pytest.approx(7.26 + 1.75 * 2 * 1048576 / 105e9 * 1e6)
    assert float(t[0]) * 1e6 == pytest.approx(42.2, abs=0.05)


def test_nvlink_mid_size_stays_near_cuda_graph_measurements() -> None:
    # vLLM PR #24111, H100, 4 ranks, the best backend per size under CUDA graphs: 0.5 MiB in
    # 10 us, 4 MiB in 29 us. At the link's 450 GB/s the two-shot bytes give 9.2 + 1.5 x S / bw:
    # 10.95 us and 23.2 us, within 10 % and 20 %. SGLang PR #2904's 40.2 us at 1 MiB is timed
    # without CUDA graphs (an extra copy into the shared buffer), not how engines decode.
    table = device_table([CAT.accelerator("h100-sxm")])
    mib = 1024 * 1024
    for nbytes, measured in ((mib // 2, 10.0), (4 * mib, 29.0)):
        t = tensor_parallel_allreduce_seconds(
            nbytes, 4, table.scale_up_bytes_s, 2e-6, table.all_to_all, table.small_allreduce_s(4)
        )
        assert float(t[0]) * 1e6 == pytest.approx(measured, rel=0.21)


def test_bytes_past_the_kernel_go_at_the_link_bandwidth() -> None:
    # Above vLLM's 8 MiB custom all-reduce limit the collective library takes the message: the
    # extra bytes cost a ring's 2 (n - 1) / n at the link's bandwidth, not the kernel's rate.
    mib = 1024 * 1024
    at = tensor_parallel_allreduce_seconds(8 * mib, 4, 336e9, 2e-6, 1.0, 7.26e-6, 105e9)
    past = tensor_parallel_allreduce_seconds(16 * mib, 4, 336e9, 2e-6, 1.0, 7.26e-6, 105e9)
    assert float(past - at) == pytest.approx(1.5 * 8 * mib / 336e9)
    assert float(at) == pytest.approx(7.26e-6 + 1.5 * 8 * mib / 105e9)
