"""Plan files: the JSON document `planner solve --out` writes, and the one way to read it back.

A plan file carries what is needed to check it without trusting it: a format version, the
problem it answers (embedded, with the SHA-256 of its canonical JSON) and the SHA-256 of the
catalog it was solved against. Reading goes through a schema: bounded size, no NaN or infinity,
every field typed, errors located by their JSON path, exit code 2; a file of an older format
version is refused with the command that makes a new one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from planner.catalog import Catalog, file_model_keys
from planner.errors import InputError
from planner.plan.types import Plan
from planner.schema.files import read_text
from planner.schema.problem import Problem
from planner.schema.yaml_io import MAX_DEPTH, MAX_FILE_BYTES, Located, validate

# 1: plans before the format carried a version (no problem or catalog inside).
# 2: format_version, problem_document, problem_sha256, catalog_sha256, design_space.
FORMAT_VERSION = 2
HEADER_KEYS = (
    "format_version",
    "problem_document",
    "problem_sha256",
    "catalog_sha256",
    "design_space",
)


@functools.cache
def _plan_adapter() -> TypeAdapter[Plan]:
    """The validator of a plan file's fields, built when a plan is read (a solve that only
    writes one needs none)."""
    return TypeAdapter(Plan)


@dataclass
class _Derived:
    """The fields derived from the plan, which verify recomputes (planner.verify_plan): each a
    number or null, never a string or a boolean."""

    gap: float | None = None
    summary: dict[str, float | None] = dataclasses.field(default_factory=dict)


@functools.cache
def _derived_adapter() -> TypeAdapter[_Derived]:
    return TypeAdapter(_Derived)


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces, NaN refused: the same data always gives the same bytes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _as_version_2(doc: dict[str, Any]) -> dict[str, Any]:
    """A dumped problem as version 2 plans wrote it, which is what their hashes cover:
    unbounded concurrency as null (a problem file now says `unbounded`, and refuses null)."""
    for w in doc.get("workloads", []):
        if isinstance(w, dict) and w.get("concurrency") == "unbounded":
            w["concurrency"] = None
    return doc


def _from_version_2(doc: Any) -> Any:
    """A plan's embedded problem as a problem file says it: null concurrency is `unbounded`."""
    if isinstance(doc, dict) and isinstance(doc.get("workloads"), list):
        doc = {
            **doc,
            "workloads": [
                {**w, "concurrency": "unbounded"}
                if isinstance(w, dict) and "concurrency" in w and w["concurrency"] is None
                else w
                for w in doc["workloads"]
            ],
        }
    return doc


def problem_sha256(problem: Problem) -> str:
    """SHA-256 of the problem's canonical JSON (defaults filled in, so equal meaning, equal
    hash), in the form version 2 plans hashed (_as_version_2), so their hashes still hold."""
    doc = _as_version_2(problem.model_dump(mode="json"))
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def catalog_sha256(cat: Catalog) -> str:
    """SHA-256 of every catalog entry's canonical JSON (overlays included, as loaded). Models
    read from config.json files are the problems' own inputs, not catalog entries: they are
    left out, so the hash does not depend on which problems this process read before."""
    files = file_model_keys()
    tables = {
        "accelerators": cat.accelerators,
        "nodes": cat.nodes,
        "links": cat.links,
        "models": {k: m for k, m in cat.models.items() if k not in files},
        "regions": cat.regions,
        "instances": cat.instances,
    }
    data = {
        name: {key: item.model_dump(mode="json") for key, item in sorted(table.items())}
        for name, table in tables.items()
    }
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def design_space(problem: Problem) -> list[str]:
    """The designs an OPTIMAL status is proved among (docs/plan-format.md, "The design space")."""
    c = problem.constraints
    return [
        f"tensor parallelism: powers of two up to {c.max_tensor_parallel} inside one node's "
        "scale-up domain"
        + (" or its PCIe slots" if c.tensor_parallel_over_pcie else "")
        + ", dividing the attention heads; where every host of a device holds one (a DGX "
        "Spark, a Mac), groups of 2, 4 or 8 such machines (within that cap) over the network, "
        "on premises, under an engine that runs a group over machines, in pipelines of its own "
        "device type",
        f"pipelines: 1 to {c.max_stages} stages of one device type at one degree, layers split "
        "evenly (ceil(layers / stages), the last the rest)"
        + (
            "; or of two device types (up to 4 stages each, in either order), layers at the "
            "split whose slowest stage is fastest, paired among the 6 cheapest per token/s at "
            "each batch and 6 that cannot serve alone (and, for one of the 6 that none of "
            "those may pipeline with, the cheapest option of their device types that may); "
            "where three or more owned device types "
            "may serve, also of three and of four owned types (up to 4 stages each), every stage "
            "within the least time at which they hold the model, drawn among the 3 owned options "
            "cheapest per token/s at each batch and 1 that cannot serve alone"
            if c.heterogeneous_pipelines
            else ""
        ),
        "batch: powers of two from 1 to 2,048 sequences per micro-batch",
        "training jobs: one device type, every depth up to the layer count within max_stages, "
        f"every data-parallel degree within {c.max_devices or 4096:,} devices",
        f"fleets: at most {c.max_devices or 100_000:,} devices of a type; max_throughput "
        "replicas at most 4,096 devices",
        "money: every cost term in whole dollars, rounded up, so plans within a dollar a term "
        "of each other tie (planner.model.scale)",
    ]


