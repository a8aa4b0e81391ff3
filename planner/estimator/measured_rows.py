"""`estimate --measured`: a table's decode figures held to the speed floor problem files are
held to (perf.beats_weight_read), and each row the estimate did not use named with why."""

from __future__ import annotations

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.architecture import block_groups
from planner.estimator.estimate import Estimate, InferenceQuery
from planner.estimator.formats import WeightFormat, weight_format
from planner.estimator.perf import beats_weight_read, weight_read_seconds
from planner.schema.catalog import ModelArch
from planner.schema.measurements import (
    Measurement,
    MeasurementFile,
    same_engine,
    two_decode_figures,
)
from planner.schema.yaml_io import Located


def check_speeds(table: MeasurementFile, doc: Located, m: ModelArch, cat: Catalog) -> None:
    """Refuse a decode figure of `m` faster than reading its blocks' active weights once per
    step at the device's peak bandwidth allows (split over the row's devices; the embedding
    and the head left out, so the floor is generous)."""
    blocks = sum(g.count * g.active_params for g in block_groups(m))
    for j, r in enumerate(table.measurements):
        acc = cat.accelerators.get(r.device)
        fmt = _known_format(r.weights)
        if r.model != m.id or r.metric != "decode_tokens_per_s" or not (acc and fmt and r.batch):
            continue
        read = blocks * fmt.least_bits / 8
        bandwidth = acc.memory.bandwidth_gb_s
        least = weight_read_seconds(read, r.devices, bandwidth)
        step = r.batch / r.value
        if beats_weight_read(step, least):
            over = f" over {r.devices} devices" if r.devices > 1 else ""
            raise InputError(
                f"{doc.where(('measurements', j, 'value'))}: measurements[{j}].value: "
                f"{r.value:,.4g} decode tokens/s of {m.id} on {r.device} at batch {r.batch:,} "
                f"is a step of {step * 1e3:.3g} ms, faster than reading its active weights "
                f"({read / 1e9:,.3g} GB in {r.weights}: {least * 1e3:.3g} ms at the device's "
                f"peak {bandwidth:g} GB/s{over}) allows, by half ({r.batch / least * 2:,.0f} "
                "tokens/s at most): check the unit (output tokens per second summed over the "
                "batch), the batch and the device count"
            )


def _known_format(name: str | None) -> WeightFormat | None:
    """The weight format `name` names (a catalog format or a file mixed per tensor class,
    formats.mixed_format), or None for none or an unknown name (left to the row's own checks)."""
    if not name:
        return None
    try:
        return weight_format(name)
    except InputError:
        return None


def check_points(table: MeasurementFile, doc: Located, m: ModelArch, q: InferenceQuery) -> None:
    """Refuse two decode_tokens_per_s rows at a point the estimate looks up (model `m`, its
    weights, KV format and batch, on one device and device count, under engines that both could
    be; at any context, which the estimate does not match): which one stood for it would be
    arbitrary, and a problem's `measured:` refuses them likewise."""
    want = (m.id, q.weights, q.kv, "decode_tokens_per_s", q.batch)
    seen: dict[tuple[str, int], list[Measurement]] = {}
    for j, r in enumerate(table.measurements):
        if (r.model, r.weights, r.kv, r.metric, r.batch) != want:
            continue
        point = seen.setdefault((r.device, r.devices), [])
        if any(same_engine(o.engine, r.engine) for o in point):
            raise InputError(
                f"{doc.where(('measurements', j))}: measurements[{j}]: "
                f"{two_decode_figures(r.batch, r.device, r.devices)}"
            )
        point.append(r)


def unused_notes(
    table: MeasurementFile,
    doc: Located,
    m: ModelArch,
    rows: list[Estimate],
    q: InferenceQuery,
    cat: Catalog,
) -> list[str]:
    """One note per row no estimate of `rows` used, saying why."""
    used = {e.measured_row for e in rows}
    by_device = {e.device: e for e in rows}
    return [
        f"{doc.where(('measurements', j))}: measurements[{j}] not used: "
        + _why_unused(r, m, by_device.get(r.device), q, cat)
        for j, r in enumerate(table.measurements)
        if j not in used
    ]


def _why_unused(
    r: Measurement, m: ModelArch, e: Estimate | None, q: InferenceQuery, cat: Catalog
) -> str:
    """The first way row `r` differs from the estimate of its device, `e`."""
    if not r.replica:
        return (
            f"metric `{r.metric}` is a serving workload's figure (a problem file's "
            "`measured:` applies it); estimate replaces only decode_tokens_per_s"
        )
    if r.model != m.id:
        if r.model not in cat.models:
            return f"model `{r.model}` is not in the catalog (`planner catalog list models`)"
        return f"it measures {r.model}; this estimate is of {m.id}"
    if r.device not in cat.accelerators:
        return f"device `{r.device}` is not in the catalog (`planner catalog list devices`)"
    if e is None:
        return f"this estimate does not cover {r.device} (--device, or the formats' support)"
    if r.metric != "decode_tokens_per_s":
        return (
            f"metric `{r.metric}`: estimate replaces only decode_tokens_per_s (decode "
            "throughput); its other figures are estimated"
        )
    for key, given, option in (("weights", q.weights, "--weights"), ("kv", q.kv, "--kv")):
        if getattr(r, key) != given:
            return f"{key} `{getattr(r, key)}`; this estimate is of {given} ({option})"
    if not same_engine(r.engine, e.engine):
        return f"engine `{r.engine}`; this estimate is of {e.engine} (--engine)"
    if r.batch != q.batch:
        at = "null (a saturated server)" if r.batch is None else f"{r.batch:,}"
        return f"batch {at}; this estimate is at --batch {q.batch:,}"
    if not e.devices_needed:
        return f"the estimate finds no layout of {r.device} that holds the model"
    if r.devices != e.devices_needed:
        return (
            f"measured on {r.devices:,} {r.device}; this estimate lays the model out on "
            f"{e.devices_needed:,} ({e.parallelism}; --tp sets the degree)"
        )
    return "another row at this point is used"
