"""Whole-command wall time, start-up included: `planner --help` and `planner solve` on every
example in problems/, each run as a fresh process timed from outside (interpreter start,
imports, catalog load, solve, printing and exit).

    python benchmarks/bench_startup.py [--repeat 7] [--compare REV] [--out FILE]

--compare REV times the same commands on a git revision (its files exported to a temporary
folder and put first on PYTHONPATH) in alternation with this tree, so both sides see the same
machine load, and prints the ratio of their medians. Each tree solves its own copy of each
example (a revision's problem files are written for its schema); an example the revision lacks
is timed on this tree alone. Times are seconds: min, median and max of
--repeat runs per command. Solves run with their defaults (one worker) and --no-timings; the
output goes to /dev/null. Bytecode is cached in a temporary folder, as an installed package has it.
Each solve's first (warm-up, untimed) run prints its plan as JSON instead: with --compare the
report says whether every example's status, objective and bound are the same on both trees.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS_DIR = ROOT / "problems"
# The `planner` console script, run from the chosen tree: argv[0] is "-c", the rest as typed.
ENTRY = "import sys; from planner import main; sys.exit(main())"
HEAD = "this tree"
# CPU seconds (user + system) of every run, in order: on a shared machine wall time swings with
# the load while CPU time barely moves, so the report gives both.
CPU_SECONDS: list[float] = []
PYCACHE = [""]  # the folder bytecode is cached in for this run (a temporary one)
OK_EXITS = (0, 3)  # a plan, or a proof that none exists (problems/infeasible.yaml)


@dataclass
class Timing:
    label: str
    runs: dict[str, list[float]]  # tree name -> wall seconds per run
    cpu: dict[str, list[float]]  # tree name -> CPU seconds per run
    # tree name -> (status, objective, bound) of a solve, read from its warm-up run
    answers: dict[str, tuple[object, ...]] = field(default_factory=dict)

    def stats(self, tree: str) -> tuple[float, float, float]:
        xs = self.runs[tree]
        return min(xs), statistics.median(xs), max(xs)


def export_revision(rev: str, dest: Path) -> Path:
    """The files of `rev` (git archive) unpacked under dest; returns the folder."""
    archive = dest / "rev.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev], stdout=f, check=True)
    tree = dest / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def run_once(tree: Path, args: list[str]) -> float:
    """Wall seconds of one fresh process; its CPU seconds go to CPU_SECONDS. Bytecode is cached
    (under PYCACHE, not in the tree), as for an installed package: compiling every module on
    every run would time the compiler."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=PYCACHE[0])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        cwd=tree,  # `-c` puts the working folder first on sys.path: it must be the tree
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - t0
    if done.returncode not in OK_EXITS:  # a command that failed times nothing worth reporting
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(
            f"planner {' '.join(args)} in {tree} exited {done.returncode}: " + " / ".join(tail)
        )
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return wall


