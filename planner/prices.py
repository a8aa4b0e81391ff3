"""Cloud price lists into a user catalog overlay (`planner prices import`).

Two kinds of list are read, each by column name, never by position:

- SkyPilot catalogs (schema v8): a `vms.csv` file, or a folder searched for them (one folder per
  cloud, whose name is the cloud's). Columns used: InstanceType, AcceleratorName,
  AcceleratorCount, Price, SpotPrice, Region, and GpuInfo where a cloud has it (a Python literal,
  `{'Gpus': [{'Name': ..., 'MemoryInfo': {'SizeInMiB': ...}}]}`, read with `ast.literal_eval`).
  Price and SpotPrice are per instance; a device's price is the instance's over its accelerator
  count. GCP lists attachable GPUs as rows of their own (no InstanceType) and their hosts as
  rows without an accelerator: a GPU row's instance is the GPU row plus the host named by
  `gcp_host` (default `n1-standard-8`) in the same region.
- gpuhunt CSVs as `gpuhunt` saves them: provider, instance_name, location, price (per
  instance), gpu_count, gpu_name, gpu_memory (GB), spot (true for a spot offer).

Names go to catalog ids through one explicit table (`NAME_MAP`), by accelerator name and,
where one name covers two memory sizes, the memory the list gives. Rows whose name is not in the
table are counted and reported, never guessed; rows with an empty price are skipped and counted.

The overlay holds, for each device some list rents one at a time, its shipped catalog entry with
the on-demand and spot rent replaced by the lowest such price found, and, for each instance of
several devices, an instances.yaml entry at its whole-instance price (the planner rents those
whole), dated and citing the imported files. Laid over the catalog with `--catalog`, it adds or
replaces those entries.
"""

from __future__ import annotations

import ast
import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planner.catalog import Catalog
from planner.errors import InputError
from planner.schema.files import read_text

# Price-list accelerator name (upper case) -> catalog id, or memory in GiB -> catalog id where one
# name covers two memory sizes (the first entry when the list gives no memory).
NAME_MAP: dict[str, str | dict[int, str]] = {
    "A100": {40: "a100-40gb-sxm", 80: "a100-80gb-sxm"},
    "A100-80GB": "a100-80gb-sxm",
    "A10G": "a10g",
    "B200": "b200",
    "GH200": "gh200",
    "H100": "h100-sxm",
    "H100-MEGA": "h100-sxm",
    "H200": "h200-sxm",
    "L4": "l4",
    "L40S": "l40s",
    "MI300X": "mi300x",
    "P100": "p100",
    "RTX4090": "rtx-4090",
    "RTX6000ADA": "rtx-6000-ada",
    "RTXA6000": "rtx-a6000",
    "T4": "t4",
}
GCP_HOST = "n1-standard-8"
SKYPILOT_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "SpotPrice")
GPUHUNT_COLUMNS = ("provider", "instance_name", "price", "gpu_count", "gpu_name", "spot")


@dataclass(frozen=True)
class Offer:
    """One instance's price per device, as a list gives it."""

    device: str
    source: str  # skypilot or gpuhunt
    cloud: str
    instance: str
    region: str
    spot: bool
    usd_per_device_hour: float
    devices: int = 1  # accelerators in the instance (rented whole)
    vcpus: int | None = None
    memory_gib: float | None = None


@dataclass
class Imported:
    offers: list[Offer] = field(default_factory=list)
    unmapped: Counter[str] = field(default_factory=Counter)  # name -> rows
    empty_prices: int = 0  # prices left empty in the list, skipped
    no_host: int = 0  # GCP GPU rows without the host row in their region
    files: list[str] = field(default_factory=list)


def catalog_id(name: str, memory_gib: float | None) -> str | None:
    """The catalog id of a price list's accelerator name (NAME_MAP), or None."""
    entry = NAME_MAP.get(name.strip().upper().replace(" ", ""))
    if entry is None or isinstance(entry, str):
        return entry
    if memory_gib is None:
        return next(iter(entry.values()))
    return min(entry.items(), key=lambda kv: abs(kv[0] - memory_gib))[1]


def _rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(read_text(path)))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(
            f"{path}: no column {', '.join(missing)} (found: {', '.join(reader.fieldnames or [])}); "
            "is this the right kind of price list?"
        )
    return list(reader)


