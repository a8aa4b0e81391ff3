"""Plan files: written with a format version, the problem and the catalog hash; read through a
schema; `planner verify` recomputes them and lists every field that does not hold (exit 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError
from planner.load import load_problem
from planner.plan.io import FORMAT_VERSION, dumps_plan, parse_plan_text, plan_document, read_plan
from planner.schema.problem import InferenceWorkload
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

runner = CliRunner()
CHAT = Path("problems/chat-70b.yaml")
FAILS = 5  # documented exit code: the plan fails verification


def run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def chat_doc() -> dict[str, Any]:
    problem = load_problem(CHAT)
    plan = solve_problem(problem, time_limit=30)
    doc: dict[str, Any] = json.loads(dumps_plan(plan_document(plan, problem, load_catalog())))
    return doc


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _failures(tmp_path: Path, doc: dict[str, Any]) -> list[str]:
    return plan_failures(read_plan(_write(tmp_path, doc)), load_catalog())


def test_a_solved_plan_holds_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    assert run("solve", str(CHAT), "--out", str(path), "--no-timings")[0] == 0
    data = json.loads(path.read_text())
    assert data["format_version"] == FORMAT_VERSION
    assert len(data["problem_sha256"]) == 64 and len(data["catalog_sha256"]) == 64
    code, text = run("verify", str(path))
    assert code == 0, text
    code, text = run("verify", str(path), str(CHAT))
    assert code == 0, text
    assert "optimality confirmed" in text and f"${data['objective']:,.0f}" in text, text


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = doc
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value(node[keys[-1]]) if callable(value) else value

    return edit


TAMPER = {
    "total cost $1": ([_set("costs.total_usd", 1.0), _set("tco_usd", 1.0)], "total_usd"),
    "tco halved": ([_set("tco_usd", lambda v: v / 2)], "tco_usd"),
    "device count 8 to 2": ([_set("devices.0.count", 2)], "count"),
    "stage memory 5e11": (
        [_set("workloads.0.stages.0.memory_bytes", lambda m: {k: 5e11 for k in m})],
        "memory",
    ),
    "throughput 1e9": ([_set("workloads.0.tokens_per_s", 1e9)], "throughput"),
    "power halved": ([_set("power_w", lambda v: v / 2)], "power"),
    "capex edited": ([_set("capex_usd", lambda v: v + 1000)], "capex"),
    "bound off an optimal objective": ([_set("bound", lambda v: v * 0.5)], "bound"),
    "gap edited": ([_set("gap", 0.5)], "gap"),
    "embedded problem edited": (
        [_set("problem_document.constraints.budget_usd", 1.0)],
        "problem_sha256",
    ),
    "catalog hash edited": ([_set("catalog_sha256", "0" * 64)], "catalog_sha256"),
    # The fields a memo and a comparison print: what the plan answers and over which designs.
    "problem renamed": ([_set("problem", "other")], "`problem`"),
    "goal renamed": ([_set("objective_name", "lowest price guaranteed")], "objective_name"),
    "another goal": ([_set("objective_name", "max_tokens_per_joule")], "objective_name"),
    "design space edited": ([_set("design_space", ["anything"])], "design_space"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_tampered_plan_is_caught_naming_the_field(
    case: str, chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    doc = json.loads(json.dumps(chat_doc))
    edits, word = TAMPER[case]
    for edit in edits:
        edit(doc)
    found = _failures(tmp_path, doc)
    assert found, case
    assert any(word in f for f in found), (case, found)
    code, text = run("verify", str(_write(tmp_path, doc, "t.json")))
    assert code == FAILS, text


def test_nan_infinity_and_huge_numbers_are_refused(tmp_path: Path) -> None:
    for bad in ("NaN", "Infinity", "-Infinity", "1e999"):
        with pytest.raises(InputError, match="not a valid plan"):
            parse_plan_text(f'{{"status": "OPTIMAL", "devices": [], "tco_usd": {bad}}}', "x")


def test_an_older_format_is_refused_with_the_fix(chat_doc: dict[str, Any], tmp_path: Path) -> None:
    doc = {k: v for k, v in chat_doc.items() if k != "format_version"}
    code, text = run("verify", str(_write(tmp_path, doc)))
    assert code == 2
    assert "format version 1" in text and "planner solve" in text


def test_a_mistyped_field_is_located(chat_doc: dict[str, Any], tmp_path: Path) -> None:
    doc = json.loads(json.dumps(chat_doc))
    doc["workloads"][0]["stages"][0]["tp"] = "four"
    code, text = run("verify", str(_write(tmp_path, doc)))
    assert code == 2
    assert "workloads.0.stages.0.tp" in text


# Numbers beyond any plan's figures, wrong JSON types and keys written twice are refused by
# their path, exit 2, before anything is recomputed from them (a 400-digit count once stopped
# the verifier with an OverflowError; "8", false and 8.0 once passed as counts).
REFUSED = {
    "a 400-digit count": (_set("devices.0.bought", 10**400), "devices.0.bought", "out of range"),
    "a count beyond any fleet": (_set("devices.0.bought", 10**10), "devices.0.bought", "count"),
    "a figure beyond any plan": (_set("tco_usd", 1e300), "tco_usd", "out of range"),
    "a huge problem figure": (
        _set("problem_document.constraints.budget_usd", 10**40),
        "problem_document.constraints.budget_usd",
        "out of range",
    ),
    "a count in quotes": (_set("devices.0.bought", "8"), "devices.0.bought", '"8"'),
    "a boolean count": (_set("devices.0.owned", False), "devices.0.owned", "false"),
    "a count with a point": (_set("devices.0.bought", 8.0), "devices.0.bought", "8.0"),
    "a figure in quotes": (_set("tco_usd", "313015"), "tco_usd", "valid number"),
    "a boolean gap": (_set("gap", False), "gap", "false"),
    "a summary in quotes": (
        _set("summary.tokens_per_joule", "1"),
        "summary.tokens_per_joule",
        "valid number",
    ),
    "a version with a point": (_set("format_version", 2.0), "format version", "2.0"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_out_of_range_and_mistyped_numbers_are_refused_by_path(
    case: str, chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    doc = json.loads(json.dumps(chat_doc))
    edit, where, word = REFUSED[case]
    edit(doc)
    code, text = run("verify", str(_write(tmp_path, doc)))
    assert code == 2, text
    assert where in text and word in text, text
    assert "Traceback" not in text


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        del doc[key]

    return edit


# A field of another type than a number once got the fix for numbers ("the planner writes
# numbers bare (no quotes) and counts as whole numbers") whatever it was: a missing `problem`,
# a status, a list in quotes; and a version in quotes read "version '2'; this planner reads
# version 2".
MISTYPED = {
    "a missing field": (_drop("problem"), "`problem`: missing: every plan the planner writes"),
    "an unknown status": (_set("status", "PERFECT"), 'not "PERFECT": not what the planner'),
    "a list in quotes": (_set("devices", "gaudi2"), 'not "gaudi2": not what the planner writes'),
    "an object as text": (
        _set("workloads.0.confidence", "high"),
        'not "high": not what the planner writes there; restore the planner\'s value',
    ),
    "a version in quotes": (
        _set("format_version", "2"),
        '`format_version`: "2" is no plan format version: the planner writes it as a whole '
        "number without quotes (2 for this planner)",
    ),
}


@pytest.mark.parametrize("case", sorted(MISTYPED))
def test_a_field_of_the_wrong_kind_gets_the_fix_for_its_kind(
    case: str, chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    doc = json.loads(json.dumps(chat_doc))
    edit, message = MISTYPED[case]
    edit(doc)
    code, text = run("verify", str(_write(tmp_path, doc)), "--no-resolve")
    text = " ".join(text.split())
    assert code == 2 and message in text, text
    assert "numbers bare" not in text


def test_a_key_written_twice_is_refused_by_path(chat_doc: dict[str, Any], tmp_path: Path) -> None:
    text = json.dumps(chat_doc)
    top = text.replace('"tco_usd": ', '"tco_usd": 1.0, "tco_usd": ', 1)
    nested = text.replace('"bought": ', '"bought": 4, "bought": ', 1)
    for doc, where in ((top, "`tco_usd`"), (nested, "`devices.0.bought`")):
        path = tmp_path / "dup.json"
        path.write_text(doc)
        code, out = run("verify", str(path))
        assert code == 2, out
        assert where in out and "twice" in out, out


MALFORMED = [
    "",
    "[]",
    '{"status": "OPTIMAL"}',
    '{"status": "OPTIMAL", "devices": 3}',
    '{"status": "OPTIMAL", "devices": [], "tco_usd": NaN}',
    '{"format_version": 2, "status": "OPTIMAL", "devices": [{"type": 1}]}',
    "\xff\xfe",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_compare_never_crashes_on_malformed_files(
    text: str, chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.encode("utf-8", "surrogateescape") if text else b"")
    good = _write(tmp_path, chat_doc, "good.json")
    code, out = run("compare", str(good), str(bad))
    assert code == 2, out
    assert "bad.json" in out


def test_compare_refuses_a_tampered_plan(chat_doc: dict[str, Any], tmp_path: Path) -> None:
    doc = json.loads(json.dumps(chat_doc))
    doc["tco_usd"] = doc["costs"]["total_usd"] = 1.0
    code, text = run(
        "compare", str(_write(tmp_path, chat_doc, "a.json")), str(_write(tmp_path, doc))
    )
    assert code == FAILS
    assert "total_usd" in text


def test_plan_files_that_are_not_regular_files_are_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    for path in (fifo, link):
        for command in (["verify", str(path)], ["compare", str(path), str(path)]):
            result = CliRunner().invoke(app, command)
            assert result.exit_code == 2, result.output
            assert "not a regular file" in result.output


def test_the_catalog_hash_leaves_out_models_read_from_config_files() -> None:
    # A model a problem names by config.json is the problem's input: reading such a problem
    # earlier in the process must not change the hash of the catalog later plans are made with.
    from planner.catalog import _file_models, add_file_model, load_catalog
    from planner.plan.io import catalog_sha256

    before = catalog_sha256(load_catalog())
    key = "models/hash-test/config.json"
    add_file_model(key, load_catalog().model("llama-3.1-8b"))
    try:
        cat = load_catalog()
        assert key in cat.models
        assert catalog_sha256(cat) == before
    finally:
        _file_models.pop(key, None)


def test_a_problem_with_measured_capacity_reads_back_from_its_dump() -> None:
    """A plan carries its problem as a document (and what-ifs pass problems on as documents):
    a capacity entry's class is written under the key a problem file uses, `class`, so the
    document reads back (it was written as `request_class`, and verify, simulate and compare
    refused the plan the solver had just written)."""
    import yaml

    from planner.schema.problem import Problem

    doc = yaml.safe_load(Path("problems/request-mix.yaml").read_text(encoding="utf-8"))
    doc["workloads"][0]["capacity"] = [
        {"device": "h100-sxm", "tp": 1, "class": "chat", "requests_per_s": 55}
    ]
    problem = Problem.model_validate(doc)
    dumped = problem.model_dump(mode="json")
    assert dumped["workloads"][0]["capacity"][0]["class"] == "chat"
    assert Problem.model_validate(dumped) == problem


def test_an_empty_concurrency_is_refused_and_unbounded_reads_back() -> None:
    """`concurrency:` left empty is a slip that would size for open-ended demand: it is refused
    with the fix; `unbounded` says so on purpose, and a dumped problem writes that word."""
    import yaml

    from planner.schema.problem import Problem

    doc = yaml.safe_load(CHAT.read_text(encoding="utf-8"))
    doc["workloads"][0]["concurrency"] = None
    with pytest.raises(ValueError, match="`concurrency` is empty"):
        Problem.model_validate(doc)
    doc["workloads"][0]["concurrency"] = "unbounded"
    problem = Problem.model_validate(doc)
    dumped = problem.model_dump(mode="json")
    assert dumped["workloads"][0]["concurrency"] == "unbounded"
    assert Problem.model_validate(dumped) == problem


def test_a_plan_written_with_null_concurrency_still_reads_and_hashes(
    chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    """Plans written before `concurrency: null` was refused carry unbounded concurrency as null
    in their embedded problem, and their hash covers that: they still read, as unbounded, and
    their hash still holds."""
    import hashlib

    from planner.plan.io import canonical_json

    doc = json.loads(json.dumps(chat_doc))
    embedded = doc["problem_document"]
    embedded["workloads"][0]["concurrency"] = None  # as a version 2 plan wrote unbounded
    doc["problem_sha256"] = hashlib.sha256(canonical_json(embedded).encode()).hexdigest()
    pf = read_plan(_write(tmp_path, doc))
    w = pf.problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is None  # unbounded
    found = plan_failures(pf, load_catalog())
    assert not any("problem_sha256" in f for f in found), found


# --- The optimality claim: `planner verify` re-solves the plan's problem (planner.whatif.
# optimality). Objectives are compared, never assignments: tied plans may differ.


@pytest.fixture(scope="module")
def restricted_doc(chat_doc: dict[str, Any]) -> dict[str, Any]:
    """A plan solved over B200s alone, with the whole problem pasted in: every figure holds,
    and its OPTIMAL is false (the whole problem's optimum is lower)."""
    problem = load_problem(CHAT, ["constraints.allowed_devices=[b200]"])
    plan = solve_problem(problem, time_limit=30)
    doc: dict[str, Any] = json.loads(dumps_plan(plan_document(plan, problem, load_catalog())))
    for key in ("problem_document", "problem_sha256", "design_space"):
        doc[key] = chat_doc[key]
    return doc


def test_a_false_optimal_is_refused_with_both_figures(
    restricted_doc: dict[str, Any], chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    assert restricted_doc["status"] == "OPTIMAL"
    assert restricted_doc["objective"] > chat_doc["objective"] * 1.1
    path = _write(tmp_path, restricted_doc)
    assert plan_failures(read_plan(path), load_catalog()) == []  # the figures all hold
    code, text = run("verify", str(path), str(CHAT))
    assert code == FAILS, text
    assert f"OPTIMAL at ${restricted_doc['objective']:,.0f}" in text, text
    assert f"found a plan at ${chat_doc['objective']:,.0f}" in text, text
    code, text = run("verify", str(path), "--no-resolve")  # the figures alone hold
    assert code == 0 and "the plan holds" in text, text


def test_a_bound_below_the_optimum_holds_one_above_it_is_refused(
    chat_doc: dict[str, Any], tmp_path: Path
) -> None:
    best = chat_doc["objective"]
    for bound, code_wanted, words in (
        (best * 0.95, 0, "holds"),  # a loose bound is still a bound
        (best * 1.05, FAILS, "the claim does not hold"),  # a plan beats this "bound"
    ):
        doc = json.loads(json.dumps(chat_doc))
        doc["status"], doc["bound"] = "FEASIBLE", bound
        doc["gap"] = abs(best - bound) / best
        code, text = run("verify", str(_write(tmp_path, doc)))
        assert code == code_wanted, text
        assert f"the bound ${bound:,.0f}" in text and words in text, text


def test_a_claim_the_resolve_does_not_prove_is_left_unconfirmed(chat_doc: dict[str, Any]) -> None:
    """Judged on a stand-in for a re-solve stopped by its time limit (no timing involved)."""
    import dataclasses

    from planner.schema.status import Status
    from planner.whatif.optimality import _judge, allowance

    plan = plan_from(chat_doc)
    best = plan.objective
    assert best is not None
    stopped = dataclasses.replace(plan, status=Status.FEASIBLE, bound=best * 0.5)
    claim = _judge(plan, stopped, "within 30 s")
    assert claim.verdict == "unconfirmed"
    assert claim.message.startswith("optimality not confirmed within 30 s"), claim.message
    # A plan cheaper by less than the model's rounding ties; one cheaper beyond it refutes.
    by = allowance(plan, "min_cost", best)
    tie = dataclasses.replace(plan, objective=best - by / 2)
    assert _judge(plan, tie, "within 30 s").verdict == "confirmed"
    cheaper = dataclasses.replace(plan, objective=best - 2 * by)
    assert _judge(plan, cheaper, "within 30 s").verdict == "refuted"
    # A re-solve stopped with no bound at all says so: "its bound $0" was no bound.
    unbounded = dataclasses.replace(plan, status=Status.FEASIBLE, bound=None)
    claim = _judge(plan, unbounded, "within 30 s")
    assert claim.verdict == "unconfirmed" and "no bound yet" in claim.message, claim.message


def test_every_figure_a_problem_admits_fits_a_plan_file() -> None:
    """A plan the solver writes must read back: 64 workloads at the schema's 1e7 requests/s of
    up to 1e6 tokens for 20 years make about 4e26 tokens, past the old 1e18 bound (a plan of
    1.5e18 tokens was written and then refused)."""
    from planner.plan.io import MAX_FIGURE

    assert 64 * 1e7 * 1e6 * 20 * 8760 * 3600 < MAX_FIGURE < 1e300


def plan_from(doc: dict[str, Any]) -> Any:
    from planner.plan.io import plan_from_data

    return plan_from_data(json.loads(json.dumps(doc)), "chat").plan
