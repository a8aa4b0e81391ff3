"""Rows for `planner catalog list regions|instances|formats|kv-formats|engines|architectures|support`: the
names a problem file may use beyond devices, models, nodes and links, each with its unit and
source, and the software support matrix."""

from __future__ import annotations

from typing import Any

from planner.catalog import Catalog
from planner.estimator.formats import KV_BYTES, WEIGHT_FORMATS

_INSTANCE_FIELDS = (
    "id",
    "provider",
    "name",
    "device",
    "devices",
    "vcpus",
    "memory_gib",
    "region",
    "on_demand_usd_per_hour",
    "reserved_usd_per_hour",
    "spot_usd_per_hour",
    "date",
)
KINDS = ("regions", "instances", "formats", "kv-formats", "engines", "architectures", "support")


def list_rows(cat: Catalog, kind: str) -> list[dict[str, Any]]:
    """One plain dict per entry, units in the keys; `kind` is one of KINDS."""
    if kind == "regions":
        return [
            {
                "id": r.id,
                "name": r.name,
                "grid_gco2e_per_kwh": r.grid_gco2e_per_kwh,
                "year": str(r.year),  # a label, not a quantity
                "electricity_usd_per_kwh": r.electricity_usd_per_kwh,
                "source": ", ".join(sorted(set(r.sources.values()))),
            }
            for r in cat.regions.values()
        ]
    if kind == "instances":
        # The instance's own fields, prices per instance-hour, then its sources.
        return [
            {
                **{key: getattr(i, key) for key in _INSTANCE_FIELDS},
                "source": ", ".join(sorted(set(i.sources.values()))),
            }
            for i in cat.instances.values()
        ]
    if kind == "formats":
        return [
            {
                "id": f.id,
                "bits_per_weight": round(f.bits_per_weight, 3),
                "embedding_bits": round(f.embedding_bits, 3),
                "computes_in": ", ".join(
                    f"{c} (datacenter parts with FP4 tensor cores)"
                    if f.block_scaled and c == "fp8"
                    else c
                    for c in f.compute
                ),
                "weight_only": "yes" if f.weight_only else "no",
                "source": f.source,
            }
            for f in WEIGHT_FORMATS.values()
        ]
    if kind == "kv-formats":
        # Element sizes from planner/estimator/formats.py (llama.cpp block layouts for q8_0, q4_0).
        return [{"id": k, "bytes_per_value": round(b, 4)} for k, b in KV_BYTES.items()]
    if kind in ("engines", "architectures", "support"):
        return _support_rows(cat, kind)
    raise ValueError(f"unknown list kind {kind!r}")


def _support_rows(cat: Catalog, kind: str) -> list[dict[str, Any]]:
    if kind == "engines":
        return [
            {
                "id": e.id,
                "name": e.name,
                "rank": e.rank,
                "tensor_parallel": "yes" if e.tensor_parallel else "no",
                "pipeline_parallel": "yes" if e.pipeline_parallel else "no",
                "cross_stack_pipeline": "yes" if e.cross_stack_pipeline else "no",
                "source": e.sources["spec"],
            }
            for e in sorted(cat.engines.values(), key=lambda e: (e.rank, e.id))
        ]
    if kind == "architectures":
        devices: dict[str, list[str]] = {}
        for d in cat.accelerators.values():
            devices.setdefault(d.architecture, []).append(d.id)
        return [
            {
                "id": a.id,
                "vendor": a.vendor,
                "family": a.family,
                "generation": a.generation,
                "released": a.released,
                "end_of_life": a.end_of_life or "",
                "devices": ", ".join(devices.get(a.id, [])),
            }
            for a in cat.architectures.values()
        ]
    return [
        {
            "engine": r.engine,
            "backend": r.backend,
            "architectures": ", ".join(r.architectures),
            "weights": ", ".join(r.weights),
            "kv": ", ".join(r.kv),
            "experimental": "yes" if r.experimental else "",
            "source": r.source,
            "date": r.date,
        }
        for r in cat.support
    ]
