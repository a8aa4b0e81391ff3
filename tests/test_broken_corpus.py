"""Every file in tests/broken/ is a small problem file with one defect; `planner solve` must reject
it with exit code 2 and a message that names the file, the line and what was expected.

Each file states what it checks in its first comment lines:

    # what the defect is
    # expect: a substring of the message          (one or more)
    # expect-line: 7                              (the line the message points to, if any)
    # exit: 2
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import InputError
from planner.load import load_problem
from planner.schema import yaml_io
from planner.schema.yaml_io import MAX_FILE_BYTES, parse_text

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "broken"
BROKEN_FILES = sorted(BROKEN.glob("*.yaml"))
PROBLEM_FILES = sorted((ROOT / "problems").glob("*.yaml"))

runner = CliRunner()


@dataclass(frozen=True)
class Expectation:
    substrings: tuple[str, ...]
    line: int | None
    exit_code: int


def expectation(path: Path) -> Expectation:
    """The `# expect...` header of a corpus file."""
    substrings: list[str] = []
    line = None
    exit_code = None
    for text in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"# (expect|expect-line|exit): (.*)", text)
        if m is None:
            continue
        key, value = m.groups()
        if key == "expect":
            substrings.append(value)
        elif key == "expect-line":
            line = int(value)
        else:
            exit_code = int(value)
    assert substrings and exit_code is not None, f"{path.name}: header incomplete"
    return Expectation(tuple(substrings), line, exit_code)


def flat(text: str) -> str:
    """The console wraps long lines at spaces; compare with every run of whitespace as one."""
    return " ".join(text.split())


def test_corpus_is_large_enough() -> None:
    assert len(BROKEN_FILES) >= 60


@pytest.mark.parametrize("path", BROKEN_FILES, ids=[p.stem for p in BROKEN_FILES])
def test_broken_file_is_rejected_with_a_located_message(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = expectation(path)
    monkeypatch.chdir(BROKEN)  # messages then name the file as given, short enough to stay whole
    result = runner.invoke(app, ["solve", path.name, "--time-limit", "5"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    output = flat(result.output)
    assert result.exit_code == want.exit_code, output
    assert "Traceback" not in output
    if want.line is not None:
        assert f"{path.name}:{want.line}:" in output, output
    else:
        assert path.name in output, output
    for sub in want.substrings:
        assert flat(sub) in output, f"missing {sub!r} in: {output}"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=[p.stem for p in PROBLEM_FILES])
def test_example_problems_still_parse(path: Path) -> None:
    problem = load_problem(path)
    assert problem.workloads


# Limits that would need large files in the corpus: generated here instead.


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    p = tmp_path / "huge.yaml"
    p.write_text("name: x\ndescription: " + "a" * MAX_FILE_BYTES + "\n", encoding="utf-8")
    r = runner.invoke(app, ["solve", str(p)])
    assert r.exit_code == 2
    assert "larger than 4 MiB" in flat(r.output)


def test_text_over_the_size_limit() -> None:
    with pytest.raises(InputError, match="larger than 4 MiB"):
        parse_text("x: " + "é" * (MAX_FILE_BYTES // 2), "big.yaml")


def test_description_over_the_length_limit(tmp_path: Path) -> None:
    p = tmp_path / "long.yaml"
    words = "word " * 2_100  # 10,500 characters, in a folded block of short lines
    p.write_text(
        "name: x\ndescription: >\n  "
        + words.replace("word word word word ", "word word word word\n  ")
        + "\nworkloads:\n  - {name: chat, model: llama-3.1-8b}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"long.yaml:2:\d+: description: text of 10,?\d{3}"):
        load_problem(p)


def test_one_value_over_the_scalar_limit(tmp_path: Path) -> None:
    p = tmp_path / "scalar.yaml"
    p.write_text("name: x\nworkloads:\n  - name: " + "c" * 30_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"scalar.yaml:3:\d+: workloads\[0\]\.name: a value of"):
        load_problem(p)


def test_too_many_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_io, "MAX_NODES", 1_000)  # the real limit takes seconds to reach
    p = tmp_path / "wide.yaml"
    p.write_text("name: x\nworkloads: [" + "1, " * 1_500 + "1]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"wide.yaml:2:\d+: more than 1,000 values in one"):
        load_problem(p)


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "latin1.yaml"
    p.write_bytes("name: caf\xe9\n".encode("latin-1"))
    r = runner.invoke(app, ["solve", str(p)])
    assert r.exit_code == 2
    assert "cannot read as UTF-8" in flat(r.output)


def test_missing_file(tmp_path: Path) -> None:
    r = runner.invoke(app, ["solve", str(tmp_path / "nope.yaml")])
    assert r.exit_code == 2
    assert "nope.yaml" in flat(r.output)


def test_many_errors_are_capped(tmp_path: Path) -> None:
    p = tmp_path / "many.yaml"
    p.write_text(
        "name: x\nworkloads:\n" + "".join(f"  - {{name: w{i}}}\n" for i in range(40)),
        encoding="utf-8",
    )
    with pytest.raises(InputError) as e:
        load_problem(p)
    lines = str(e.value).splitlines()
    assert len(lines) == 21
    assert lines[-1] == "... and 20 more errors"
