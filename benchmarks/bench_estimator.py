"""Time estimating every catalog model on every catalog device (inference and QLoRA).

python benchmarks/bench_estimator.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

from planner.catalog import load_catalog
from planner.estimator.cost import Economics
from planner.estimator.devices import device_table
from planner.estimator.estimate import (
    InferenceQuery,
    TrainingQuery,
    estimate_inference,
    estimate_training,
)


def run_once() -> tuple[float, int]:
    cat = load_catalog()
    start = time.perf_counter()
    table = device_table(list(cat.accelerators.values()))
    econ = Economics()
    rows = 0
    for m in cat.models.values():
        rows += len(estimate_inference(m, table, InferenceQuery(weights="fp16", batch=8), econ))
        rows += len(estimate_training(m, table, "qlora", TrainingQuery(), econ))
    return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run_once()  # warm the catalog cache
    times = []
    rows = 0
    for _ in range(args.repeat):
        t, rows = run_once()
        times.append(t)
    cat = load_catalog()
    print(
        f"{len(cat.models)} models x {len(cat.accelerators)} devices, inference + QLoRA: "
        f"{rows} estimates; best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s "
        f"over {args.repeat} runs"
    )


if __name__ == "__main__":
    main()
