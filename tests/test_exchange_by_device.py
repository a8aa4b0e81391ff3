"""distributed-llama's own time per exchange, by machine, and the Google Cloud zone link: the
figures pinned to the engine's published one-machine T columns, Google's egress table and a
published intra-zone ping, and to hand arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from planner.catalog import CatalogError, _check_engine_devices, load_catalog
from planner.estimator.engine_topology import exchange_layout
from planner.estimator.support import exchange_overhead_s
from planner.schema.support import Engine

CAT = load_catalog()
OLD = "distributed-llama-0.3"

# distributed-llama README (older version), one-machine columns, T in ms over the exchange tasks
# the planner charges (ten per block): Pi 5 (0.3.1) Llama 2 7B 5.25 ms over 32 blocks; Pi 4B
# (0.1.0) Llama 2 7B 1.81 ms over 32; one c3d-highcpu-30 VM (0.1.0) Llama 2 7B 0.19 ms over 32
# and Llama 2 13B 0.69 ms over 40.
PI5_US = 5.25e3 / 320  # 16.41
PI4_US = 1.81e3 / 320  # 5.66
VM_US = (0.19e3 + 0.69e3) / (320 + 400)  # 1.22


def test_task_times_are_the_readme_t_columns() -> None:
    tasks = CAT.engines[OLD].task_sync_us
    assert tasks is not None
    assert tasks["raspberry-pi-5-8gb"] == pytest.approx(PI5_US, abs=0.005)
    assert tasks["raspberry-pi-4-8gb"] == pytest.approx(PI4_US, abs=0.005)
    assert tasks["gcp-c3d-highcpu-30"] == pytest.approx(VM_US, abs=0.005)
    assert CAT.engines[OLD].exchange_overhead_device == "raspberry-pi-5-8gb"


def test_exchange_time_scales_from_the_pi5_by_the_one_machine_task_time() -> None:
    # 172 us measured on two Pi 5s (the 0.3.1 table's Llama 3 8B row), scaled by each machine's
    # task time over the Pi 5's: Pi 4B 172 x 5.66 / 16.41 = 59.3 us; the VM 172 x 1.22 / 16.41
    # = 12.8 us.
    assert exchange_overhead_s(CAT, OLD, "raspberry-pi-5-8gb") == pytest.approx(172e-6)
    assert exchange_overhead_s(CAT, OLD, "raspberry-pi-4-8gb") == pytest.approx(59.3e-6, rel=2e-3)
    assert exchange_overhead_s(CAT, OLD, "gcp-c3d-highcpu-30") == pytest.approx(12.8e-6, rel=3e-3)
    # A machine without a measured task time takes the figure as measured, and so does a call
    # that names no machine; an engine without task times has one figure for all.
    assert exchange_overhead_s(CAT, OLD, "raspberry-pi-5-16gb") == pytest.approx(172e-6)
    assert exchange_overhead_s(CAT, OLD) == pytest.approx(172e-6)
    for dev in ("raspberry-pi-4-8gb", "gcp-c3d-highcpu-30"):
        assert exchange_overhead_s(CAT, "distributed-llama", dev) == pytest.approx(796e-6)
    assert exchange_overhead_s(CAT, None, "gcp-c3d-highcpu-30") == 0.0


def test_zone_link_is_googles_egress_and_half_the_measured_round_trip() -> None:
    link = CAT.link("gcp-vpc-zone")
    # Google: c3d-highcpu-30 default per-VM egress up to 20 Gbps = 2.5e9 bytes/s.
    assert link.bandwidth_gb_s == pytest.approx(20 / 8)
    # Flood ping between two VMs of one zone: mean round trip 0.072 ms, so 36 us one way.
    assert link.latency_us == pytest.approx(72 / 2)
    assert link.scope == "inter-node" and link.price_usd_per_port is None


def test_star_block_on_two_vms_is_the_hand_arithmetic() -> None:
    """Two c3d-highcpu-30 VMs in one zone under release 0.1.0, Llama 2 7B (d 4096, FFN 11008,
    32 KV heads x 128): through the root's port per block, sent 34/32 x (3 x 4096 + 11008 / 2)
    = 18,904 B and received 34/32 x (3 x 4096 + 2 x 4096 + 11008) / 2 = 16,728 B; ten exchanges
    of 36 us latency and 12.8 us of the engine's own:
      10 x (36 + 12.79) us + 35,632 B / 2.5e9 B/s = 487.9 + 14.3 = 502.1 us per block,
    x 32 blocks = 16.1 ms per token (the source's T: 7.62 ms)."""
    link = CAT.link("gcp-vpc-zone")
    star = exchange_layout(CAT, OLD, CAT.model("llama-2-7b"))
    assert star is not None
    assert star.bytes_per_token(2) == pytest.approx(18904 + 16728)
    own = exchange_overhead_s(CAT, OLD, "gcp-c3d-highcpu-30")
    block = star.block_seconds(2, 1.0, link.bandwidth_gb_s * 1e9, link.latency_us * 1e-6, own)
    assert block == pytest.approx(10 * (36e-6 + 172e-6 * 1.22 / 16.41) + 35632 / 2.5e9)
    assert 32 * block * 1e3 == pytest.approx(16.07, abs=0.01)


def test_task_times_need_the_device_the_exchange_time_was_measured_on() -> None:
    e = CAT.engines[OLD].model_dump()
    with pytest.raises(ValidationError, match="exchange_overhead_device"):
        Engine.model_validate({**e, "exchange_overhead_device": "raspberry-pi-4-8gb-typo"})
    with pytest.raises(ValidationError, match="exchange_overhead_device"):
        Engine.model_validate({**e, "exchange_overhead_device": None})


def test_task_times_name_catalog_devices() -> None:
    e = CAT.engines[OLD].model_copy(update={"task_sync_us": {"raspberry-pi-6": 1.0}})
    fake = SimpleNamespace(engines={e.id: e}, accelerators=CAT.accelerators)
    with pytest.raises(CatalogError, match="unknown device `raspberry-pi-6`"):
        _check_engine_devices(fake, Path("support.yaml"))  # type: ignore[arg-type]


# Eight owned c3d-highcpu-30 VMs in one zone serving Llama 3.1 405B in Q4_0 (228 GB of weights,
# over 59 GB per VM; the star's root also holds the ends and the whole KV cache, and the group
# size divides the 8 KV heads) under distributed-llama 0.1.0-0.3: one group of eight VMs.
VM_POOL = """
name: vm-pool
workloads:
  - {name: chat, kind: inference, model: llama-3.1-405b, weights: q4_0, kv: fp32,
     engine: distributed-llama-0.3, context_tokens: 256, prompt_tokens: 64, output_tokens: 128,
     concurrency: 1}
constraints:
  allowed_devices: [gcp-c3d-highcpu-30]
  inventory: [{device: gcp-c3d-highcpu-30, count: 8}]
  capex_usd: 0
  network: gcp-vpc-zone
horizon: {lifetime_years: 1, utilization: 0.3, electricity_usd_per_kwh: 0.25, pue: 1.0}
objective: {goal: max_throughput}
"""


def test_a_vm_group_is_planned_with_the_vms_own_exchange_time(tmp_path: Path) -> None:
    from planner.estimator.designs import allowed_devices, inference_designs, stage_specs
    from planner.load import load_problem
    from planner.plan.io import dumps_plan, plan_document, plan_from_data
    from planner.solve import solve_problem
    from planner.verify_plan import plan_failures

    path = tmp_path / "vm.yaml"
    path.write_text(VM_POOL, encoding="utf-8")
    problem = load_problem(path)
    designs = inference_designs(problem.workloads[0], problem, CAT, allowed_devices(problem, CAT))
    groups = [s for d in designs for s in stage_specs(CAT, problem, d) if s.tp > 1]
    assert groups and all(s.link is not None and s.link.id == "gcp-vpc-zone" for s in groups)
    assert all(s.exchange_s == pytest.approx(172e-6 * 1.22 / 16.41) for s in groups)
    plan = solve_problem(problem, workers=1, seed=0)
    assert [(s.device, s.tp) for s in plan.workloads[0].stages] == [("gcp-c3d-highcpu-30", 8)]
    doc = dumps_plan(plan_document(plan, problem, CAT))
    assert plan_failures(plan_from_data(json.loads(doc), "vm"), CAT) == []
