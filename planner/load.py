"""Load a problem: read the file, apply `--set` overrides, validate, and check every name it
uses against the catalog (located errors with did-you-mean)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from planner.catalog import Catalog, load_catalog
from planner.errors import InputError, did_you_mean
from planner.estimator.formats import kv_bytes, weight_format
from planner.schema.overrides import apply_overrides, blame
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.yaml_io import Located, dotted, read_yaml, validate


def load_problem(path: Path, overrides: Sequence[str] = ()) -> Problem:
    """Read, override (`--set PATH=VALUE`), validate and name-check a problem file."""
    return parse_problem(read_yaml(path), overrides)


def parse_problem(doc: Located, overrides: Sequence[str] = ()) -> Problem:
    doc, origin = apply_overrides(doc, overrides)
    try:
        problem = validate(doc, Problem)
        check_names(problem, load_catalog(), doc)
    except InputError as e:
        raise blame(e, origin) from None
    return problem


def check_names(problem: Problem, cat: Catalog, doc: Located | None = None) -> None:
    """Every name a problem uses exists in the catalog (with a located, suggesting error)."""

    def where(loc: tuple[str | int, ...]) -> str:
        return f"{doc.where(loc)}: {dotted(loc)}: " if doc else f"{dotted(loc)}: "

    for i, w in enumerate(problem.workloads):
        if w.model not in cat.models:
            raise InputError(
                f"{where(('workloads', i, 'model'))}workload `{w.name}`: unknown model `{w.model}`"
                f"{did_you_mean(w.model, cat.models)}"
            )
        if isinstance(w, InferenceWorkload):
            for key, check in (("weights", weight_format), ("kv", kv_bytes)):
                try:
                    check(getattr(w, key))
                except InputError as e:
                    raise InputError(
                        f"{where(('workloads', i, key))}workload `{w.name}`: {e}"
                    ) from None
    c = problem.constraints
    for key, names in (
        ("allowed_devices", c.allowed_devices or []),
        ("excluded_devices", c.excluded_devices),
        ("inventory", [o.device for o in c.inventory]),
    ):
        for j, n in enumerate(names):
            if n not in cat.accelerators:
                loc: tuple[str | int, ...] = ("constraints", key, j)
                if key == "inventory":
                    loc = (*loc, "device")
                raise InputError(
                    f"{where(loc)}unknown device `{n}`{did_you_mean(n, cat.accelerators)}"
                )
    vendors = {a.vendor for a in cat.accelerators.values()}
    for j, v in enumerate(c.vendors or []):
        if v not in vendors:
            raise InputError(
                f"{where(('constraints', 'vendors', j))}unknown vendor `{v}`"
                f"{did_you_mean(v, vendors)} (vendors: {', '.join(sorted(vendors))})"
            )
    if c.network not in cat.links:
        raise InputError(
            f"{where(('constraints', 'network'))}unknown link `{c.network}`"
            f"{did_you_mean(c.network, cat.links)}"
        )
    if cat.links[c.network].scope == "intra-node":
        between = sorted(k for k, v in cat.links.items() if v.scope != "intra-node")
        raise InputError(
            f"{where(('constraints', 'network'))}`{c.network}` is a link inside one server "
            f"(scope intra-node); the network between hosts must be an inter-node link: "
            f"{', '.join(between)}"
        )