def plan_document(plan: Plan, problem: Problem, cat: Catalog) -> dict[str, Any]:
    """The plan as a file: header first, then every field of `Plan.to_dict()`."""
    return {
        "format_version": FORMAT_VERSION,
        "problem_sha256": problem_sha256(problem),
        "catalog_sha256": catalog_sha256(cat),
        "design_space": design_space(problem),
        **plan.to_dict(),
        "problem_document": problem.model_dump(mode="json"),
    }


def dumps_plan(data: dict[str, Any]) -> str:
    """The plan document as the text written to files and printed (NaN or infinity is a bug)."""
    try:
        return json.dumps(data, indent=2, default=str, allow_nan=False) + "\n"
    except ValueError as e:
        from planner.errors import InternalError

        raise InternalError(
            f"plan `{data.get('problem')}` holds a non-finite number: {e}"
        ) from None


@dataclass(frozen=True)
class PlanFile:
    """A plan file read and checked against the format: the raw document, the plan and its
    problem."""

    source: str
    data: dict[str, Any]
    plan: Plan
    problem: Problem
    problem_sha256: str
    catalog_sha256: str


# The largest magnitude of any number in a plan file: beyond every figure a plan the problem
# schema admits can hold (64 workloads at 1e7 requests/s of 1e6 tokens over 20 years is about
# 4e26 tokens), and small enough that no sum or product the verifier forms overflows a float.
# Counts have their own, tighter bound (plan.types.MAX_COUNT).
MAX_FIGURE = 1e30


class _Object(dict[str, Any]):
    """A JSON object as read, remembering the first key written twice in it (json keeps the
    last value silently, so an edit could hide behind the planner's own figure)."""

    twice: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    for key, value in pairs:
        if key in obj and obj.twice is None:
            obj.twice = key
        obj[key] = value
    return obj


def _nodes(data: Any) -> Iterator[tuple[str, Any]]:
    """Every value in parsed JSON with its dotted path, parents first (without recursion)."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        path, value = todo.pop()
        yield path, value
        if isinstance(value, dict):
            items: Iterable[tuple[Any, Any]] = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        todo.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(items)))


def _duplicate_key(data: Any, source: str) -> None:
    """Refuse an object that names a key twice, by the key's path."""
    for path, value in _nodes(data):
        if isinstance(value, _Object) and value.twice is not None:
            at = f"{path}.{value.twice}" if path else value.twice
            raise InputError(
                f"{source}: `{at}`: the key appears twice in one object; a plan file names "
                "each field once: remove the copy, or solve the problem again to write the "
                "plan afresh"
            )