def answer(tree: Path, args: list[str]) -> tuple[object, ...]:
    """A solve's status, objective and bound, from its plan as JSON (the warm-up run): a change
    made for speed must leave every one of them as it was."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=PYCACHE[0])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args, "--format", "json"],
        cwd=tree,
        env=env,
        capture_output=True,
        check=False,
    )
    if done.returncode not in OK_EXITS:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(
            f"planner {' '.join(args)} in {tree} exited {done.returncode}: " + " / ".join(tail)
        )
    plan = json.loads(done.stdout)
    return plan["status"], plan["objective"], plan["bound"]


def commands(problems: Path) -> list[tuple[str, list[str]]]:
    """`--help`, then `solve` of each example, named relative to a tree: each tree solves its
    own copy of the example (a revision's problem files are written for its schema)."""
    cmds: list[tuple[str, list[str]]] = [("planner --help", ["--help"])]
    for p in sorted(problems.glob("*.yaml")):
        cmds.append((f"solve {p.stem}", ["solve", f"problems/{p.name}", "--no-timings"]))
    return cmds


def measure(trees: dict[str, Path], problems: Path, repeat: int) -> list[Timing]:
    """Each command on every tree that has its example (an example added since a revision is
    timed on this tree alone)."""
    out: list[Timing] = []
    for label, args in commands(problems):
        have = {
            name: tree
            for name, tree in trees.items()
            if len(args) < 2 or (tree / args[1]).is_file()
        }
        t = Timing(label, {name: [] for name in trees}, {name: [] for name in trees})
        for name, tree in have.items():  # warm the file cache and the bytecode of each tree
            if args[0] == "solve":
                t.answers[name] = answer(tree, args)
            else:
                run_once(tree, args)
        for _ in range(repeat):
            for name, tree in have.items():  # alternate, so load swings hit both sides
                t.runs[name].append(run_once(tree, args))
                t.cpu[name].append(CPU_SECONDS[-1])
        out.append(t)
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def report(timings: list[Timing], trees: list[str], repeat: int, rev: str | None) -> str:
    head = f"this tree vs {rev}" if rev else "this tree"
    lines = [
        "# Start-up benchmark: whole commands, wall time",
        "",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end, {repeat} runs per command ({head}). "
        "Seconds: wall min / median / max, and the median CPU time (user + system).",
        "",
    ]
    cols = " | ".join(f"{t} min | {t} median | {t} max | {t} CPU" for t in trees)
    ratio = " | median ratio" if len(trees) == 2 else ""
    lines.append(f"| command | {cols}{ratio} |")
    lines.append("|---" + "|--:" * (4 * len(trees) + (1 if ratio else 0)) + "|")
    for t in timings:
        cells = " | ".join(
            " | ".join(f"{x:.3f}" for x in (*t.stats(tree), statistics.median(t.cpu[tree])))
            if t.runs[tree]
            else " | ".join(["-"] * 4)
            for tree in trees
        )
        both = ratio and all(t.runs[x] for x in trees)
        r = (
            f" | {t.stats(trees[1])[1] / t.stats(trees[0])[1]:.2f}x"
            if both
            else " | -" * bool(ratio)
        )
        lines.append(f"| {t.label} | {cells}{r} |")
    lines.append("")
    helps = [t for t in timings if t.label == "planner --help"]
    for tree in trees:
        solves = [t for t in timings if t.label.startswith("solve ") and t.runs[tree]]
        meds = [t.stats(tree)[1] for t in solves]
        mins = [t.stats(tree)[0] for t in solves]
        worst = max(solves, key=lambda t: t.stats(tree)[1])
        lines.append(
            f"- {tree}: solve over {len(solves)} examples: median of medians "
            f"{statistics.median(meds):.3f} s (of minimums {statistics.median(mins):.3f} s), "
            f"slowest median {worst.stats(tree)[1]:.3f} s ({worst.label}), "
            f"{sum(m > 1.0 for m in meds)} over 1.0 s; `planner --help` median "
            f"{helps[0].stats(tree)[1]:.3f} s, min {helps[0].stats(tree)[0]:.3f} s."
        )
    if len(trees) == 2:
        solved = [t for t in timings if all(x in t.answers for x in trees)]
        differ = [t.label for t in solved if t.answers[trees[0]] != t.answers[trees[1]]]
        lines.append(
            f"- status, objective and bound (--format json): the same on both trees for "
            f"{len(solved) - len(differ)} of {len(solved)} examples"
            + (f"; different: {', '.join(differ)}." if differ else ".")
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="Time whole planner commands.")
    parser.add_argument("--repeat", type=int, default=7, help="Runs per command.")
    parser.add_argument("--compare", default=None, help="A git revision to time beside this tree.")
    parser.add_argument("--problems", type=Path, default=PROBLEMS_DIR, help="Folder of YAML files.")
    parser.add_argument("--out", type=Path, default=None, help="Also write the report here.")
    args = parser.parse_args()
    repeat = max(1, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        PYCACHE[0] = str(Path(tmp) / "pycache")
        trees: dict[str, Path] = {}
        if args.compare:
            trees[args.compare] = export_revision(args.compare, Path(tmp))
        trees[HEAD] = ROOT
        timings = measure(trees, args.problems, repeat)
    text = report(timings, list(trees), repeat, args.compare)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
