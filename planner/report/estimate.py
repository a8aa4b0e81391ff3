"""Render catalog entries and estimates as tables (rich) or plain data (for JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from planner.catalog import Catalog
from planner.estimator.architecture import active_params, total_params
from planner.schema.catalog import ModelArch

if TYPE_CHECKING:  # a plan's table uses this module's formatting, not the estimator
    from planner.estimator.estimate import Estimate


def gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f}"


def _num(v: float | None, fmt: str = ",.1f") -> str:
    return "-" if v is None else format(v, fmt)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms"


# ------------------------------------------------------------------------------------------------
# Catalog
# ------------------------------------------------------------------------------------------------


def catalog_rows(cat: Catalog, kind: str) -> list[dict[str, Any]]:
    """One plain dict per entry, with units in the keys."""
    if kind == "devices":
        return [
            {
                "id": a.id,
                "name": a.name,
                "class": a.device_class,
                "memory_gb": round(a.memory.bytes / 1e9, 1),
                "bandwidth_gb_s": a.memory.bandwidth_gb_s,
                "bf16_tflops_dense": a.dense_tflops.bf16 or a.dense_tflops.fp16,
                "fp8_tflops_dense": a.dense_tflops.fp8,
                "tdp_w": a.power.tdp_w,
                "purchase_usd": a.price.purchase_usd,
                "condition": a.price.condition if a.price.purchase_usd else None,
                "rent_usd_per_hour": a.price.rent_usd_per_hour,
            }
            for a in cat.accelerators.values()
        ]
    if kind == "models":
        return [
            {
                "id": m.id,
                "name": m.name,
                "layers": m.num_layers,
                "hidden": m.hidden_size,
                "attention": _attention_kind(m),
                "moe": f"{m.moe.experts_per_token}/{m.moe.num_experts}" if m.moe else "-",
                "params_b": round(total_params(m) / 1e9, 2),
                "active_params_b": round(active_params(m) / 1e9, 2),
                "max_context": m.max_context,
            }
            for m in cat.models.values()
        ]
    if kind == "nodes":
        return [
            {
                "id": n.id,
                "name": n.name,
                "kind": n.kind,
                "slots": n.slots,
                "link": n.intra_node_link,
                "price_usd": n.price_usd,
                "overhead_w": n.power_overhead_w,
                "rack_units": n.rack_units,
            }
            for n in cat.nodes.values()
        ]
    return [
        {
            "id": lk.id,
            "name": lk.name,
            "kind": lk.kind,
            "scope": lk.scope,
            "bandwidth_gb_s": lk.bandwidth_gb_s,
            "latency_us": lk.latency_us,
        }
        for lk in cat.links.values()
    ]


def table_of(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    if not rows:
        return t
    for key, value in rows[0].items():
        t.add_column(key, justify="right" if isinstance(value, (int, float)) else "left")
    for r in rows:
        t.add_row(
            *(
                "-" if v is None else (f"{v:,}" if isinstance(v, (int, float)) else str(v))
                for v in r.values()
            )
        )
    return t


def entry_table(data: dict[str, Any], title: str) -> Table:
    """Key/value table of one catalog entry, nested sections flattened with dots."""
    t = Table(title=title, title_justify="left", show_header=False)
    t.add_column("field")
    t.add_column("value")

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif value is not None:
            t.add_row(prefix, str(value))

    walk("", data)
    return t


# ------------------------------------------------------------------------------------------------
# Estimates
# ------------------------------------------------------------------------------------------------


def estimate_dict(e: Estimate) -> dict[str, Any]:
    return {
        "model": e.model,
        "device": e.device,
        "task": e.task,
        "memory_bytes": e.memory.as_dict(),
        "usable_bytes": e.usable_bytes,
        "fits_one_device": e.fits,
        "shortfall_bytes": e.shortfall_bytes,
        "devices_needed": e.devices_needed,
        "parallelism": e.parallelism,
        "bound": e.bound,
        "tokens_per_s": e.tokens_per_s,
        "ms_per_token": e.ms_per_token,
        "prefill_s": e.prefill_s,
        "step_s": e.step_s,
        "token_budget_s": e.budget_s,
        "power_w": e.power_w,
        "tokens_per_joule": e.tokens_per_joule,
        "usd_per_million_tokens_bought": e.usd_per_mtok_bought,
        "usd_per_million_tokens_rented": e.usd_per_mtok_rented,
        "measured": e.measured,
        **({"engine": e.engine} if e.engine else {}),
        **({"memory_per_device_of_ranks": e.memory_ranks} if e.memory_ranks > 1 else {}),
        **({"does_not_fit_because": e.no_fit_reason} if e.no_fit_reason else {}),
    }


def _verdict(e: Estimate) -> str:
    """The memory table's caption: whether the model fits, and on how many devices."""
    short = gb(e.shortfall_bytes)
    if e.memory_ranks > 1:  # training at the --dp given: `memory` is per device of the ranks
        if e.fits:
            return f"fits: each of the {e.memory_ranks:,} data-parallel ranks holds this"
        return f"does NOT fit: short by {short} GB on each of the {e.memory_ranks:,} ranks"
    if e.fits:
        return "fits on one device"
    if e.devices_needed:
        return f"does NOT fit one device: short by {short} GB; needs {e.devices_needed:,} devices"
    return f"does NOT fit: short by {short} GB on one device, and no layout tried holds it"