def _out_of_range(data: Any, source: str) -> None:
    """Refuse a number beyond MAX_FIGURE anywhere in the file, by its path."""
    for path, value in _nodes(data):
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and abs(value) > MAX_FIGURE
        ):
            shown = (
                f"a {len(str(abs(value)))}-digit integer"
                if isinstance(value, int)
                else f"{value:.3g}"
            )
            raise InputError(
                f"{source}: `{path or '(top level)'}`: {shown} is out of range: no figure "
                f"of a plan exceeds {MAX_FIGURE:.0e} in magnitude; solve the problem again "
                "to write the plan afresh"
            )


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text} is out of range")
    return v


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a plan may hold")


def parse_plan_text(text: str, source: str) -> dict[str, Any]:
    """JSON text to a dict, refusing NaN, infinities and numbers beyond float range."""
    try:
        data = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite, object_pairs_hook=_object
        )
    except json.JSONDecodeError as e:
        hint = (
            " (a problem file? this command takes a plan written by "
            "`planner solve PROBLEM.yaml --out PLAN.json`)"
            if source.lower().endswith((".yaml", ".yml"))
            else ""
        )
        raise InputError(f"{source}:{e.lineno}:{e.colno}: not a JSON plan: {e.msg}{hint}") from None
    except ValueError as e:
        raise InputError(
            f"{source}: not a valid plan: {e} (NaN and infinities are refused)"
        ) from None
    except RecursionError:  # json's reader recurses once per level
        data, too_deep = None, True
    else:
        too_deep = _depth(data) > MAX_DEPTH
    if too_deep:
        raise InputError(
            f"{source}: not a plan: objects and lists nested deeper than {MAX_DEPTH} levels "
            "(a plan written by `planner solve --out PLAN.json` nests far less)"
        )
    _duplicate_key(data, source)
    if not isinstance(data, dict) or "status" not in data or "devices" not in data:
        raise InputError(
            f"{source}: not a plan written by `planner solve --format json` "
            "(no `status` and `devices`)"
        )
    return data


