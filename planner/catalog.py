"""Load the catalog (accelerators, nodes, links, models, grid regions) once, validated and cross-checked.

`load_catalog()` is cached: the same directory gives the same frozen Catalog object. Without a
directory it gives the shipped catalog with the user's overlays (`--catalog DIR`, or the
`PLANNER_CATALOG` environment variable, folders separated by the path separator) laid over it,
and the models problem files named by their config.json.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from planner.errors import CatalogError, did_you_mean
from planner.schema.catalog import (
    Accelerator,
    AcceleratorFile,
    Instance,
    InstanceFile,
    Link,
    LinkFile,
    ModelArch,
    ModelFile,
    Node,
    NodeFile,
    Reference,
    Region,
    RegionFile,
    Sourced,
)
from planner.schema.model_params import total_params
from planner.schema.support import Architecture, Engine, SupportFile, SupportRow
from planner.schema.yaml_io import read_validated, read_yaml, validate

T = TypeVar("T", bound=Sourced)
F = TypeVar("F", bound=BaseModel)

FILES = {
    "accelerators": "accelerators.yaml",
    "nodes": "nodes.yaml",
    "links": "links.yaml",
    "models": "models.yaml",
    "regions": "regions.yaml",
    "support": "support.yaml",
    "instances": "instances.yaml",
}


@dataclass(frozen=True)
class Catalog:
    """Everything the planner knows about hardware and models, keyed by id."""

    accelerators: Mapping[str, Accelerator]
    nodes: Mapping[str, Node]
    links: Mapping[str, Link]
    models: Mapping[str, ModelArch]
    references: Mapping[str, Reference]
    regions: Mapping[str, Region] = field(default_factory=dict)
    overlays: tuple[str, ...] = ()  # user catalog folders laid over the shipped one, in order
    architectures: Mapping[str, Architecture] = field(default_factory=dict)
    engines: Mapping[str, Engine] = field(default_factory=dict)
    support: tuple[SupportRow, ...] = ()  # the software support matrix (support.yaml)
    instances: Mapping[str, Instance] = field(default_factory=dict)  # cloud instances, by id
    # nodes_for's answers by the device fields it reads (each catalog object its own: `replace`
    # makes a new, empty one).
    _hosts_of: dict[tuple[str, str, str], list[Node]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def accelerator(self, name: str) -> Accelerator:
        return _lookup(self.accelerators, name, "device")

    def node(self, name: str) -> Node:
        return _lookup(self.nodes, name, "node")

    def link(self, name: str) -> Link:
        return _lookup(self.links, name, "link")

    def model(self, name: str) -> ModelArch:
        return _lookup(self.models, name, "model")

    def region(self, name: str) -> Region:
        return _lookup(self.regions, name, "region")

    def engine(self, name: str) -> Engine:
        return _lookup(self.engines, name, "engine")

    def instances_of(self, device: str) -> list[Instance]:
        """The cloud instances that rent `device`, by id."""
        return [i for _, i in sorted(self.instances.items()) if i.device == device]

    def architecture_of(self, device: Accelerator) -> Architecture:
        """The device's architecture record: vendor family, generation, end of life."""
        return _lookup(self.architectures, device.architecture, "architecture")

    def nodes_for(self, device: Accelerator) -> list[Node]:
        """Nodes that can host `device`, cheapest per slot first."""
        key = (device.id, device.form_factor, device.device_class)
        hit = self._hosts_of.get(key)
        if hit is None:
            hit = self._hosts_of[key] = self._nodes_for(device)
        return list(hit)

    def _nodes_for(self, device: Accelerator) -> list[Node]:
        fits = [
            n
            for n in self.nodes.values()
            if (
                device.id in n.accepts_devices
                or (not n.accepts_devices and device.form_factor in n.accepts_form_factors)
            )
            and (not n.accepts_device_classes or device.device_class in n.accepts_device_classes)
        ]
        return sorted(fits, key=lambda n: (n.price_usd / n.slots, -n.slots, n.id))

    def host_for(self, device: Accelerator) -> Node | None:
        """The node the planner buys for `device`. Datacenter parts and ASICs go in their largest
        host (up to 8 slots, so tensor-parallel groups fit in one node); consumer, workstation
        and unified-memory devices in the host cheapest per slot (a desktop, a Mac as itself)."""
        fits = self.nodes_for(device)
        if not fits:
            return None
        if device.device_class in ("consumer", "workstation", "unified-memory"):
            return fits[0]
        want = min(8, max(n.slots for n in fits))
        return min(
            (n for n in fits if n.slots >= want),
            key=lambda n: (n.price_usd / n.slots, n.slots, n.id),
        )


