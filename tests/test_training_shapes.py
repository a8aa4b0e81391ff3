"""Training shapes: every pipeline depth up to the layer count and every data-parallel degree
(tensor parallelism inside a node's domain), so the cheapest feasible shape is in the design
space the solver proves optimal over."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.designs import allowed_devices
from planner.estimator.hosts import devices_bought, host_options
from planner.estimator.training_designs import training_designs
from planner.load import load_problem
from planner.schema.problem import TrainingWorkload
from planner.solve import solve_problem

TRAIN = Path(__file__).resolve().parent.parent / "problems" / "train-13b-2m.yaml"


@pytest.mark.parametrize("device", ["gaudi3", "h100-sxm"])
def test_the_plan_buys_the_fewest_devices_of_any_feasible_shape(device: str) -> None:
    """One device type bought: cost rises with the devices bought, so the optimum uses the
    fewest devices of any shape in the unpruned enumeration (any depth, any data-parallel
    degree), not the fewest among powers of two, bought in whole purchase units."""
    problem = load_problem(TRAIN, [f"constraints.allowed_devices=[{device}]"])
    cat = load_catalog()
    (w,) = problem.workloads
    assert isinstance(w, TrainingWorkload)
    shapes = training_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    depths = {len(d.stages) for d in shapes}
    assert depths - {1, 2, 4, 8, 16}, "depths that are not powers of two are enumerated"
    fewest = min(sum(d.devices.values()) for d in shapes)
    plan = solve_problem(problem, workers=1, seed=0)
    assert plan.status == "OPTIMAL"
    # Bought in the hosts' purchase units: 12 Gaudi 3 at work buy two kits of 8.
    hosts = host_options(cat, cat.accelerator(device), problem)
    least = min(devices_bought(n, fewest) for n in hosts)
    assert sum(line.count for line in plan.devices) == least
