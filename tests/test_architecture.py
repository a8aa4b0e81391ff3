"""The stage order of docs/architecture.md, kept by the imports, and the size limits of the
house: no import circle, verify imports nothing from planner/model, what-if builds no model,
no module over 600 lines and no function over 80 lines without a comment saying why."""

from __future__ import annotations

import ast
from pathlib import Path

PLANNER = Path(__file__).resolve().parent.parent / "planner"

# Stage of each top-level part, in data-flow order; a module may import only its own or
# earlier stages (errors is the shared root).
STAGES = [
    "errors",
    "process",  # the command's own process: Ctrl-C bookkeeping, the collector at start-up
    "schema",
    "catalog",
    "estimator",
    "hf_config",  # a config.json into a model architecture (checked with the estimator)
    "load_network",  # a problem's networks checked against the catalog (load calls it)
    "load_measured",  # a workload's measured figures: tables read in, checked against the catalog
    "load",  # a problem file: read, override, validate, names checked against the catalog
    "prices",  # cloud price lists (SkyPilot, gpuhunt) into a user catalog overlay
    "model",
    "plan",
    "verify_workloads",  # the verifier's half that recomputes each workload's figures
    "verify_hops",  # each pipeline split's route, bytes and time recomputed from the problem
    "verify_notes",  # the notes that state figures, rebuilt from the verified figures
    "verify",
    "verify_rules",  # one structural check per constraint field of the schema
    "verify_plan",  # a plan file checked: hashes, derived fields, every failure of verify listed
    "simulate",  # replays a plan's serving engines (estimator + plan, no model)
    "solve_guided",  # the search guided by the relaxation, and the rules all searches share
    "solve",
    "whatif",
    "report",
    "web",  # `planner serve`: the explorer page and its API, on the same answers as the CLI
    "cli",
]


def _part(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def _modules() -> dict[str, Path]:
    out = {}
    for path in PLANNER.rglob("*.py"):
        rel = path.relative_to(PLANNER.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("planner"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("planner")]
    return found


def test_imports_follow_the_stage_order() -> None:
    bad = []
    for name, path in _modules().items():
        part = _part(name)
        if part in ("__init__", "planner", "catalog_data"):
            continue
        for imported in _imports(path):
            other = _part(imported)
            if other == "catalog_data":
                continue
            if STAGES.index(other) > STAGES.index(part):
                bad.append(f"{name} imports {imported}")
    assert not bad, bad


def test_verify_does_not_import_the_model() -> None:
    for name in ("verify.py", "verify_workloads.py", "verify_notes.py"):
        assert not [m for m in _imports(PLANNER / name) if m.startswith("planner.model")]


def test_whatif_builds_no_model() -> None:
    for path in (PLANNER / "whatif").rglob("*.py"):
        text = path.read_text()
        assert "PlannerModel" not in text and "CpModel" not in text, path
        assert "planner.model.cpsat" not in text and "build_tables" not in text, path


def test_no_import_circle() -> None:
    mods = _modules()
    graph = {n: {i for i in _imports(p) if i in mods and i != n} for n, p in mods.items()}
    state: dict[str, int] = {}

    def visit(n: str, trail: list[str]) -> None:
        state[n] = 1
        for m in graph[n]:
            assert state.get(m) != 1, " -> ".join([*trail, n, m])
            if m not in state:
                visit(m, [*trail, n])
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n, [])


def test_module_and_function_sizes() -> None:
    long_modules = []
    long_functions = []
    for path in PLANNER.rglob("*.py"):
        lines = path.read_text().splitlines()
        module_doc = ast.get_docstring(ast.parse("\n".join(lines))) or ""
        if len(lines) > 600 and "long because" not in module_doc.lower():
            long_modules.append(f"{path.name}: {len(lines)} lines")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                if n > 80 and "long because" not in doc.lower():
                    long_functions.append(f"{path.name}:{node.name}: {n} lines")
    assert not long_modules, long_modules
    assert not long_functions, long_functions