def _number(text: str | None, path: Path, line: int, column: str) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(
            f"{path}, line {line}, column {column}: `{text}` is not a number"
        ) from None
    return value if value > 0 else None


def _gpu_memory_gib(text: str | None, path: Path, line: int) -> float | None:
    """Memory of one accelerator from a SkyPilot GpuInfo literal, GiB (None when absent)."""
    if not text or not text.strip():
        return None
    try:
        info = ast.literal_eval(text)
        return float(info["Gpus"][0]["MemoryInfo"]["SizeInMiB"]) / 1024
    except (ValueError, SyntaxError, KeyError, IndexError, TypeError):
        raise InputError(f"{path}, line {line}, column GpuInfo: not a GPU description") from None


def skypilot_files(path: Path) -> list[Path]:
    """`path` itself, or every vms.csv under the folder `path`."""
    if path.is_dir():
        found = sorted(path.rglob("vms.csv"))
        if not found:
            raise InputError(f"{path}: no vms.csv in this folder or below")
        return found
    return [path]


def read_skypilot(path: Path, out: Imported, gcp_host: str = GCP_HOST) -> None:
    """Offers from one SkyPilot vms.csv (module docstring); the cloud is its folder's name."""
    cloud = path.parent.name.lower()
    rows = _rows(path, SKYPILOT_COLUMNS)
    out.files.append(str(path))
    hosts: dict[tuple[str, bool], float] = {}  # (region, spot) -> price of the GCP host
    for i, r in enumerate(rows, start=2):
        if not r.get("AcceleratorName") and r["InstanceType"] == gcp_host:
            for spot, col in ((False, "Price"), (True, "SpotPrice")):
                price = _number(r.get(col), path, i, col)
                if price is not None:
                    hosts[(r.get("Region", ""), spot)] = price
    for i, r in enumerate(rows, start=2):
        name = (r.get("AcceleratorName") or "").strip()
        if not name:
            continue
        count = _number(r.get("AcceleratorCount"), path, i, "AcceleratorCount")
        device = catalog_id(name, _gpu_memory_gib(r.get("GpuInfo"), path, i))
        if device is None or count is None:
            out.unmapped[name] += 1
            continue
        region = r.get("Region", "")
        for spot, col in ((False, "Price"), (True, "SpotPrice")):
            price = _number(r.get(col), path, i, col)
            if price is None:
                out.empty_prices += 1
                continue
            instance = r["InstanceType"]
            if not instance:  # a GCP GPU row: its host is priced on its own row
                host = hosts.get((region, spot))
                if host is None:
                    out.no_host += 1
                    continue
                price += host
                instance = f"{gcp_host} + {count:g} x {name}"
            out.offers.append(
                Offer(
                    device,
                    "skypilot",
                    cloud,
                    instance,
                    region,
                    spot,
                    price / count,
                    round(count),
                    _whole(r.get("vCPUs")),
                    _number(r.get("MemoryGiB"), path, i, "MemoryGiB")
                    if r["InstanceType"]
                    else None,
                )
            )


def read_gpuhunt(path: Path, out: Imported) -> None:
    """Offers from a saved gpuhunt CSV (module docstring)."""
    rows = _rows(path, GPUHUNT_COLUMNS)
    out.files.append(str(path))
    for i, r in enumerate(rows, start=2):
        name = (r.get("gpu_name") or "").strip()
        if not name:
            continue
        count = _number(r.get("gpu_count"), path, i, "gpu_count")
        device = catalog_id(name, _number(r.get("gpu_memory"), path, i, "gpu_memory"))
        if device is None or count is None:
            out.unmapped[name] += 1
            continue
        price = _number(r.get("price"), path, i, "price")
        if price is None:
            out.empty_prices += 1
            continue
        spot = (r.get("spot") or "").strip().lower() in ("true", "1", "yes")
        out.offers.append(
            Offer(
                device,
                "gpuhunt",
                r["provider"],
                r["instance_name"],
                r.get("location", ""),
                spot,
                price / count,
                round(count),
                _whole(r.get("cpu")),
                _number(r.get("memory"), path, i, "memory"),
            )
        )


def _whole(text: str | None) -> int | None:
    """A vCPU count as a list gives it, None where it is empty or not a whole number."""
    try:
        return int(float(text)) if text and float(text) >= 1 else None
    except ValueError:
        return None