def _lookup(table: Mapping[str, T], name: str, what: str) -> T:
    try:
        return table[name]
    except KeyError:
        hint = did_you_mean(name, table)
        raise CatalogError(
            f"unknown {what} `{name}`{hint or ''}"
            + ("" if hint else f" (see `planner catalog list {what}s`)")
        ) from None


def default_catalog_dir() -> Path:
    """The catalog shipped inside the package."""
    return Path(str(resources.files("planner.catalog_data")))


ENV_VAR = "PLANNER_CATALOG"
_overlays: list[Path] = []  # set by `use_overlays` (the CLI's --catalog)
_file_models: dict[str, ModelArch] = {}  # models problem files name by config.json, by key
_active: dict[tuple[tuple[Path, ...], tuple[tuple[str, int], ...]], Catalog] = {}


def use_overlays(dirs: list[Path]) -> None:
    """Lay these user catalog folders over the shipped catalog (after any in PLANNER_CATALOG)."""
    _overlays[:] = dirs


def file_model_keys() -> frozenset[str]:
    """Keys of the models problem files named by config.json (not catalog entries)."""
    return frozenset(_file_models)


def add_file_model(key: str, model: ModelArch) -> None:
    """Make a model read from a config.json known to `load_catalog()` under `key`."""
    _file_models[key] = model.model_copy(update={"id": key})


_use_env = [True]  # False in a worker that was handed its overlays (catalog_state)


def overlay_dirs() -> list[Path]:
    env = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    return [*(env if _use_env[0] else []), *_overlays]


def catalog_state() -> dict[str, Any]:
    """The user's part of the catalog as plain data (overlay folders as absolute paths, models
    read from config.json files), for a worker process to rebuild the same catalog."""
    return {
        "overlays": [str(d.resolve()) for d in overlay_dirs()],
        "models": {k: m.model_dump(mode="json") for k, m in sorted(_file_models.items())},
    }


def use_catalog_state(state: Mapping[str, Any]) -> None:
    """Make `load_catalog()` of this process the catalog `catalog_state()` described (the
    environment variable is then not read: the overlays named are all there are)."""
    _use_env[0] = False
    _overlays[:] = [Path(d) for d in state["overlays"]]
    # A file model's id is the path the problem wrote, which no catalog id may be: validate
    # the figures under a stand-in id, then give it its key back (as add_file_model does).
    models = {
        k: ModelArch.model_validate({**v, "id": "file-model"}).model_copy(update={"id": k})
        for k, v in state["models"].items()
    }
    if models != _file_models:  # a model object replaced makes a new cached catalog
        _file_models.clear()
        _file_models.update(models)


def load_catalog(directory: Path | None = None) -> Catalog:
    """The catalog in `directory`; by default the shipped one with the user's overlays and
    file-named models."""
    if directory is not None:
        return _load_dir(directory)
    dirs = tuple(overlay_dirs())
    # A copy (made in one step): a server's other threads may add file models meanwhile.
    file_models = dict(_file_models)
    key = (dirs, tuple(sorted((k, id(m)) for k, m in file_models.items())))
    if key not in _active:
        cat = _load_dir(None)
        for d in dirs:
            cat = _overlay(cat, d)
        if file_models:
            cat = replace(cat, models={**cat.models, **file_models})
        _active[key] = cat
    return _active[key]


