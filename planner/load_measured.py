"""Load a serving workload's measured figures (`measured:`, and the older `capacity:` and
`profiles:` spellings): a `measured:` that names a measurement table is read relative to the
problem file, and every entry is checked against the catalog and the problem it is to apply to.
A figure that cannot apply is refused with the reason, never left unused."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from planner.catalog import Catalog
from planner.errors import InputError, did_you_mean
from planner.estimator.architecture import block_groups
from planner.estimator.formats import weight_format
from planner.estimator.perf import beats_weight_read, weight_read_seconds
from planner.estimator.profiles import outside_blocks, replica_point
from planner.estimator.support import runtime_for
from planner.schema.files import irregular_kind, not_regular
from planner.schema.measurements import (
    Measurement,
    read_measurements,
    same_engine,
    two_decode_figures,
)
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.yaml_io import Loc, Located

Where = Callable[[Loc], str]
# Whole-replica metrics a problem applies: a single-stage replica's decode step at a batch, the
# prefill of one prompt (planner.estimator.profiles).
APPLIED = ("decode_tokens_per_s", "ms_per_output_token", "prefill_tokens_per_s")


@dataclass(frozen=True)
class WithTables(Located):
    """A problem document whose workloads' `measured:` tables were read in from their files:
    a place inside one of them is named in its own file."""

    tables: dict[int, Located] = field(default_factory=dict)

    def where(self, loc: Loc) -> str:
        i = loc[1] if len(loc) > 2 and loc[0] == "workloads" else None
        if isinstance(i, int) and i in self.tables and loc[2] == "measured" and len(loc) > 3:
            return self.tables[i].where(("measurements", *loc[3:]))
        return super().where(loc)


def read_tables(doc: Located, base: Path | None, confine: bool) -> Located:
    """The problem document with each workload's `measured: FILE` replaced by the file's
    entries (a measurement table, as `planner estimate --measured` reads it; its path relative
    to the problem file). `confine`: the path stays inside `base`."""
    workloads = doc.data.get("workloads") if isinstance(doc.data, dict) else None
    if not isinstance(workloads, list):
        return doc
    named = [
        (i, w["measured"])
        for i, w in enumerate(workloads)
        if isinstance(w, dict) and isinstance(w.get("measured"), str)
    ]
    if not named:
        return doc
    data = copy.deepcopy(doc.data)
    tables: dict[int, Located] = {}
    for i, name in named:
        at = f"{doc.where(('workloads', i, 'measured'))}: workloads[{i}].measured"
        if base is None:
            raise InputError(f"{at}: a measurement file is not accepted here; list the entries")
        path = base / name
        if confine and not _inside(base, name):
            raise InputError(
                f"{at}: the measurement file `{name}` leaves the models folder; give a path "
                "relative to it, or list the entries"
            )
        mode = irregular_kind(path)
        # A confined problem (one sent to a service) sees only its folder: name no more.
        shown, of = (name, "the models folder") if confine else (path, "the problem file")
        if mode is not None:  # refused in the words every file reader uses (schema.files)
            raise InputError(f"{at}: {not_regular(f'`{shown}`', mode)} (a measurement table)")
        if not _is_file(path):
            raise InputError(
                f"{at}: no measurement file at `{shown}` (a path relative to {of}, of a table "
                "with a `measurements:` list, as `planner estimate --measured` reads)"
            )
        table, located = read_measurements(path)  # its errors name the file's own lines
        # The rows as the table reads them (a whole-replica row's kv filled in, as estimate
        # --measured takes it).
        rows = [r.model_dump() for r in table.measurements]
        data["workloads"][i]["measured"] = rows
        tables[i] = located
    return WithTables(data, doc.positions, doc.source, tables)


def _inside(base: Path, name: str) -> bool:
    """Whether `name`, links and `..` resolved, lies inside `base`; an absolute path never does."""
    if "\x00" in name or Path(name).is_absolute() or "\\" in name:
        return False
    try:
        return (base / name).resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a name the system refuses
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def check_devices(problem: Problem, cat: Catalog, where: Where) -> None:
    """Every measured figure names a catalog device."""
    for i, w in enumerate(problem.workloads):
        if not isinstance(w, InferenceWorkload):
            continue
        for (key, j), m in w.measured_entries:
            if m.device not in cat.accelerators:
                raise InputError(
                    f"{where(('workloads', i, key, j, 'device'))}workload `{w.name}`: "
                    f"unknown device `{m.device}`{did_you_mean(m.device, cat.accelerators)}"
                )


def check_measured(
    problem: Problem, cat: Catalog, where: Where, i: int, w: InferenceWorkload, names: set[str]
) -> None:
    """A workload's measured figures are of devices the problem may use (`names`), at degrees
    its stages may take; whole-replica figures of the workload's model and formats, at a known
    batch; times no faster than reading the weights at the device's peak bandwidth allows (by
    half), and decode steps not falling as the batch grows."""
    c = problem.constraints
    heads = cat.models[w.model].num_attention_heads if w.model in cat.models else None
    for (key, j), m in w.measured_entries:
        at: Loc = ("workloads", i, key, j)
        if m.device not in names:
            raise InputError(
                f"{where((*at, 'device'))}workload `{w.name}`: `{m.device}` is not a device "
                "this problem may use (constraints.allowed_devices, excluded_devices, "
                "inventory), so the figure would go unused: drop it or allow the device"
            )
        _check_engine(problem, cat, where, at, w, m)
        if m.metric in ("requests_per_s", "memory_gb"):
            continue
        if m.tp > c.max_tensor_parallel:
            raise InputError(
                f"{where((*at, 'tp'))}workload `{w.name}`: no stage runs at tp {m.tp} under "
                f"constraints.max_tensor_parallel {c.max_tensor_parallel}, so the figure would "
                "go unused: drop it or raise the limit"
            )
        if heads is not None and heads % m.tp:
            raise InputError(
                f"{where((*at, 'tp'))}workload `{w.name}`: a group of {m.tp} does not split "
                f"{w.model}'s {heads} attention heads, so no stage runs at that degree and the "
                "figure would go unused; give the degree it was measured at"
            )
        if m.replica:
            _check_replica(cat, where, at, w, m)
            _check_plannable(problem, cat, where, at, w, m)
    _check_speeds(cat, where, i, w)


def _check_engine(
    problem: Problem, cat: Catalog, where: Where, at: Loc, w: InferenceWorkload, m: Measurement
) -> None:
    """A figure that names its engine is of the engine the workload runs on its device (the
    workload's `engine`, else the first the support matrix and the constraints allow there);
    one measured under another program is refused, as one of another model is. A figure
    that names no engine stands for any."""
    run = runtime_for(cat, cat.accelerator(m.device), w, problem.constraints)
    if run is None or same_engine(m.engine, run.engine):
        return  # no engine runs it: _check_plannable names that for a whole replica
    how = "the workload's `engine`" if w.engine else "the first engine allowed there"
    raise InputError(
        f"{where((*at, 'engine'))}workload `{w.name}`: a {m.metric} figure measured under "
        f"`{m.engine}` cannot stand for this workload, which runs {run.engine} on {m.device} "
        f"({how}): drop the entry, measure {run.engine}, or leave `engine` out of an entry "
        "that holds for any engine"
    )


def _check_replica(
    cat: Catalog, where: Where, at: Loc, w: InferenceWorkload, m: Measurement
) -> None:
    """A whole-replica figure applies to a single-stage replica of the workload's model and
    formats at a known batch; any other is refused with what to do instead."""
    lead = f"workload `{w.name}`: a {m.metric} figure"
    if m.metric not in APPLIED:
        raise InputError(
            f"{where((*at, 'metric'))}{lead} is not used in a problem (of a whole replica: "
            f"{', '.join(APPLIED)}; and the per-block, memory_gb and requests_per_s entries): "
            "use it with `planner estimate --measured`, or drop it"
        )
    said = {"model": w.model, "weights": w.weights}
    if m.kv is not None:
        said["kv"] = w.kv
    for key, want in said.items():
        got = getattr(m, key)
        if got is not None and got != want:
            raise InputError(
                f"{where((*at, key))}{lead} of {key} `{got}` cannot stand for this workload, "
                f"whose {key} is `{want}`: drop the entry, or measure {want}"
            )
    if m.batch is None:
        raise InputError(
            f"{where((*at, 'batch'))}{lead} of a saturated server (batch null) gives no step "
            "time: give the batch it was measured at"
        )
    if m.metric == "prefill_tokens_per_s" and (m.batch != 1 or not m.context):
        key = "batch" if m.batch != 1 else "context"
        raise InputError(
            f"{where((*at, key))}{lead} stands for a prompt's time only at batch 1 with its "
            f"length as `context` (got batch {m.batch}, context {m.context}): give one "
            "prompt's figure, or its time per block as prefill_ms_per_layer"
        )
    point = replica_point(m, w, m.device, m.devices)
    assert point is not None
    kind, x, seconds = point
    acc = cat.accelerator(m.device)
    rest = outside_blocks(w, cat, acc, m.devices, x if kind == "decode" else 1.0, None)
    if seconds <= rest:
        what = f"a step of {seconds * 1e3:.3g} ms at batch {x:,.0f}"
        if kind == "prefill":
            what = f"a prompt of {x:,.0f} tokens in {seconds * 1e3:.3g} ms"
        raise InputError(
            f"{where((*at, 'value'))}{lead}: {what} is no longer than the work outside the "
            f"blocks alone ({rest * 1e3:.3g} ms: the output head and the step overhead on "
            f"{m.devices} {m.device}): check the unit (tokens per second summed over the "
            "batch), the batch and the devices"
        )


def _check_plannable(
    problem: Problem, cat: Catalog, where: Where, at: Loc, w: InferenceWorkload, m: Measurement
) -> None:
    """A whole-replica figure is of a replica the problem can plan: an engine it allows runs
    the workload's formats on the device, and its hosts hold a group of that many devices."""
    # Imported here: the design enumeration is loaded only for problems with such figures.
    from planner.estimator.designs import across_machine_degrees, tp_degrees

    acc = cat.accelerator(m.device)
    run = runtime_for(cat, acc, w, problem.constraints)
    if run is None:
        raise InputError(
            f"{where((*at, 'device'))}workload `{w.name}`: no engine this problem allows runs "
            f"{w.weights} weights with a {w.kv} KV cache on {m.device}, so the figure would go "
            "unused: drop it, or allow an engine that runs them (`planner catalog list engines`)"
        )
    if m.devices == 1 or m.model not in (None, w.model):
        return
    arch = cat.model(w.model)
    degrees = tp_degrees(acc, cat, problem, arch)
    degrees += across_machine_degrees(acc, cat, problem, arch, run.engine)
    if m.devices not in degrees:
        held = ", ".join(map(str, sorted(set(degrees)))) or "none"
        raise InputError(
            f"{where((*at, 'devices'))}workload `{w.name}`: no host this problem allows holds a "
            f"tensor-parallel group of {m.devices} {m.device} (degrees it can plan: {held}), so "
            "the figure would go unused: drop it, or allow a host that holds such a group"
        )


def _check_speeds(cat: Catalog, where: Where, i: int, w: InferenceWorkload) -> None:
    """Times per block (measured, or a whole-replica step spread over the blocks) no faster
    than reading a block's weights at the device's peak bandwidth allows (by half); a decode
    step of more sequences never faster than one of fewer."""
    m = cat.models.get(w.model)
    if m is None:
        return
    # The least a token reads of one block's weights: the smallest block's (an MoE block's
    # active experts), in the workload's format.
    bits = weight_format(w.weights).least_bits
    read = min(g.active_params for g in block_groups(m)) * bits / 8
    decode: dict[tuple[str, int], list[tuple[int, float, Loc]]] = {}
    for (key, j), p in w.measured_entries:
        at: Loc = ("workloads", i, key, j, "ms" if key == "profiles" else "value")
        point = replica_point(p, w, p.device, p.devices)
        block = point[2] / m.num_layers if point is not None else p.ms and p.ms * 1e-3
        if not block:
            continue
        d = cat.accelerators[p.device]
        least = weight_read_seconds(read, p.tp, d.memory.bandwidth_gb_s)
        if beats_weight_read(block, least):
            over = f" over tp {p.tp}" if p.tp > 1 else ""
            what = f"{block * 1e3:.3g} ms per block on {p.device}"
            unit = "ms per block, one transformer layer"
            if point is not None:
                what = f"{point[0]} of {point[2] * 1e3:.3g} ms ({what} over {m.num_layers} blocks)"
                unit = "output tokens per second summed over the batch, the batch, the devices"
            raise InputError(
                f"{where(at)}workload `{w.name}`: {what} is faster than reading the block's "
                f"weights ({least * 1e3:.3g} ms at the device's peak "
                f"{d.memory.bandwidth_gb_s:g} GB/s{over}) allows: check the unit ({unit})"
            )
        if p.metric == "decode_ms_per_layer" or (point and point[0] == "decode"):
            decode.setdefault((p.device, p.tp), []).append((p.batch or 1, block, at))
    for (dev, tp), points in decode.items():
        points.sort(key=lambda x: (x[0], x[1]))
        for (b0, t0, _), (b1, t1, a1) in itertools.pairwise(points):
            if b0 == b1:
                raise InputError(
                    f"{where(a1)}workload `{w.name}`: {two_decode_figures(b1, dev, tp)}"
                )
            if t1 < t0 * 0.95:
                raise InputError(
                    f"{where(a1)}workload `{w.name}`: a decode step of {b1} sequences at "
                    f"{t1 * 1e3:.3g} ms per block is faster than one of {b0} at "
                    f"{t0 * 1e3:.3g} ms: a larger batch never takes less time; check the figures"
                )
