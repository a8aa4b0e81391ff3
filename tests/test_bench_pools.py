"""The pools benchmark: its generator is fixed (the pools its docstring describes, the same on
every run), and the script runs end to end on its smallest size."""

from __future__ import annotations

from pathlib import Path

from bench_scripts import load_script

from planner.load import load_problem

pools = load_script("benchmarks/bench_pools.py", "bench_pools")


def test_the_generator_is_fixed() -> None:
    first = [pools.problem_doc(i) for i in pools.instances()]
    assert first == [pools.problem_doc(i) for i in pools.instances()]
    assert len(first) == 2 * len(pools.SIZES)


def test_the_pools_are_as_documented() -> None:
    by_size = {}
    for inst in pools.instances():
        assert sum(inst.counts.values()) == inst.machines
        by_size[inst.machines] = inst.counts
    assert by_size[24] == {"a100-40gb-pcie": 4, "l4": 8, "t4": 12}  # the leftovers pool
    assert by_size[8] == {"a100-40gb-pcie": 1, "l4": 3, "t4": 4}
    assert set(by_size[64]) == set(by_size[256]) == set(pools.SIX_KINDS)
    assert by_size[256] == {
        "a100-40gb-pcie": 32,
        "l40s": 16,
        "rtx-4090": 32,
        "rtx-3090": 32,
        "l4": 48,
        "t4": 96,
    }


def test_the_smallest_size_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    pools.main(["--sizes", "8", "--time-limit", "20", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| pool-8-")]
    assert len(rows) == 2, text
    assert all("| OPTIMAL |" in row for row in rows), text


def test_the_problem_files_load(tmp_path: Path) -> None:
    for inst in pools.instances((8, 64)):
        problem = load_problem(pools.write_problem(inst, tmp_path))
        assert problem.name == inst.name
        assert {o.device: o.count for o in problem.constraints.inventory} == inst.counts