def estimate_tables(e: Estimate) -> list[RenderableType]:
    """Memory breakdown and performance of one estimate; when nothing holds the model, why
    and what it would take instead of performance figures of a layout there is not."""
    mem = Table(title=f"{e.model} on {e.device} ({e.task})", title_justify="left", min_width=44)
    mem.add_column("memory per device")
    mem.add_column("GB", justify="right")
    for part, nbytes in e.memory.as_dict().items():
        if part != "total" and (nbytes or e.task != "inference"):
            mem.add_row(part.replace("_", " "), gb(nbytes))
    mem.add_row("total", gb(e.memory.total), style="bold")
    mem.add_row("usable on one device", gb(e.usable_bytes))
    mem.caption = _verdict(e)
    if not e.devices_needed:
        return [mem, Text(f"no performance figures: {e.no_fit_reason or 'nothing holds it'}")]

    perf = Table(title="performance", title_justify="left", show_header=False, min_width=44)
    perf.add_column("figure")
    perf.add_column("value", justify="right")
    perf.add_row("devices", f"{e.devices_needed:,} ({e.parallelism})")
    if e.task == "inference":
        if e.engine:
            perf.add_row("serving engine", e.engine)
        perf.add_row(
            "decode throughput",
            f"{_num(e.tokens_per_s)} tokens/s" + (" (measured)" if e.measured else ""),
        )
        perf.add_row("time per output token", f"{_num(e.ms_per_token, ',.2f')} ms")
        perf.add_row("time to first token", duration(e.prefill_s))
        perf.add_row("decode is", f"{e.bound}-bound")
    else:
        perf.add_row("training throughput", f"{_num(e.tokens_per_s, ',.0f')} tokens/s")
        if e.bound == "routing":
            perf.add_row("training is", "bound by routing tokens to experts, not by FLOPs")
        perf.add_row("step time", duration(e.step_s))
        if e.budget_s is not None:
            perf.add_row("time for the token budget", duration(e.budget_s))
    perf.add_row("power", f"{_num(e.power_w, ',.0f')} W")
    perf.add_row("tokens per joule", _num(e.tokens_per_joule, ",.3f"))
    perf.add_row(
        "cost, bought",
        "-" if e.usd_per_mtok_bought is None else f"${e.usd_per_mtok_bought:,.3f} per M tokens",
    )
    perf.add_row(
        "cost, rented",
        "-" if e.usd_per_mtok_rented is None else f"${e.usd_per_mtok_rented:,.3f} per M tokens",
    )
    return [mem, perf]


def estimates_table(rows: list[Estimate]) -> Table:
    """One line per device (for --device all)."""
    t = Table(title=f"{rows[0].model}: {rows[0].task} on every device", title_justify="left")
    engines = any(e.engine for e in rows)
    for col in (
        "device",
        *(("engine",) if engines else ()),
        "GB needed",
        "fits",
        "devices",
        "tokens/s",
        "ms/token",
        "W",
        "tokens/J",
        "$/M bought",
        "$/M rented",
    ):
        t.add_column(col, justify="left" if col in ("device", "engine") else "right")
    for e in rows:
        t.add_row(
            e.device,
            *((e.engine,) if engines else ()),
            gb(e.memory.total),
            "yes" if e.fits else "no",
            str(e.devices_needed or "-"),
            _num(e.tokens_per_s if e.devices_needed else None),
            _num(e.ms_per_token, ",.2f"),
            _num(e.power_w, ",.0f"),
            _num(e.tokens_per_joule, ",.3f"),
            _num(e.usd_per_mtok_bought, ",.3f"),
            _num(e.usd_per_mtok_rented, ",.3f"),
        )
    return t


def _attention_kind(m: ModelArch) -> str:
    """MLA, GQA or MHA; a hybrid's linear-attention layers as `+ n linear` (GQA + 30 linear)."""
    kind = "MLA" if m.mla else ("GQA" if m.num_key_value_heads < m.num_attention_heads else "MHA")
    la = m.linear_attention
    return f"{kind} + {la.layers} linear" if la else kind
