"""Start-up: what a command imports, the cache of parsed catalog files, and the exit that skips
interpreter teardown. (Times are measured by benchmarks/bench_startup.py, not here.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner import catalog as catalog_mod
from planner.errors import InputError
from planner.schema import data_cache
from planner.schema.catalog import LinkFile

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
        timeout=120,
    )


def _loaded_by_help(which: str) -> str:
    """The last line `--help` run in a fresh interpreter prints: sorted([m for m in which]),
    `which` a generator over the names in sys.modules."""
    code = (
        "import sys\nfrom planner.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted({which}))"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_help_loads_no_numpy_solver_or_pandas() -> None:
    modules = "('numpy', 'pandas', 'ortools', 'matplotlib')"
    assert _loaded_by_help(f"m for m in {modules} if m in sys.modules") == "[]"


def test_solve_loads_no_pandas_and_exits_with_its_code(tmp_path: Path) -> None:
    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('exit handlers ran', file=sys.stderr))\n"
        "sys.argv = ['planner', 'solve', 'problems/infeasible.yaml', '--format', 'json']\n"
        "import planner\nplanner.main()\n"
    )
    r = _run(code, {"PLANNER_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 3, r.stderr
    assert '"status": "INFEASIBLE"' in r.stdout  # flushed before the process ended
    assert "exit handlers ran" in r.stderr
    code = (
        "import sys\nfrom planner.cli import app\n"
        "for ex in ('chat-70b', 'p95-latency-70b'):\n"
        "    try:\n        app(['solve', f'problems/{ex}.yaml', '--format', 'json'])\n"
        "    except SystemExit:\n        pass\n"
        "print([m for m in ('pandas', 'numpy.ma') if m in sys.modules], file=sys.stderr)"
    )
    r = _run(code, {"PLANNER_CACHE_DIR": str(tmp_path)})
    assert r.stderr.strip().splitlines()[-1] == "[]"


def test_cache_round_trip_and_bad_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data_cache.ENV_VAR, str(tmp_path / "c"))
    text = "links: []\n"
    assert data_cache.load(text, "catalog") is None
    data_cache.store(text, "catalog", {"links": [], "n": {8: 1.5}})
    assert data_cache.load(text, "catalog") == {"links": [], "n": {8: 1.5}}
    assert data_cache.load(text + " ", "catalog") is None  # keyed by the content
    (entry,) = (tmp_path / "c").iterdir()
    entry.write_bytes(b"\x00garbage")
    assert data_cache.load(text, "catalog") is None
    data_cache.store(text, "catalog", {"when": object()})  # not plain data: not stored
    assert data_cache.load(text, "catalog") is None


def test_unwritable_or_off_cache_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(data_cache.ENV_VAR, str(blocker / "sub"))
    data_cache.store("x: 1\n", "catalog", {"x": 1})
    assert data_cache.load("x: 1\n", "catalog") is None
    monkeypatch.setenv(data_cache.ENV_VAR, "")
    assert data_cache.cache_dir() is None
    data_cache.store("x: 1\n", "catalog", {"x": 1})
    assert data_cache.load("x: 1\n", "catalog") is None


def test_catalog_from_cache_equals_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data_cache.ENV_VAR, str(tmp_path))
    root = catalog_mod.default_catalog_dir()
    path = root / catalog_mod.FILES["links"]
    first = catalog_mod._validated(path, LinkFile)  # parsed, then stored
    assert list(tmp_path.iterdir())
    second = catalog_mod._validated(path, LinkFile)  # from the cache
    assert first == second


def test_cached_data_that_fails_validation_gets_a_located_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(data_cache.ENV_VAR, str(tmp_path / "c"))
    bad = tmp_path / "links.yaml"
    bad.write_text("links:\n  - id: x\n    bogus_key: 1\n")
    text = bad.read_text()
    data_cache.store(text, "catalog", {"links": [{"id": "x", "bogus_key": 1}]})
    with pytest.raises(InputError, match=r"links.yaml:3:5: .*bogus_key"):
        catalog_mod._validated(bad, LinkFile)


def test_shipped_data_files_are_cached_and_bad_ones_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planner.estimator.efficiency import ServingFile, load_serving
    from planner.schema.yaml_io import read_validated

    monkeypatch.setenv(data_cache.ENV_VAR, str(tmp_path / "c"))
    shipped = catalog_mod.default_catalog_dir() / "serving.yaml"
    assert read_validated(shipped, ServingFile) == load_serving()
    assert list((tmp_path / "c").iterdir())  # parsed once, then read from the cache
    assert read_validated(shipped, ServingFile) == load_serving()
    bad = tmp_path / "serving.yaml"
    bad.write_text(shipped.read_text().replace("latency_margin:", "latency_margin: -1\n#"))
    with pytest.raises(InputError, match=r"serving.yaml:\d+:\d+: latency_margin"):
        read_validated(bad, ServingFile)


def test_estimate_defaults_are_the_problem_files_defaults() -> None:
    from planner import cli
    from planner.schema.problem import Horizon, InferenceWorkload, TrainingWorkload

    for written, model in (
        (cli._HZ, Horizon),
        (cli._INF, InferenceWorkload),
        (cli._TRN, TrainingWorkload),
    ):
        assert written == {k: model.model_fields[k].default for k in written}, model.__name__


def test_help_loads_no_pydantic_model_or_rich() -> None:
    prefixes = "('pydantic', 'planner.schema.p', 'rich')"
    assert _loaded_by_help(f"m for m in sys.modules if m.startswith({prefixes})") == "[]"


def test_sorted_distinct_is_numpys_unique() -> None:
    import numpy as np

    from planner.estimator.replica import sorted_distinct

    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 50):
        rows = rng.integers(0, 10, n).astype(np.int64)
        assert np.array_equal(sorted_distinct(rows), np.unique(rows))
        grid = np.concatenate([np.linspace(0.0, 9.0, 7), rng.integers(0, 10, n).astype(float)])
        got = sorted_distinct(grid)
        assert got.dtype == np.float64 and np.array_equal(got, np.unique(grid))


def test_a_command_leaves_its_callers_collector_as_it_was(tmp_path: Path) -> None:
    import gc

    from typer.testing import CliRunner

    from planner.cli import app

    frozen = gc.get_freeze_count()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            r = CliRunner().invoke(app, ["solve", "problems/infeasible.yaml", "--format", "json"])
            assert r.exit_code == 3, r.output
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert gc.get_freeze_count() == frozen  # only the planner process itself freezes


def test_the_planner_process_collects_during_its_work(tmp_path: Path) -> None:
    code = (
        "import gc, sys, atexit\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 0, "
        "file=sys.stderr))\n"
        "sys.argv = ['planner', 'solve', 'problems/infeasible.yaml', '--format', 'json']\n"
        "import planner\nplanner.main()\n"
    )
    r = _run(code, {"PLANNER_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "True True"


def test_the_planner_process_turns_pydantic_plugins_off_unless_told(tmp_path: Path) -> None:
    code = (
        "import os, sys, atexit\n"
        "atexit.register(lambda: print(repr(os.environ.get('PYDANTIC_DISABLE_PLUGINS')), "
        "'importlib.metadata' in sys.modules, file=sys.stderr))\n"
        "sys.argv = ['planner', 'solve', 'problems/infeasible.yaml', '--format', 'json']\n"
        "import planner\nplanner.main()\n"
    )
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    # Off: no entry-point scan, and pydantic's loader (with importlib.metadata) is not imported.
    for given, seen in (
        (None, "'__all__' False"),
        ("", "'' True"),
        ("logfire", "'logfire' True"),
        ("true", "'true' False"),
    ):
        env = {**base, "PYTHONPATH": str(ROOT), "PLANNER_CACHE_DIR": str(tmp_path)}
        if given is not None:
            env["PYDANTIC_DISABLE_PLUGINS"] = given
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=False,
            timeout=120,
        )
        assert r.returncode == 3, r.stderr
        assert '"status": "INFEASIBLE"' in r.stdout
        assert r.stderr.strip().splitlines()[-1] == seen


def test_the_stand_in_plugin_loader_gives_the_real_one_for_anything_else() -> None:
    code = (
        "import os, sys\nos.environ.pop('PYDANTIC_DISABLE_PLUGINS', None)\n"
        "from planner.process import no_pydantic_plugins\nno_pydantic_plugins()\n"
        "from pydantic import BaseModel\n"
        "class M(BaseModel):\n    x: int\n"
        "assert M(x=1).x == 1 and 'importlib.metadata' not in sys.modules\n"
        "from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP, get_plugins\n"
        "print(PYDANTIC_ENTRY_POINT_GROUP, list(get_plugins()))\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pydantic []"


def test_the_planner_imported_as_a_library_leaves_pydantic_plugins_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    r = CliRunner().invoke(app, ["solve", "problems/infeasible.yaml", "--format", "json"])
    assert r.exit_code == 3, r.output
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
