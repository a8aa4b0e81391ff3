"""Machines the published pooled runs were measured on: each catalog figure pinned to its source,
one `planner estimate` per machine, and the benchmark rows that now map to them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostile_cli import run

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.memory import weight_bytes
from planner.estimator.perf import decode_step_seconds
from planner.estimator.support import runtimes
from planner.schema.model_params import total_params
from planner.schema.problem import Problem
from planner.solve import solve_problem

CAT = load_catalog()
ROWS = yaml.safe_load(
    (Path(__file__).resolve().parent.parent / "benchmarks/pooled/published.yaml").read_text()
)["rows"]
IDEAL = {"bandwidth": 1.0, "layer_overhead_us": 0.0, "step_overhead_us": 0.0}


def test_c3d_highcpu_30_is_its_core_share_of_a_genoa_socket() -> None:
    # Google's C3D table: c3d-highcpu-30 = 30 vCPUs at two per core (15 Zen 4 cores), 59 GB.
    # No bandwidth is published for the VM: its share of one Genoa socket, 15 of 96 cores, of
    # the wire rate (12 x DDR5-4800 x 8 bytes = 460.8 GB/s) and of the STREAM rate (378 GB/s per
    # socket, Micron's Genoa validation, as the EPYC 9654 entry).
    vm, epyc = CAT.accelerator("gcp-c3d-highcpu-30"), CAT.accelerator("epyc-9654-768gb")
    assert (vm.memory.size, vm.memory.unit, vm.architecture) == (59, "GB", "zen4")
    share = 15 / 96
    assert vm.memory.bandwidth_gb_s == pytest.approx(12 * 4800e6 * 8 / 1e9 * share, abs=0.1)
    assert vm.memory.achievable_bandwidth_gb_s == pytest.approx(378 * share, abs=0.05)
    assert epyc.memory.achievable_bandwidth_gb_s == 378
    # 15 cores x 32 FP32 FLOP per clock (AVX-512 on a 256-bit path) x 3.7 GHz, Google's maximum.
    assert vm.dense_tflops.fp32 == pytest.approx(15 * 32 * 3.7e9 / 1e12, abs=0.01)
    assert vm.dense_tflops.bf16 == pytest.approx(2 * 15 * 32 * 3.7e9 / 1e12, abs=0.01)
    assert vm.power.tdp_w == pytest.approx(360 * share, abs=0.5)  # the EPYC 9654's 360 W, shared
    assert vm.sources["achievable_bandwidth"] == "micron-epyc-genoa-stream"


def test_a_memory_bound_step_on_the_vm_streams_at_its_share_of_the_socket() -> None:
    # With ideal factors a batch-1 BF16 decode step reads the same bytes on both (and is memory-
    # bound on both: 2 FLOP per weight against 3.55 and 14.7 TFLOPS BF16): the VM takes
    # 378 / 59.1 of the socket's time.
    vm, epyc = CAT.accelerator("gcp-c3d-highcpu-30"), CAT.accelerator("epyc-9654-768gb")
    table = device_table([vm, epyc], {vm.id: IDEAL, epyc.id: IDEAL})
    assert table.bandwidth_bytes_s[0] == pytest.approx(59.1e9)
    step = decode_step_seconds(
        CAT.model("llama-2-7b"), weight_format("bf16"), 1.0, table, batch=1, context=0
    )
    assert float(step[0] / step[1]) == pytest.approx(378 / 59.1, rel=1e-3)


def test_bc250_is_its_published_gddr6_and_measured_rates() -> None:
    # 16 GB GDDR6 at 14 Gbps on a 256-bit bus = 448 GB/s (BC-250 community specifications);
    # clpeak measures 350-367 GB/s (SkillFishOS), the midpoint used; vkpeak 6,141 GFLOPS FP32 on
    # the stock 24 CUs, FP16 twice that (RDNA 2 packed math); a llama.cpp run on one board used
    # 9.48 GiB of GTT with 2.03 GiB left (bc250-llama-cluster), 11.5 of 16 GiB.
    bc = CAT.accelerator("bc250")
    assert bc.memory.bandwidth_gb_s == pytest.approx(14e9 * 256 / 8 / 1e9)
    assert bc.memory.bus_width_bits == 256
    assert bc.memory.achievable_bandwidth_gb_s == pytest.approx((350 + 367) / 2)
    assert bc.memory.gpu_share == pytest.approx((9.48 + 2.03) / 16, abs=0.005)
    assert bc.dense_tflops.fp32 == pytest.approx(6.141, abs=0.005)
    assert bc.dense_tflops.fp16 == pytest.approx(2 * 6.141, abs=0.01)
    assert (bc.power.tdp_w, bc.power.idle_w) == (220, 65)


def test_bc250_runs_llama_cpp_on_vulkan_only() -> None:
    # gfx1013 is not among ROCm's library targets: only llama.cpp's Vulkan backend runs it.
    found = {
        (r.engine, r.backend) for r in runtimes(CAT, CAT.accelerator("bc250"), "q4_k_m", "fp16")
    }
    assert found == {("llama.cpp", "vulkan")}


def _tpot_ms(out: str) -> float:
    m = re.search(r"time per output token\s*│\s*([\d.]+) ms", out)
    assert m, out
    return float(m.group(1))


def test_estimate_on_the_c3d_vm_under_distributed_llama() -> None:
    # Llama 2 7B in Q4_0 (block_q4_0: 4.5 bits a weight) fits one VM; a token reads at least
    # every weight once at the VM's 59.1 GB/s.
    args = ("estimate", "-m", "llama-2-7b", "-d", "gcp-c3d-highcpu-30", "--weights", "q4_0")
    code, out = run(
        *args,
        "--kv",
        "fp32",
        "--context",
        "256",
        "--prompt",
        "128",
        "--engine",
        "distributed-llama-0.3",
    )
    assert code == 0 and "fits on one device" in out and "memory-bound" in out
    floor_ms = weight_bytes(CAT.model("llama-2-7b"), weight_format("q4_0")) / 59.1e9 * 1e3
    assert floor_ms == pytest.approx(6.74e9 * 4.5 / 8 / 59.1e9 * 1e3, rel=0.02)
    assert floor_ms < _tpot_ms(out) < 2 * floor_ms


def test_estimate_on_bc250_under_llama_cpp_vulkan() -> None:
    # Llama 3.1 8B in Q4_K_M fits one board's 11.5 GiB; at least the weights over 358.5 GB/s.
    args = ("estimate", "-m", "llama-3.1-8b", "-d", "bc250", "--weights", "q4_k_m")
    code, out = run(*args, "--context", "256", "--prompt", "128")
    assert code == 0 and "fits on one device" in out and "llama.cpp" in out
    floor_ms = weight_bytes(CAT.model("llama-3.1-8b"), weight_format("q4_k_m")) / 358.5e9 * 1e3
    assert floor_ms < _tpot_ms(out) < 2 * floor_ms


def _row(rid: str) -> dict[str, Any]:
    return next(r for r in ROWS if r["id"] == rid)


def test_the_cloud_vm_rows_map_and_the_pooled_ones_cross_one_zone() -> None:
    gcp = [r for r in ROWS if r["id"].startswith("dllama-gcp-")]
    assert len(gcp) == 9
    for r in gcp:
        assert r["catalog"]["machines"][0]["accelerator"] == "gcp-c3d-highcpu-30", r["id"]
        assert r["catalog"]["engine"] == "distributed-llama-0.3"  # the table ran 0.1.0
        assert "why_not" not in r, r["id"]
        if not r.get("single_machine_baseline"):
            # The source states no network: the link is inferred, and the note says so.
            assert r["catalog"]["link"] == "gcp-vpc-zone", r["id"]
            assert "inferred" in r["catalog"]["mapping_note"], r["id"]
            assert "zone is assumed" in r["catalog"]["mapping_note"], r["id"]


def test_rows_whose_source_omits_the_machine_say_so() -> None:
    for rid in ("dllama-2x-nuc12-r1-distill-llama-8b", "dllama-1x-nuc12-baseline"):
        assert "catalog" not in _row(rid)
        why = _row(rid)["source_incomplete"]
        assert "source does not state the NUC's CPU model or its memory" in why
    # A gap of the source, not of the catalog: listed apart from the rows the planner cannot
    # express (benchmarks/pooled/run.py's classes).
    assert "omits which M1" in _row("dllama-2x-macbook-llama3-8b")["source_incomplete"]
    assert (
        "omits the Mac Studios' chip" in _row("exo-3x-macstudio-llama31-405b")["source_incomplete"]
    )
    # The BC-250 rows map whole now that the catalog has their board and both models.
    for rid in ("llamacpp-rpc-2x-bc250-ministral-8b", "llamacpp-rpc-2x-bc250-qwen36-35b-a3b"):
        row = _row(rid)
        assert "why_not" not in row
        assert row["catalog"]["machines"] == [{"accelerator": "bc250", "count": 2}]


@pytest.mark.parametrize(("device", "owned"), [("bc250", 2), ("gcp-c3d-highcpu-30", 2)])
def test_owned_machines_are_planned_and_verified(device: str, owned: int) -> None:
    # Llama 3.1 8B in Q4_K_M (4.9 GB) fits one of either; two owned machines, no purchase.
    doc: dict[str, Any] = {
        "name": "owned",
        "workloads": [
            {
                "name": "serve",
                "model": "llama-3.1-8b",
                "weights": "q4_k_m",
                "kv": "fp16",
                "context_tokens": 4096,
                "prompt_tokens": 256,
                "concurrency": 2,
                "min_tokens_per_s": 5,
            }
        ],
        "constraints": {
            "allowed_devices": [device],
            "inventory": [{"device": device, "count": owned}],
        },
    }
    plan = solve_problem(Problem.model_validate(doc), time_limit=20)
    assert plan.status == "OPTIMAL", plan.notes
    assert all(d.bought == 0 for d in plan.devices)
    assert {n.type for n in plan.nodes if n.hosts == device} == {"soc-standalone"}


def test_ministral_3_8b_counts_its_published_size() -> None:
    # transformers' Ministral3Config (documented with mistralai/Ministral-3-8B-Base-2512): 34 layers,
    # hidden 4096, FFN 14336, 32 query and 8 KV heads of 128, vocabulary 131,072, untied. By hand:
    # attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040; gated FFN 3 x 4096 x 14336 =
    # 176,160,768; two RMSNorms 8,192: 218,112,000 per layer, x 34 = 7,415,808,000; embedding and
    # output tables 2 x 131,072 x 4096 = 1,073,741,824; final norm 4,096: 8,489,553,920. NVIDIA's
    # Megatron Bridge page gives 8.4B for the language model.
    m = load_catalog().model("ministral-3-8b")
    assert total_params(m) == 8_489_553_920
    assert abs(total_params(m) / m.published_params - 1) < 0.05