def cheapest(offers: list[Offer]) -> dict[tuple[str, bool], Offer]:
    """The lowest price per device of each (device, spot) among `offers`."""
    best: dict[tuple[str, bool], Offer] = {}
    for o in sorted(offers, key=lambda o: (o.usd_per_device_hour, o.cloud, o.instance, o.region)):
        best.setdefault((o.device, o.spot), o)
    return best


def overlay_document(cat: Catalog, imported: Imported, date: str) -> dict[str, Any]:
    """The overlay's files, by name. accelerators.yaml: each device rented one at a time
    somewhere, its catalog entry with the on-demand and spot rent replaced by the lowest such
    price. instances.yaml: each instance of several devices (rented whole), at the region of its
    lowest on-demand price (else its lowest spot price). Dated and citing the imported files."""
    ref = f"price-import-{date}"
    references = {
        ref: {
            "title": "Cloud prices imported by `planner prices import`",
            "date": date,
            "note": "Lowest prices found in: " + ", ".join(imported.files),
        }
    }
    best = cheapest([o for o in imported.offers if o.devices == 1])
    entries = []
    for dev in sorted({d for d, _ in best}):
        entry = cat.accelerator(dev).model_dump(mode="json", exclude_none=True)
        price = dict(entry.get("price", {}))
        sources = dict(entry.get("sources", {}))
        for spot, key in ((False, "rent"), (True, "spot")):
            offer = best.get((dev, spot))
            if offer is not None:
                price[f"{key}_usd_per_hour"] = round(offer.usd_per_device_hour, 6)
                price[f"{key}_date"] = date
                sources[f"price.{key}"] = ref
        entry["price"] = price
        entry["sources"] = sources
        entries.append(entry)
    out: dict[str, Any] = {"accelerators.yaml": {"references": references, "accelerators": entries}}
    instances = _instances(imported, date, ref)
    if instances:
        out["instances.yaml"] = {"references": references, "instances": instances}
    return out


def _instances(imported: Imported, date: str, ref: str) -> list[dict[str, Any]]:
    """Instance entries (schema `Instance`) for the offers of several devices."""
    groups: dict[tuple[str, str, str], list[Offer]] = {}
    for o in imported.offers:
        if o.devices > 1:
            groups.setdefault((o.cloud, o.instance, o.device), []).append(o)
    out = []
    for (cloud, instance, device), offers in sorted(groups.items()):
        ranked = sorted(offers, key=lambda o: (o.spot, o.usd_per_device_hour, o.region))
        region = ranked[0].region
        here = [o for o in ranked if o.region == region]
        entry: dict[str, Any] = {
            "id": _slug(f"{cloud}-{instance}"),
            "provider": _slug(cloud),
            "name": instance,
            "device": device,
            "devices": ranked[0].devices,
        }
        if ranked[0].vcpus:
            entry["vcpus"] = ranked[0].vcpus
        if ranked[0].memory_gib:
            entry["memory_gib"] = ranked[0].memory_gib
        entry["region"] = region or "unknown"
        for spot, key in ((False, "on_demand_usd_per_hour"), (True, "spot_usd_per_hour")):
            match = [o for o in here if o.spot == spot]
            if match:
                entry[key] = round(match[0].usd_per_device_hour * match[0].devices, 6)
        entry["date"] = date
        entry["sources"] = {"spec": ref}
        out.append(entry)
    return out


def _slug(text: str) -> str:
    """A catalog id from a provider's name: lower case, runs of other characters as `-`."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "instance"


def write_overlay(folder: Path, documents: dict[str, dict[str, Any]]) -> list[Path]:
    """Write each document as `folder`/its file name, keeping the entries of a file already
    there (entries of the same id are replaced)."""
    from planner.schema.files import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in documents.items():
        path = folder / name
        kind = next(k for k in document if k != "references")
        if path.exists():
            old = yaml.safe_load(read_text(path)) or {}
            ids = {e["id"] for e in document[kind]}
            kept = [e for e in old.get(kind, []) if e.get("id") not in ids]
            document = {
                "references": {**old.get("references", {}), **document["references"]},
                kind: kept + document[kind],
            }
        write_atomic(path, yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
        written.append(path)
    return written
