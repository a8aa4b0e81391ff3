"""Load a problem: read the file, apply `--set` overrides, validate, and check every name it
uses against the catalog (located errors with did-you-mean)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from planner.catalog import Catalog, add_file_model, load_catalog
from planner.errors import InputError, did_you_mean
from planner.estimator.economics import available_modes, carbon_promise
from planner.estimator.efficiency import Efficiency, load_efficiency
from planner.estimator.formats import kv_bytes, mix_without_experts, weight_format
from planner.estimator.hosts import placeable
from planner.estimator.support import architecture_allowed, gguf_refusal
from planner.hf_config import load_hf_config
from planner.load_measured import check_devices, check_measured, read_tables
from planner.load_network import assume_network, check_machines, check_network, check_segments
from planner.schema.catalog import Accelerator, Link, ModelArch
from planner.schema.overrides import apply_overrides, blame
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload
from planner.schema.yaml_io import Loc, Located, dotted, read_yaml, validate


def load_problem(path: Path, overrides: Sequence[str] = ()) -> Problem:
    """Read, override (`--set PATH=VALUE`), validate and name-check a problem file. A workload's
    model may be a config.json, or a folder holding one, relative to the problem file."""
    doc = read_yaml(path)
    if isinstance(doc.data, dict) and {"format_version", "problem_sha256"} <= set(doc.data):
        # A plan where a problem belongs: say so, rather than list every plan key as unknown.
        raise InputError(
            f"{path}: this is a plan (written by `planner solve --out`), not a problem file. "
            f"To check it: `planner verify {path}`; to replay it: `planner simulate {path} "
            "PROBLEM.yaml`; to solve, give the problem's YAML file"
        )
    return parse_problem(doc, overrides, base=path.parent)


def is_model_path(name: str) -> bool:
    """A model written as a path (`./qwen3-8b/config.json`, `models/qwen3-8b`), not a catalog id."""
    return "/" in name or "\\" in name or name.endswith(".json")


def parse_problem(
    doc: Located,
    overrides: Sequence[str] = (),
    base: Path | None = None,
    confine: bool = False,
    points: Sequence[str] = (),
) -> Problem:
    """Validate a parsed problem. `base` is the folder model paths are relative to; without
    one (a problem that did not come from a file of the user's) a model path is refused. With
    `confine` a model path must stay inside `base` (no absolute path, no `..` or link out of it),
    for problems sent by someone who may not read the machine's other files. `points`: the
    `PATH=VALUE` assignments of a sweep point, applied after the `--set` overrides."""
    doc, origin = apply_overrides(doc, overrides, points)
    try:
        doc = read_tables(doc, base, confine)
        problem = validate(doc, Problem)
        _file_models(problem, doc, base, confine)
        check_names(problem, load_catalog(), doc)
        problem = assume_network(problem, load_catalog(), _where(doc))
    except InputError as e:
        raise blame(e, origin) from None
    return problem


def _file_models(problem: Problem, doc: Located, base: Path | None, confine: bool) -> None:
    """Read the config.json each model path names and make it known to the catalog."""
    for i, w in enumerate(problem.workloads):
        if not is_model_path(w.model) or (base is None and w.model in load_catalog().models):
            continue
        at = f"{doc.where(('workloads', i, 'model'))}: workloads.{i}.model"
        if base is None:
            raise InputError(
                f"{at}: a model path (`{w.model}`) is not accepted here; name a catalog model"
            )
        path = base / w.model
        if confine and not _inside(base, w.model):
            raise InputError(
                f"{at}: workload `{w.name}`: the model path `{w.model}` leaves the models folder; "
                "give a path relative to it, or a catalog model"
            )
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            shown, of = (w.model, "the models folder") if confine else (path, "the problem file")
            raise InputError(
                f"{at}: workload `{w.name}`: no config.json at `{shown}` (a model path is "
                f"relative to {of}: a config.json or a folder holding one)"
            )
        add_file_model(w.model, load_hf_config(path))


def _inside(root: Path, name: str) -> bool:
    """Whether the model path `name` (a folder or its config.json), with links and `..`
    resolved, lies inside `root`; an absolute path never does."""
    if Path(name).is_absolute() or "\\" in name:
        return False
    path = root / name
    try:
        if path.is_dir():
            path = path / "config.json"
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop, or a name the system refuses
        return False


def _where(doc: Located | None) -> Callable[[Loc], str]:
    """Where a key of the problem sits: file, line and dotted path (the path alone without a
    file)."""

    def where(loc: Loc) -> str:
        return f"{doc.where(loc)}: {dotted(loc)}: " if doc else f"{dotted(loc)}: "

    return where


def check_names(problem: Problem, cat: Catalog, doc: Located | None = None) -> None:
    """Every name a problem uses exists in the catalog (with a located, suggesting error)."""
    where = _where(doc)
    for i, w in enumerate(problem.workloads):
        if w.model not in cat.models:
            raise InputError(
                f"{where(('workloads', i, 'model'))}workload `{w.name}`: unknown model `{w.model}`"
                f"{did_you_mean(w.model, cat.models)}"
            )
        _check_context(w, cat.models[w.model], where, i)
        if isinstance(w, InferenceWorkload):
            for key, check in (("weights", weight_format), ("kv", kv_bytes)):
                try:
                    check(getattr(w, key))
                except InputError as e:
                    raise InputError(
                        f"{where(('workloads', i, key))}workload `{w.name}`: {e}"
                    ) from None
            _check_mix(w, cat.models[w.model], where, i)
            if w.engine is not None and w.engine not in cat.engines:
                raise InputError(
                    f"{where(('workloads', i, 'engine'))}workload `{w.name}`: unknown engine "
                    f"`{w.engine}`{did_you_mean(w.engine, cat.engines)} "
                    f"(engines: {', '.join(cat.engines)})"
                )
            refused = gguf_refusal(cat, w.engine, w.weights)
            if refused is not None:
                raise InputError(
                    f"{where(('workloads', i, 'weights'))}workload `{w.name}` under engine "
                    f"`{w.engine}`: {refused}"
                )
            engines = problem.constraints.engines
            if w.engine is not None and engines is not None and w.engine not in engines:
                raise InputError(
                    f"{where(('workloads', i, 'engine'))}workload `{w.name}`: engine "
                    f"`{w.engine}` is not among constraints.engines ({', '.join(engines)}); "
                    "add it there or name another"
                )
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
    for key, names, table in (
        ("engines", c.engines or [], cat.engines),
        ("min_architecture", c.min_architecture, cat.architectures),
    ):
        for j, n in enumerate(names):
            if n not in table:
                kind = "engine" if key == "engines" else "architecture"
                raise InputError(
                    f"{where(('constraints', key, j))}unknown {kind} `{n}`{did_you_mean(n, table)}"
                    f" (see `planner catalog list {kind}s`)"
                )
    vendors = {a.vendor for a in cat.accelerators.values()}
    for j, v in enumerate(c.vendors or []):
        if v not in vendors:
            raise InputError(
                f"{where(('constraints', 'vendors', j))}unknown vendor `{v}`"
                f"{did_you_mean(v, vendors)} (vendors: {', '.join(sorted(vendors))})"
            )
    check_network(problem, cat, where)
    _check_more_names(problem, cat, where)
    _check_embodied(problem, cat, where)


def _check_mix(w: InferenceWorkload, m: ModelArch, where: Callable[[Loc], str], i: int) -> None:
    """A file mixed per tensor class (formats.mixed_format) gives the routed experts a format of
    their own: a model without routed experts has none to give it, so the mix is a mistake."""
    why = mix_without_experts(w.weights, m)
    if why is not None:
        raise InputError(f"{where(('workloads', i, 'weights'))}workload `{w.name}`: {why}")


def _check_embodied(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """Under a carbon promise, every device named (allowed or owned) has an embodied figure."""
    promise, c = carbon_promise(problem), problem.constraints
    named: list[tuple[Loc, str]] = [
        (("constraints", "allowed_devices", j), n) for j, n in enumerate(c.allowed_devices or [])
    ]
    named += [
        (("constraints", "inventory", j, "device"), o.device) for j, o in enumerate(c.inventory)
    ]
    for loc, n in named if promise else []:
        if cat.accelerator(n).embodied_kgco2e is None:
            raise InputError(
                f"{where(loc)}the catalog has no "
                f"embodied-carbon figure for `{n}`, and {promise} cannot count making it as 0 kg: "
                "give its embodied_kgco2e (with a source) in a catalog overlay (--catalog DIR, "
                f"accelerators.yaml), or take `{n}` out of constraints.{loc[1]}"
            )


def _check_context(
    w: InferenceWorkload | TrainingWorkload, m: ModelArch, where: Callable[[Loc], str], i: int
) -> None:
    """A sequence no longer than the model's maximum context (max_position_embeddings): past
    it the model was never trained (a training sequence needs its positions extended first)."""
    loc: Loc
    if isinstance(w, TrainingWorkload):
        longest, loc = w.seq_len, ("workloads", i, "seq_len")
        said = "" if "seq_len" in w.model_fields_set else " (the default)"
        what = f"training seq_len of {w.seq_len:,}{said}"
    elif w.request_mix is None:
        longest, loc = w.context_tokens, ("workloads", i, "context_tokens")
        what = f"context_tokens of {w.context_tokens:,}"
    else:
        j, rc = max(enumerate(w.request_mix), key=lambda e: e[1].input_tokens + e[1].output_tokens)
        longest, loc = rc.input_tokens + rc.output_tokens, ("workloads", i, "request_mix", j)
        what = f"request class `{rc.name}` of {longest:,} tokens (input + output)"
    if longest > m.max_context:
        raise InputError(
            f"{where(loc)}workload `{w.name}`: a {what} is longer than {m.id}'s maximum context "
            f"of {m.max_context:,} tokens: lower it to at most {m.max_context:,} or pick a model "
            "with a longer context"
        )


def _check_more_names(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """Host ids in allowed_hosts, device ids in prices and measured capacities, the carbon
    region, and owned devices listed twice."""
    for j, n in enumerate(problem.constraints.allowed_hosts or []):
        if n not in cat.nodes:
            raise InputError(
                f"{where(('constraints', 'allowed_hosts', j))}unknown host `{n}`"
                f"{did_you_mean(n, cat.nodes)} (see `planner catalog list nodes`)"
            )
    for name in problem.market.prices:
        if name not in cat.accelerators:
            raise InputError(
                f"{where(('market', 'prices', name))}unknown device `{name}`: its prices would be "
                f"ignored{did_you_mean(name, cat.accelerators)}"
            )
    offers = {"per-device", *cat.instances, *(i.provider for i in cat.instances.values())}
    for j, name in enumerate(problem.market.rent_offers or []):
        if name not in offers:
            raise InputError(
                f"{where(('market', 'rent_offers', j))}unknown rental offer `{name}`"
                f"{did_you_mean(name, offers)} (offers: per-device, the providers "
                f"{', '.join(sorted({i.provider for i in cat.instances.values()}))} or an "
                "instance id; see `planner catalog list instances`)"
            )
    check_devices(problem, cat, where)
    region = problem.carbon.region if problem.carbon else None
    if region is not None and region not in cat.regions:
        raise InputError(
            f"{where(('carbon', 'region'))}unknown region `{region}`"
            f"{did_you_mean(region, cat.regions)} (regions: {', '.join(sorted(cat.regions))})"
        )
    check_machines(problem, cat, where)
    check_segments(problem, cat, where)
    _check_owned(problem, cat, where)
    _check_fabrics(problem, cat, where)
    names = _device_ids(problem, cat) - set(problem.constraints.excluded_devices)
    for i, w in enumerate(problem.workloads):
        if isinstance(w, InferenceWorkload) and w.measured_entries:
            check_measured(problem, cat, where, i, w, names)
    seen: dict[str, int] = {}
    for j, owned in enumerate(problem.constraints.inventory):
        if owned.device in seen:
            raise InputError(
                f"{where(('constraints', 'inventory', j, 'device'))}`{owned.device}` is listed "
                f"twice in the inventory (entries {seen[owned.device] + 1} and {j + 1}); give one line "
                "with the total count"
            )
        seen[owned.device] = j


def why_no_device(problem: Problem, cat: Catalog) -> str:
    """Which constraint leaves no device to plan with: the filters of `allowed_devices` applied
    in its order, naming the one that removes the last devices the earlier ones kept."""
    c = problem.constraints
    owned = {o.device for o in c.inventory}
    filters: list[tuple[str, Callable[[Accelerator], object]]] = [
        (
            "constraints.allowed_devices",
            lambda d: c.allowed_devices is None or d.id in c.allowed_devices or d.id in owned,
        ),
        ("constraints.excluded_devices", lambda d: d.id not in c.excluded_devices),
        ("constraints.vendors", lambda d: c.vendors is None or d.vendor in c.vendors),
        ("constraints.require_ecc", lambda d: not c.require_ecc or d.ecc),
        (
            "constraints.min_architecture / exclude_end_of_life",
            lambda d: architecture_allowed(cat, d, c),
        ),
        (
            f"horizon.procurement ({', '.join(problem.horizon.modes)}: no price for it)",
            lambda d: (
                available_modes(problem, d, instances=cat.instances_of(d.id)) or d.id in owned
            ),
        ),
        ("the catalog's hosts (no node takes them)", cat.nodes_for),
        (
            "constraints.allowed_hosts (no allowed host takes them, and they cannot be rented)",
            lambda d: placeable(
                cat, d, problem, available_modes(problem, d, instances=cat.instances_of(d.id))
            ),
        ),
    ]
    promise = carbon_promise(problem)
    why = f"{promise} (no embodied-carbon figure: give embodied_kgco2e in a catalog overlay)"
    filters.append((why, lambda d: promise is None or d.embodied_kgco2e is not None))
    left = list(cat.accelerators.values())
    for name, keeps in filters:
        kept = [d for d in left if keeps(d)]
        if not kept:
            shown = ", ".join(d.id for d in left[:6]) + (", ..." if len(left) > 6 else "")
            return (
                f"no device is left to plan with: {name} removes the last {len(left)} "
                f"({shown}) that the constraints before it allowed; relax it"
            )
        left = kept
    return "no allowed device has a price and a host in the catalog"


# Efficiency factors the calibration reads and no estimate does, with what to set instead: a
# given value would change nothing, silently. moe_fused_share is the share of the routing time
# a run with DeepEP's fused dispatcher pays (perf.moe_routing_seconds_per_token, `fused`), and
# the planner's training jobs run Megatron-Core's default dispatcher.
UNREAD_FACTORS = {
    "moe_fused_share": "the share of the MoE routing time a run with DeepEP's fused dispatcher "
    "pays, fitted on such published runs; the planner's training jobs run Megatron-Core's "
    "default dispatcher and pay all of it: give moe_routed_ns to change the routing time",
}


def parse_efficiency(pairs: Sequence[str], cat: Catalog) -> dict[str, dict[str, float]]:
    """`--efficiency [DEVICE_OR_CLASS:]FACTOR=VALUE` -> {scope: {factor: value}}, `*` for every
    device; the device or class and the factor are checked, with did-you-mean."""
    classes = sorted({d.device_class for d in cat.accelerators.values()})
    result: dict[str, dict[str, float]] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        scope, _, factor = key.strip().rpartition(":")
        scope = scope.strip()
        factor = factor.strip()
        if not eq or not factor:
            raise InputError(
                f"--efficiency `{pair}`: expected FACTOR=VALUE or DEVICE:FACTOR=VALUE "
                f"(factors: {', '.join(_read_factors())})"
            )
        if scope and scope not in cat.accelerators and scope not in classes:
            raise InputError(
                f"--efficiency `{pair}`: `{scope}` is neither a device id nor a device class"
                f"{did_you_mean(scope, [*cat.accelerators, *classes])} "
                f"(classes: {', '.join(classes)})"
            )
        if factor not in Efficiency.model_fields:
            raise InputError(
                f"--efficiency `{pair}`: unknown factor `{factor}`"
                f"{did_you_mean(factor, _read_factors())} "
                f"(factors: {', '.join(_read_factors())})"
            )
        if factor in UNREAD_FACTORS:
            raise InputError(f"--efficiency `{pair}`: {factor} is {UNREAD_FACTORS[factor]}")
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"--efficiency `{pair}`: `{raw}` is not a number") from None
        if not math.isfinite(value):
            raise InputError(f"--efficiency `{pair}`: `{raw}` is not a finite number")
        base = next(iter(load_efficiency().classes.values())).model_dump()
        try:
            Efficiency.model_validate({**base, factor: value})  # the factor's own bounds
        except ValidationError as e:
            why = e.errors()[0]["msg"]
            raise InputError(f"--efficiency `{pair}`: {factor}: {why}") from None
        result.setdefault(scope or "*", {})[factor] = value
    return result


def _read_factors() -> list[str]:
    """The efficiency factors an estimate reads (Efficiency's fields but UNREAD_FACTORS)."""
    return [f for f in Efficiency.model_fields if f not in UNREAD_FACTORS]


PCIE_LINKS = ("pcie3", "pcie4", "pcie5", "pcie6")
PORT_KINDS = ("ethernet", "roce", "infiniband", "thunderbolt", "wifi")  # a machine's own ports


def _device_ids(problem: Problem, cat: Catalog) -> set[str]:
    """Device ids the problem may plan with: the allowed ones (every catalog device when it
    names none) and the owned ones."""
    c = problem.constraints
    return set(c.allowed_devices or cat.accelerators) | {o.device for o in c.inventory}


def _check_owned(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """An owned device is one the constraints allow; a machine of a device that is a computer
    of its own (a Mac, a DGX Spark, a mini PC) holds one of it; a stated machine joins its
    cards over PCIe or over their own scale-up link (a bridge, NVLink), no other fabric."""
    c = problem.constraints
    for j, o in enumerate(c.inventory):
        if c.allowed_devices is not None and o.device not in c.allowed_devices:
            raise InputError(
                f"{where(('constraints', 'inventory', j, 'device'))}`{o.device}` is owned but "
                f"not in constraints.allowed_devices ({', '.join(c.allowed_devices)}): add it "
                "there to plan with it, or drop this inventory entry to plan without it"
            )
        if o.device in c.excluded_devices:
            raise InputError(
                f"{where(('constraints', 'inventory', j, 'device'))}`{o.device}` is owned and "
                "in constraints.excluded_devices: drop one of the two"
            )
    for j, mc in enumerate(problem.machines):
        held = problem.devices_in(mc.id)
        if not held:
            raise InputError(
                f"{where(('machines', j, 'id'))}`{mc.id}` holds no owned device: name it in "
                "constraints.inventory[].machine for the owned devices that sit in it, or drop it"
            )
        for dev in held:
            d = cat.accelerators.get(dev)
            if d is None:
                continue
            if d.form_factor == "soc-system" and mc.slots > 1:
                raise InputError(
                    f"{where(('machines', j, 'slots'))}`{d.id}` is a computer of its own, one to "
                    f"a machine: give `{mc.id}` slots: 1, and join several of them over a network "
                    "(the machine's `network`, or constraints.network)"
                )
            carried = [*PCIE_LINKS, *([d.interconnect.scale_up] if d.interconnect.scale_up else [])]
            if mc.slots > 1 and mc.link not in carried:
                raise InputError(
                    f"{where(('machines', j, 'link'))}`{mc.link}` is not a link `{d.id}` cards "
                    f"join over: one of {', '.join(carried)}"
                )


def _check_fabrics(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """A device fabric that also spans hosts (NVLink 5, TPU ICI, Gaudi's RoCE, NeuronLink)
    joins machines only of devices that carry it: as constraints.network some device of the
    problem must, as a machine's own network or attach link every device in the machine, as
    a segment's link every device on the segment."""
    c = problem.constraints
    names = _device_ids(problem, cat)

    def fabric(link: Link) -> bool:
        """A device's own fabric that may also span hosts (scope `both`), or one not carried
        by a machine's ports."""
        return link.scope == "both" or link.kind not in PORT_KINDS

    def carriers(link: str) -> set[str]:
        return {d.id for d in cat.accelerators.values() if d.interconnect.scale_up == link}

    between = "a network of the machines' own ports (Ethernet, RoCE, InfiniBand, Thunderbolt, "
    between += "Wi-Fi) or one stated under `links`"
    net = cat.links.get(c.network)
    if net is not None and fabric(net) and not carriers(net.id) & names:
        raise InputError(
            f"{where(('constraints', 'network'))}`{net.id}` is the fabric of "
            f"{', '.join(sorted(carriers(net.id))) or 'other devices'}, which this problem "
            f"does not use: name {between}"
        )
    # A machine's own network and attach link, and a segment's link (every machine on it).
    named: list[tuple[str | None, list[str], Loc]] = []
    for j, mc in enumerate(problem.machines):
        held = problem.devices_in(mc.id)
        named += [(mc.network, held, ("machines", j, "network"))]
        named += [(mc.attach, held, ("machines", j, "attach"))]
    for i, g in enumerate(problem.segments):
        on = [x for mc in problem.machines if mc.segment == g.id for x in problem.devices_in(mc.id)]
        named += [(g.link, on, ("segments", i, "link"))]
    for name, held, at in named:
        link = cat.links.get(name or "")
        if link is None or not fabric(link):
            continue
        odd = [x for x in held if x not in carriers(link.id)]
        if odd:
            raise InputError(
                f"{where(at)}`{link.id}` is a device fabric that {', '.join(odd)} does not "
                f"carry: name {between}"
            )
