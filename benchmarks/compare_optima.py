"""Same answers before and after a speed change: `planner solve` on every example in problems/,
once on a git revision and once on this tree, comparing the status, the objective and its bound
and the plan's key figures (costs, power, the bill of materials, each workload's replicas, batch,
stages and rates), and timing each solve in process CPU seconds.

    python benchmarks/compare_optima.py REV [--scale 0.95] [--only NAME ...] [--cache DIR]
                                            [--bytes]

--scale F multiplies every efficiency factor of the shipped catalog/efficiency.yaml (achieved
fractions of peak, capped at 1, and the fixed overheads and routing bytes; not the usable-memory
share or the power floor) by F in both trees, so a change can be checked against coefficients
other than the fitted ones (a refit moves them by a few percent). --cache DIR keeps the
revision's answers there and reuses them on the next run with the same revision and scale.
--bytes compares each solve's whole output instead (the JSON plan with --no-timings, the error
text and the exit code, by SHA-256): a speed change must leave every byte of every plan as it
was, not only the key figures.
Exit status 1 if any example differs. Times come from a shared machine: CPU seconds (user +
system) move less with the load than wall seconds, and both are printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; from planner import main; sys.exit(main())"
SCALED = ("bandwidth", "compute", "training_mfu", "moe_routed_ns", "layer_overhead_us")
SCALED_TOO = ("step_overhead_us",)
FRACTIONS = ("bandwidth", "compute", "training_mfu")
FIGURE = re.compile(r"\b(" + "|".join(SCALED + SCALED_TOO) + r"): ([0-9.]+)")


def export(rev: str | None, dest: Path) -> Path:
    """The planner package of `rev` (git archive), or of this working tree when rev is None."""
    tree = dest / (rev or "work")
    if rev is None:
        shutil.copytree(ROOT / "planner", tree / "planner", ignore=shutil.ignore_patterns("*.pyc"))
        return tree
    archive = dest / "rev.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "planner"], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def scale_efficiency(tree: Path, factor: float) -> None:
    """Multiply the efficiency factors of the tree's shipped efficiency.yaml by `factor`."""
    path = tree / "planner" / "catalog_data" / "efficiency.yaml"

    def repl(m: re.Match[str]) -> str:
        value = float(m.group(2)) * factor
        if m.group(1) in FRACTIONS:
            value = min(value, 1.0)
        return f"{m.group(1)}: {value:.6g}"

    path.write_text(FIGURE.sub(repl, path.read_text()))


def key_figures(plan: dict[str, Any]) -> dict[str, object]:
    """What must not move: status, objective, bound, costs, the bill and each workload's shape."""
    keep = ("status", "objective_name", "objective", "bound", "capex_usd", "tco_usd", "power_w")
    out: dict[str, object] = {k: _round(plan.get(k)) for k in keep}
    out["devices"] = sorted(
        (d["type"], d["count"], d["bought"], d["on_demand"], d["reserved"], d["spot"])
        for d in plan.get("devices") or []
    )
    out["workloads"] = [
        (
            w["name"],
            w.get("replicas"),
            w.get("batch"),
            [(s["device"], s["tp"], tuple(s["layers"])) for s in w.get("stages") or []],
            _round(w.get("tokens_per_s")),
        )
        for w in plan.get("workloads") or []
    ]
    return out


def _round(x: object) -> object:
    return float(f"{x:.9g}") if isinstance(x, float) else x


def _check_runs_own(tree: Path) -> None:
    """Stop unless a process started as `solve` starts one imports the tree's own package (an
    editable install of another tree must not take its place)."""
    where = subprocess.run(
        [sys.executable, "-c", "import planner; print(planner.__file__)"],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"{tree} runs the planner package at {where}, not its own")


def solve(tree: Path, problem: Path, whole: bool = False) -> tuple[dict[str, object], float, float]:
    """Key figures of one fresh `planner solve --format json` run on `tree`'s package (with
    `whole`, the SHA-256 of its output, error text and exit code as well), its CPU and wall
    seconds."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "solve", str(problem), "--format", "json", "--no-timings"],
        cwd=tree,  # `-c` puts the working folder first on sys.path: it must be the tree
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    try:
        figures = key_figures(json.loads(done.stdout))
    except json.JSONDecodeError:
        figures = {"exit": done.returncode, "stderr": done.stderr.strip()[-300:]}
    if whole:
        for key, text in (("stdout", done.stdout), ("stderr", done.stderr)):
            figures[f"{key} sha256"] = hashlib.sha256(text.encode()).hexdigest()
        figures["exit"] = done.returncode
    return figures, cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="git revision to compare with (e.g. the commit a change started)")
    ap.add_argument("--scale", type=float, default=1.0, help="efficiency factors x this")
    ap.add_argument("--only", nargs="*", default=None, help="example names (default: all)")
    ap.add_argument("--cache", type=Path, default=None, help="folder for the revision's answers")
    ap.add_argument("--bytes", action="store_true", help="compare every byte of each output")
    args = ap.parse_args()
    problems = sorted((ROOT / "problems").glob("*.yaml"))
    if args.only:
        problems = [p for p in problems if p.stem in args.only]
    rev_sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    cached: dict[str, list[Any]] = {}
    cache_file = None
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        whole = "-bytes" if args.bytes else ""
        cache_file = args.cache / f"{rev_sha[:12]}-x{args.scale:g}{whole}.json"
        if cache_file.exists():
            cached = json.loads(cache_file.read_text())
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        old, new = export(args.rev, Path(tmp)), export(None, Path(tmp))
        for tree in (old, new):
            if args.scale != 1.0:
                scale_efficiency(tree, args.scale)
            _check_runs_own(tree)
        print(
            f"efficiency factors x{args.scale:g}; CPU s (wall s) per solve, {args.rev} -> this tree"
        )
        for problem in problems:
            if problem.stem in cached:
                a, cpu_a, wall_a = cached[problem.stem]
            else:
                a, cpu_a, wall_a = solve(old, problem, args.bytes)
                cached[problem.stem] = [a, cpu_a, wall_a]
            b, cpu_b, wall_b = solve(new, problem, args.bytes)
            a = json.loads(json.dumps(a))  # tuples as lists, as the cache holds them
            b = json.loads(json.dumps(b))
            same = "same" if a == b else "DIFFERENT"
            differ += a != b
            print(
                f"{problem.stem:28s} {cpu_a:6.2f} ({wall_a:5.2f}) -> {cpu_b:6.2f} ({wall_b:5.2f})"
                f"  {b.get('status')} {b.get('objective')}  {same}"
            )
            if a != b:
                for k in a:
                    if a.get(k) != b.get(k):
                        print(f"    {k}: {a.get(k)} -> {b.get(k)}")
    if cache_file:
        cache_file.write_text(json.dumps(cached))
    print(f"{len(problems) - differ} of {len(problems)} the same; load average {os.getloadavg()}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