def _overlay(base: Catalog, root: Path) -> Catalog:
    """Entries in `root`'s catalog files (any of them, same layout and schema as the shipped
    ones) add to or replace the base catalog's entries of the same id; then all is cross-checked."""
    if not root.is_dir():
        raise CatalogError(
            f"{root}: catalog overlay is not a folder (set --catalog or {ENV_VAR} to a folder "
            f"holding any of {', '.join(FILES.values())})"
        )
    present = [k for k in FILES if (root / FILES[k]).is_file()]
    if not present:
        raise CatalogError(f"{root}: catalog overlay holds none of {', '.join(FILES.values())}")
    schemas: dict[str, Any] = {
        "accelerators": AcceleratorFile,
        "nodes": NodeFile,
        "links": LinkFile,
        "models": ModelFile,
        "regions": RegionFile,
        "instances": InstanceFile,
    }
    tables: dict[str, dict[str, Any]] = {
        "accelerators": dict(base.accelerators),
        "nodes": dict(base.nodes),
        "links": dict(base.links),
        "models": dict(base.models),
        "regions": dict(base.regions),
        "architectures": dict(base.architectures),
        "engines": dict(base.engines),
        "instances": dict(base.instances),
    }
    refs = dict(base.references)
    rows = list(base.support)
    for kind in present:
        path = root / FILES[kind]
        doc = read_yaml(path)
        if isinstance(doc.data, dict):  # an overlay may cite only the shipped references
            doc.data.setdefault("references", {})
            if kind == "support":  # and may add rows without new architectures or engines
                for key in ("architectures", "engines", "support"):
                    doc.data.setdefault(key, [])
        if kind == "support":
            sup = validate(doc, SupportFile)
            refs.update(sup.references)
            tables["architectures"].update(_by_id(sup.architectures, path))
            tables["engines"].update(_by_id(sup.engines, path))
            rows += sup.support  # rows add to the shipped matrix
            continue
        parsed = validate(doc, schemas[kind])
        refs.update(parsed.references)
        tables[kind].update(_by_id(getattr(parsed, kind), path))
    cat = Catalog(
        references=refs, overlays=(*base.overlays, str(root)), support=tuple(rows), **tables
    )
    _cross_check(cat, root)
    return cat


@functools.cache
def _load_dir(directory: Path | None = None) -> Catalog:
    """Read, validate and cross-check the catalog files in `directory`."""
    root = directory or default_catalog_dir()
    refs: dict[str, Reference] = {}

    def merge_refs(new: Mapping[str, Reference], src: Path) -> None:
        for key, ref in new.items():
            if key in refs and refs[key] != ref:
                raise CatalogError(
                    f"{src}: reference `{key}` is defined differently in another file"
                )
            refs[key] = ref

    acc_path, node_path, link_path, model_path, region_path, support_path, inst_path = (
        root / FILES[k] for k in FILES
    )
    acc = _validated(acc_path, AcceleratorFile)
    merge_refs(acc.references, acc_path)
    nod = _validated(node_path, NodeFile)
    merge_refs(nod.references, node_path)
    lnk = _validated(link_path, LinkFile)
    merge_refs(lnk.references, link_path)
    mdl = _validated(model_path, ModelFile)
    merge_refs(mdl.references, model_path)
    reg = _validated(region_path, RegionFile)
    merge_refs(reg.references, region_path)
    sup = _validated(support_path, SupportFile)
    merge_refs(sup.references, support_path)
    # Cloud instances are optional: a catalog folder without them rents devices one at a time.
    instances: dict[str, Instance] = {}
    if inst_path.is_file():
        ins = _validated(inst_path, InstanceFile)
        merge_refs(ins.references, inst_path)
        instances = _by_id(ins.instances, inst_path)

    cat = Catalog(
        accelerators=_by_id(acc.accelerators, acc_path),
        nodes=_by_id(nod.nodes, node_path),
        links=_by_id(lnk.links, link_path),
        models=_by_id(mdl.models, model_path),
        references=refs,
        regions=_by_id(reg.regions, region_path),
        architectures=_by_id(sup.architectures, support_path),
        engines=_by_id(sup.engines, support_path),
        support=tuple(sup.support),
        instances=instances,
    )
    _cross_check(cat, root)
    return cat


