"""Cloud instances rented whole: an offer of 8 GPUs at a time pays for 8 however few are used,
the plan names the instance, and the verifier refuses loose devices of a whole-instance offer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.errors import InputError, InternalError
from planner.load import load_problem
from planner.plan.types import Plan
from planner.solve import solve_problem
from planner.verify import verify

# One small chat service on H100s, rented on demand for a year at the default 60 % utilization.
PROBLEM = """\
name: rent-h100
description: A small chat service on rented H100s.
workloads:
  - name: chat
    model: llama-3.1-8b
    weights: bf16
    context_tokens: 8192
    prompt_tokens: 1000
    concurrency: 64
    min_tokens_per_s: 2000
    max_ms_per_token: 50
constraints:
  allowed_devices: [h100-sxm]
horizon:
  lifetime_years: 1
  procurement: rent
objective:
  goal: min_cost
"""
HOURS = 8760 * 0.6  # one year at 60 % utilization: the hours rented on demand


def solved(tmp_path: Path, *sets: str) -> Plan:
    path = tmp_path / "rent-h100.yaml"
    path.write_text(PROBLEM)
    plan = solve_problem(load_problem(path, list(sets)), time_limit=60)
    assert plan.status == "OPTIMAL", plan.notes
    return plan


def test_an_8_gpu_instance_is_rented_whole(tmp_path: Path) -> None:
    by_device = solved(tmp_path)
    (line,) = by_device.devices
    # RunPod rents H100 SXM one at a time at $2.69 (catalog accelerators.yaml): fewer than 8.
    assert line.instance is None and line.on_demand < 8
    assert by_device.tco_usd == pytest.approx(line.on_demand * 2.69 * HOURS, rel=1e-6)

    aws = solved(tmp_path, "market.rent_offers=[aws]")
    (line,) = aws.devices
    # AWS rents H100s only as p5.48xlarge, 8 at a time, $98.32 per instance-hour
    # (catalog instances.yaml): the plan pays for all 8 while it needs fewer.
    assert line.instance == "aws-p5.48xlarge" and line.devices_per_instance == 8
    assert line.on_demand == 8 and line.count == 8
    used = sum(n for w in aws.workloads for n in w.devices().values())  # replicas counted in
    assert used < 8
    assert aws.tco_usd == pytest.approx(98.32 * HOURS, rel=1e-6)  # $516,770
    assert line.rent_usd_per_hour["on_demand"] == pytest.approx(98.32 / 8)


def test_another_offer_is_picked_when_cheaper(tmp_path: Path) -> None:
    # With L40S allowed, AWS's one-GPU g6e.xlarge ($1.861/h) serves for less than a p5.
    plan = solved(
        tmp_path, "market.rent_offers=[aws]", "constraints.allowed_devices=[h100-sxm, l40s]"
    )
    (line,) = plan.devices
    assert line.type == "l40s" and line.instance == "aws-g6e.xlarge"
    assert line.devices_per_instance == 1
    assert plan.tco_usd == pytest.approx(line.on_demand * 1.861 * HOURS, rel=1e-6)
    # A one-GPU instance holds no tensor-parallel group of two.
    assert all(st.tp == 1 for w in plan.workloads for st in w.stages)


def test_the_verifier_refuses_loose_devices_of_a_whole_instance(tmp_path: Path) -> None:
    path = tmp_path / "rent-h100.yaml"
    path.write_text(PROBLEM)
    problem = load_problem(path, ["market.rent_offers=[aws]"])
    plan = solve_problem(problem, time_limit=60)
    line = plan.devices[0]
    loose = dataclasses.replace(line, instance=None, devices_per_instance=1)
    with pytest.raises(InternalError, match="instance"):
        verify(dataclasses.replace(plan, devices=[loose]), problem, load_catalog())


def test_an_unknown_offer_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "rent-h100.yaml"
    path.write_text(PROBLEM + "market:\n  rent_offers: [awz]\n")
    with pytest.raises(InputError, match=r"rent-h100.yaml:\d+.*rent_offers.*did you mean `aws`"):
        load_problem(path)


def test_instances_are_sourced_and_name_their_device() -> None:
    cat = load_catalog()
    p5 = cat.instances["aws-p5.48xlarge"]
    assert (p5.device, p5.devices, p5.vcpus) == ("h100-sxm", 8, 192)
    for i in cat.instances.values():
        assert i.device in cat.accelerators
        assert all(ref in cat.references for ref in i.sources.values())


def test_a_rented_training_job_pays_whole_instances() -> None:
    path = Path(__file__).parent.parent / "problems" / "qlora-8b-deadline.yaml"
    sets = ["constraints.allowed_devices=[trainium1]"]
    # One chip at a time (trn1.2xlarge, $1.34 a chip-hour in the catalog): the job pays its chips.
    plan = solve_problem(load_problem(path, sets), time_limit=60)
    (job,) = plan.workloads
    ((_, chips),) = job.devices().items()
    assert chips < 16
    assert job.job_usd == pytest.approx(chips * 1.34 * (job.finish_hours or 0), rel=1e-6)
    # Only as trn1.32xlarge (16 chips, $21.50 an instance-hour): the job pays the whole instance.
    whole = solve_problem(
        load_problem(path, [*sets, "market.rent_offers=[aws-trn1.32xlarge]"]), time_limit=60
    )
    (job,) = whole.workloads
    hours = job.finish_hours or 0
    assert job.job_usd == pytest.approx(-(-sum(job.devices().values()) // 16) * 21.50 * hours)
    assert any("rented whole: 1 x aws-trn1.32xlarge" in n for n in whole.notes)