def _depth(data: Any) -> int:
    """How deep objects and lists nest in parsed JSON (without recursion)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                items = value.values() if isinstance(value, dict) else value
                todo.extend((v, level + 1) for v in items)
    return deepest


def read_plan(path: Path) -> PlanFile:
    """Read a plan file: bounded size, UTF-8 JSON, current format version, typed fields."""
    # The one reader: regular files only (no FIFO, /dev/zero or folder), bounded, UTF-8
    # errors by line and column.
    text = read_text(path, MAX_FILE_BYTES)
    return plan_from_data(parse_plan_text(text, str(path)), str(path))


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def plan_from_data(data: dict[str, Any], source: str) -> PlanFile:
    """Check a parsed plan document against the format and build its Plan and Problem."""
    version = data.get("format_version", 1)
    if type(version) is not int:  # "2" or 2.0 once read "version '2'; this planner reads 2"
        raise InputError(
            f"{source}: `format_version`: {json.dumps(version)[:40]} is no plan format version: "
            f"the planner writes it as a whole number without quotes ({FORMAT_VERSION} for this "
            "planner); write that, or solve the problem again (`planner solve PROBLEM.yaml "
            "--out PLAN.json`)"
        )
    if version != FORMAT_VERSION:
        raise InputError(
            f"{source}: plan format version {version!r}; this planner reads version "
            f"{FORMAT_VERSION}. Solve the problem again to write a current plan: "
            "`planner solve PROBLEM.yaml --out PLAN.json`"
        )
    for key in HEADER_KEYS:
        if key not in data:
            raise InputError(
                f"{source}: `{key}`: missing (every version {FORMAT_VERSION} plan has it)"
            )
    for key in ("problem_sha256", "catalog_sha256"):
        if not isinstance(data[key], str):
            raise InputError(f"{source}: `{key}`: a hex string is expected")
    fields = {k: v for k, v in data.items() if k not in HEADER_KEYS and k not in ("gap", "summary")}
    unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(Plan)})
    if unknown:  # a plan file holds what the planner wrote, nothing an editor added
        raise InputError(
            f"{source}: `{unknown[0]}`: not a field of a version {FORMAT_VERSION} plan"
            + (f" (nor {', '.join(f'`{k}`' for k in unknown[1:])})" if len(unknown) > 1 else "")
            + "; remove it, or solve the problem again to write the plan afresh"
        )
    fields.setdefault("solve_seconds", 0.0)
    _out_of_range(data, source)
    try:  # strict: `"8"` or `true` is no count, `8.0` no integer (the planner writes neither)
        plan = _plan_adapter().validate_json(json.dumps(fields), strict=True)
        _derived_adapter().validate_json(
            json.dumps({k: data[k] for k in ("gap", "summary") if k in data}), strict=True
        )
    except ValidationError as e:
        raise InputError(_schema_error(e, source)) from None
    _check_counts(plan, source)
    if not isinstance(data["problem_document"], dict):
        raise InputError(f"{source}: `problem_document`: an object (the problem) is expected")
    problem = validate(
        Located(_from_version_2(data["problem_document"]), {}, f"{source}: problem_document"),
        Problem,
    )
    return PlanFile(source, data, plan, problem, data["problem_sha256"], data["catalog_sha256"])


# pydantic's errors about a number: a count or a figure in quotes, a boolean, a point in a
# count, a bound passed (the fix is the planner's own figure, written bare).
_NUMBER_ERRORS = frozenset(
    {
        "int_type",
        "int_parsing",
        "int_from_float",
        "float_type",
        "float_parsing",
        "finite_number",
        "less_than_equal",
        "greater_than_equal",
        "greater_than",
        "less_than",
    }
)


def _schema_error(e: ValidationError, source: str) -> str:
    """The first field of a plan that fails its type, by path, with what the file holds there
    and the fix."""
    first = e.errors()[0]
    more = f" ({e.error_count() - 1} more)" if e.error_count() > 1 else ""
    if first["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        msg = "not a field the planner writes there; remove it, or solve again"
    elif first["type"] == "missing":  # once "Field required, not {...}: ... writes numbers bare"
        msg = (
            "missing: every plan the planner writes has it; restore it, or solve the problem "
            "again (`planner solve PROBLEM.yaml --out PLAN.json`)"
        )
    elif first["type"] not in _NUMBER_ERRORS:  # a status, a list, an object of another type
        held = json.dumps(first.get("input"), default=str)
        held = held if len(held) <= 40 else held[:37] + "..."
        msg = (
            f"{first['msg']}, not {held}: not what the planner writes there; restore the "
            "planner's value, or solve the problem again (`planner solve PROBLEM.yaml --out "
            "PLAN.json`)"
        )
    else:
        held = json.dumps(first.get("input"), default=str)
        held = held if len(held) <= 40 else held[:37] + "..."
        fix = (
            "a count of no fleet"
            if first["type"] == "less_than_equal"
            else "the planner writes numbers bare (no quotes) and counts as whole numbers"
        )
        msg = (
            f"{first['msg']}, not {held}: {fix}; write the planner's figure, or solve the "
            "problem again (`planner solve PROBLEM.yaml --out PLAN.json`)"
        )
    return f"{source}: `{_dotted(first['loc'])}`: {msg}{more}"


def _check_counts(plan: Plan, source: str) -> None:
    """Counts a plan can hold: tensor-parallel degrees and batches of at least 1, no negative
    count (a zero degree would divide by zero in the recomputation)."""
    for i, wp in enumerate(plan.workloads):
        at = f"{source}: `workloads.{i}"
        if wp.replicas < 0:
            raise InputError(f"{at}.replicas`: {wp.replicas}; a count of replicas is at least 0")
        if wp.batch < 1:
            raise InputError(f"{at}.batch`: {wp.batch}; a replica holds at least 1 sequence")
        for j, st in enumerate(wp.stages):
            if st.tp < 1:
                raise InputError(f"{at}.stages.{j}.tp`: {st.tp}; a tensor-parallel degree is >= 1")
    for i, d in enumerate(plan.devices):
        counts = (d.count, d.owned, d.bought, d.reserved, d.on_demand, d.spot)
        if min(counts) < 0:
            raise InputError(f"{source}: `devices.{i}`: a negative device count")