def _validated(path: Path, schema: type[F]) -> F:
    """One catalog file parsed (with libyaml), validated, and cached by content."""
    return read_validated(path, schema)


def _by_id(items: list[T], src: Path) -> dict[str, T]:
    out: dict[str, T] = {}
    for item in items:
        key = item.id  # type: ignore[attr-defined]
        if key in out:
            raise CatalogError(f"{src}: id `{key}` appears twice")
        out[key] = item
    return out


def _cross_check(cat: Catalog, root: Path) -> None:
    """Every source names a known reference; every link and device named exists."""
    for kind, table in (
        ("accelerators", cat.accelerators),
        ("nodes", cat.nodes),
        ("links", cat.links),
        ("models", cat.models),
        ("regions", cat.regions),
        ("support", cat.architectures),
        ("support", cat.engines),
        ("instances", cat.instances),
    ):
        for key, item in table.items():
            for section, ref in item.sources.items():
                if ref not in cat.references:
                    raise CatalogError(
                        f"{root / FILES[kind]}: {key}.sources.{section}: unknown reference `{ref}`"
                        f"{did_you_mean(ref, cat.references)}"
                    )
    _check_support(cat, root)
    _check_params(cat, root)
    for m in cat.models.values():
        for api in m.api_prices:
            if api.source not in cat.references:
                raise CatalogError(
                    f"{root / FILES['models']}: {m.id}.api_prices ({api.provider}): unknown "
                    f"reference `{api.source}`{did_you_mean(api.source, cat.references)}"
                )
    for a in cat.accelerators.values():
        if a.interconnect.scale_up and a.interconnect.scale_up not in cat.links:
            raise CatalogError(
                f"{root / FILES['accelerators']}: {a.id}.interconnect.scale_up: unknown link "
                f"`{a.interconnect.scale_up}`{did_you_mean(a.interconnect.scale_up, cat.links)}"
            )
        _check_ports(cat, a, root / FILES["accelerators"])
    for i in cat.instances.values():
        if i.device not in cat.accelerators:
            raise CatalogError(
                f"{root / FILES['instances']}: {i.id}.device: unknown device `{i.device}`"
                f"{did_you_mean(i.device, cat.accelerators)}"
            )
    for n in cat.nodes.values():
        named = [n.intra_node_link, *n.scale_up_bridges, *(nic.link for nic in n.nics)]
        for link in named:
            if link not in cat.links:
                raise CatalogError(
                    f"{root / FILES['nodes']}: {n.id}: unknown link `{link}`{did_you_mean(link, cat.links)}"
                )
        for dev in n.accepts_devices:
            if dev not in cat.accelerators:
                raise CatalogError(
                    f"{root / FILES['nodes']}: {n.id}.accepts_devices: unknown device `{dev}`"
                    f"{did_you_mean(dev, cat.accelerators)}"
                )


# How far a model's published total may sit from the parameters its architecture implies: model
# cards round to two or three figures (7B for 7.24B), and every shipped model is within 0.6 %;
# further off is a typo or a wrong architecture. Active counts are not checked: cards leave out
# the embedding table the planner's active count includes (gpt-oss-20b: 16 % apart).
PARAMS_TOLERANCE = 0.05


