"""Whole-command wall time, start-up included: `planner --help` and `planner solve` on every
example in problems/, each run as a fresh process timed from outside (interpreter start,
imports, catalog load, solve, printing and exit).

    python benchmarks/bench_startup.py [--repeat 7] [--compare REV] [--out FILE]

--compare REV times the same commands on a git revision (its files exported to a temporary
folder and put first on PYTHONPATH) in alternation with this tree, so both sides see the same
machine load, and prints the ratio of their medians. Times are seconds: min, median and max of
--repeat runs per command. Solves run with their defaults (one worker) and --no-timings; the
output goes to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS_DIR = ROOT / "problems"
# The `planner` console script, run from the chosen tree: argv[0] is "-c", the rest as typed.
ENTRY = "import sys; from planner import main; sys.exit(main())"
HEAD = "this tree"


@dataclass
class Timing:
    label: str
    runs: dict[str, list[float]]  # tree name -> wall seconds per run

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
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - t0


def commands(problems: Path) -> list[tuple[str, list[str]]]:
    cmds: list[tuple[str, list[str]]] = [("planner --help", ["--help"])]
    for p in sorted(problems.glob("*.yaml")):
        cmds.append((f"solve {p.stem}", ["solve", str(p), "--no-timings"]))
    return cmds


def measure(trees: dict[str, Path], problems: Path, repeat: int) -> list[Timing]:
    out: list[Timing] = []
    for label, args in commands(problems):
        t = Timing(label, {name: [] for name in trees})
        for name, tree in trees.items():
            run_once(tree, args)  # warm the file cache and the bytecode of each tree
        for _ in range(repeat):
            for name, tree in trees.items():  # alternate, so load swings hit both sides
                t.runs[name].append(run_once(tree, args))
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
        f"{repeat} runs per command ({head}); seconds, min / median / max.",
        "",
    ]
    cols = " | ".join(f"{t} min | {t} median | {t} max" for t in trees)
    ratio = " | median ratio" if len(trees) == 2 else ""
    lines.append(f"| command | {cols}{ratio} |")
    lines.append("|---" + "|--:" * (3 * len(trees) + (1 if ratio else 0)) + "|")
    for t in timings:
        cells = " | ".join(" | ".join(f"{x:.3f}" for x in t.stats(tree)) for tree in trees)
        r = ""
        if ratio:
            r = f" | {t.stats(trees[1])[1] / t.stats(trees[0])[1]:.2f}x"
        lines.append(f"| {t.label} | {cells}{r} |")
    lines.append("")
    for tree in trees:
        solves = [t for t in timings if t.label.startswith("solve ")]
        meds = [t.stats(tree)[1] for t in solves]
        mins = [t.stats(tree)[0] for t in solves]
        helps = [t.stats(tree) for t in timings if t.label == "planner --help"]
        worst = max(solves, key=lambda t: t.stats(tree)[1])
        lines.append(
            f"- {tree}: solve over {len(solves)} examples: median of medians "
            f"{statistics.median(meds):.3f} s (median of minimums {statistics.median(mins):.3f} s), "
            f"slowest median {worst.stats(tree)[1]:.3f} s ({worst.label}); "
            f"`planner --help` median {helps[0][1]:.3f} s, min {helps[0][0]:.3f} s."
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