def _check_params(cat: Catalog, root: Path) -> None:
    """Each model's published_params within PARAMS_TOLERANCE of its architecture's count."""
    for m in cat.models.values():
        counted = total_params(m)
        if abs(m.published_params / counted - 1) > PARAMS_TOLERANCE:
            raise CatalogError(
                f"{root / FILES['models']}: {m.id}.published_params: {m.published_params:.3g} is "
                f"not the {counted:.4g} parameters its architecture implies (hidden_size, layers, "
                f"heads, widths, vocab_size; {PARAMS_TOLERANCE:.0%} allowed): give the model "
                "card's total, or check the architecture against its config.json"
            )


def _check_ports(cat: Catalog, a: Accelerator, where: Path) -> None:
    """A whole machine's `ports` are built-in wired ports between machines, each listed once
    (planner.estimator.built_in_link plans a pool on the slowest one they share)."""
    between = {k: v for k, v in cat.links.items() if v.scope != "intra-node"}
    for j, port in enumerate(a.ports):
        at = f"{where}: {a.id}.ports[{j}]: `{port}`"
        if port in cat.links and port not in between:
            raise CatalogError(
                f"{at} is a link inside one machine ({cat.links[port].kind}), not a network "
                f"port between machines; list wired ports such as eth-1g or thunderbolt5"
            )
        if port not in between:
            raise CatalogError(
                f"{at} is not a catalog link between machines{did_you_mean(port, between)}"
            )
        if between[port].kind == "wifi":
            raise CatalogError(
                f"{at} is wireless; `ports` lists built-in wired ports (a pool is planned on "
                "the slowest one its machines share): remove it, or name the Wi-Fi link in "
                "the problem's constraints.network"
            )
        if port in a.ports[:j]:
            raise CatalogError(f"{at} is listed twice; list each built-in port once")


def _check_support(cat: Catalog, root: Path) -> None:
    """Every device names a known architecture of its own vendor; every support row names
    known engines, architectures and references."""
    where = root / FILES["support"]
    for a in cat.accelerators.values():
        arch = cat.architectures.get(a.architecture)
        if arch is None:
            raise CatalogError(
                f"{root / FILES['accelerators']}: {a.id}.architecture: unknown architecture "
                f"`{a.architecture}`{did_you_mean(a.architecture, cat.architectures)} (add it "
                f"to {FILES['support']} with its vendor, family and generation)"
            )
        if arch.vendor != a.vendor:
            raise CatalogError(
                f"{root / FILES['accelerators']}: {a.id}.architecture: `{arch.id}` is a "
                f"{arch.vendor} architecture, but the device's vendor is {a.vendor}"
            )
    for i, row in enumerate(cat.support):
        if row.engine not in cat.engines:
            raise CatalogError(
                f"{where}: support[{i}].engine: unknown engine `{row.engine}`"
                f"{did_you_mean(row.engine, cat.engines)}"
            )
        for name in row.architectures:
            if name not in cat.architectures:
                raise CatalogError(
                    f"{where}: support[{i}].architectures: unknown architecture `{name}`"
                    f"{did_you_mean(name, cat.architectures)}"
                )
        if row.source not in cat.references:
            raise CatalogError(
                f"{where}: support[{i}].source: unknown reference `{row.source}`"
                f"{did_you_mean(row.source, cat.references)}"
            )
    _check_engine_devices(cat, where)


def _check_engine_devices(cat: Catalog, where: Path) -> None:
    """An engine's per-device task times (Engine.task_sync_us) and the device its exchange
    time was measured on name catalog devices."""
    for e in cat.engines.values():
        ref = [e.exchange_overhead_device] if e.exchange_overhead_device else []
        for dev in [*(e.task_sync_us or {}), *ref]:
            if dev not in cat.accelerators:
                raise CatalogError(
                    f"{where}: engines.{e.id}: unknown device `{dev}`"
                    f"{did_you_mean(dev, cat.accelerators)} (task_sync_us and exchange_overhead_device take catalog device ids)"
                )
