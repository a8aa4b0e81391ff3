"""One structural check per constraint field of the problem schema, over a plan, its problem and
the catalog: the registry `RULES` ties each field (`constraints.<key>`, `workloads.<key>`) to the
check that enforces it, and tests fail when a constraint field of the schema has none.

The checks read the plan's choices (devices, stages, counts) and its stated figures; the stated
figures themselves are recomputed from the estimator by `planner.verify`, so together a plan that
passes both holds every constraint. Each failure names the field and gives both figures.

Long because the registry and its checks, each a few lines over the plan's own choices, stay
side by side: a reader finds the field, its check and the checks it shares helpers with in
one file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from planner.catalog import Catalog
from planner.errors import PlannerError
from planner.estimator.confidence import CONFIDENCE, design_confidence
from planner.estimator.formats import format_parts
from planner.estimator.hosts import carries_scale_up, host_options, tp_limit
from planner.estimator.network import network_link
from planner.estimator.request_mix import class_workload
from planner.estimator.routes import group_route
from planner.estimator.support import gguf_row_refused, tensor_parallel_refusal
from planner.plan.recipe import launch_command, served_context, served_sequences
from planner.plan.types import Plan, StageLine, WorkloadPlan
from planner.schema.catalog import Node
from planner.schema.model_params import split_heads
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload, Workload
from planner.schema.status import Site

REL_TOL = 1e-6  # as planner.verify: ceilings hold within a relative 1e-6
Rule = Callable[[Plan, Problem, Catalog], list[str]]


def _over(value: float, limit: float) -> bool:
    return value > limit * (1 + REL_TOL) + 1e-12


def _parts(plan: Plan, problem: Problem) -> Iterator[tuple[Workload, WorkloadPlan]]:
    by_name = {w.name: w for w in problem.workloads}
    for wp in plan.workloads:
        if wp.name in by_name:
            yield by_name[wp.name], wp


def _held(plan: Plan) -> list[str]:
    return [d.type for d in plan.devices if d.count > 0]


def _stage_devices(plan: Plan) -> set[str]:
    return {s.device for wp in plan.workloads for s in wp.stages}


# --- constraints -----------------------------------------------------------------------------


def _budget(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    b = problem.constraints.budget_usd
    over = b is not None and _over(plan.tco_usd, b)
    return [f"constraints.budget_usd: tco_usd {plan.tco_usd:.2f} > budget {b}"] if over else []


def _capex(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    b = problem.constraints.capex_usd
    over = b is not None and _over(plan.capex_usd, b)
    return [f"constraints.capex_usd: capex_usd {plan.capex_usd:.2f} > ceiling {b}"] if over else []


def _power(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.power_w
    over = cap is not None and _over(plan.wall_power_w, cap)
    return (
        [f"constraints.power_w: wall_power_w {plan.wall_power_w:.1f} > cap {cap}"] if over else []
    )


def _max_devices(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.max_devices
    if cap is None:
        return []
    busiest = max(
        (sum(sum(m.values()) for m in p.devices.values()) for p in plan.periods), default=0
    )
    return [f"constraints.max_devices: {busiest} devices at work > {cap}"] if busiest > cap else []


def _allowed(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    c = problem.constraints
    owned = {o.device for o in c.inventory}
    if c.allowed_devices is None:
        return []
    return [
        f"constraints.allowed_devices: {d} is not among {c.allowed_devices}"
        for d in sorted(_stage_devices(plan) | set(_held(plan)))
        if d not in c.allowed_devices and d not in owned
    ]


def _allowed_hosts(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    c = problem.constraints
    owned = {o.device for o in c.inventory}
    if c.allowed_hosts is None:
        return []
    return [
        f"constraints.allowed_hosts: {n.hosts} sits in {n.type}, not among {c.allowed_hosts}"
        for n in plan.nodes
        if n.type not in c.allowed_hosts and n.hosts not in owned
    ]


def _excluded(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    ex = problem.constraints.excluded_devices
    devs = sorted(_stage_devices(plan) | set(_held(plan)))
    return [f"constraints.excluded_devices: {d} is excluded" for d in devs if d in ex]


def _vendors(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    vs = problem.constraints.vendors
    if vs is None:
        return []
    out = []
    for d in sorted(_stage_devices(plan) | set(_held(plan))):
        vendor = cat.accelerator(d).vendor
        if vendor not in vs:
            out.append(f"constraints.vendors: {d} is made by {vendor}, not one of {vs}")
    return out


def _ecc(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    if not problem.constraints.require_ecc:
        return []
    devs = sorted(_stage_devices(plan) | set(_held(plan)))
    return [
        f"constraints.require_ecc: {d} has no ECC memory"
        for d in devs
        if not cat.accelerator(d).ecc
    ]


def _headroom(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    h = problem.constraints.memory_headroom
    stated = {w.name: w for w in problem.workloads}
    out = []
    for wp in plan.workloads:
        w = stated.get(wp.name)
        for i, s in enumerate(wp.stages):
            usable = cat.accelerator(s.device).memory.usable_bytes(h)
            limit = "constraints.memory_headroom"
            if isinstance(w, InferenceWorkload):  # a stated memory_gb caps it
                capped = w.capped_usable(s.device, usable)
                if capped < usable:
                    usable, limit = capped, f"{w.memory_cap_where(s.device)} (memory_gb)"
            used = s.memory_bytes.get("total", 0.0)
            if _over(used, usable):
                out.append(
                    f"{limit}: `{wp.name}` stage {i} on {s.device} holds "
                    f"{used:.4g} B, usable {usable:.4g} B"
                )
    return out


def _tp_cap(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.max_tensor_parallel
    return [
        f"constraints.max_tensor_parallel: `{wp.name}` stage {i} on {s.device} at tp {s.tp} > {cap}"
        for wp in plan.workloads
        for i, s in enumerate(wp.stages)
        if s.tp > cap
    ]


def _tp_domain(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """A tensor-parallel group lives in one host: within its slots, and within the device's
    scale-up domain where the host carries that link, unless PCIe is allowed; its degree divides the attention heads."""
    pcie = problem.constraints.tensor_parallel_over_pcie
    hosts = {x.hosts: cat.nodes[x.type] for x in plan.nodes if x.type in cat.nodes}
    out = []
    for w, wp in _parts(plan, problem):
        heads = split_heads(cat.model(w.model))
        for i, s in enumerate(wp.stages):
            d = cat.accelerator(s.device)
            # On premises, the host the plan puts the device in; rented, the provider's
            # machine: the host option holding the largest group.
            rented = max(
                cat.nodes_for(d),
                key=lambda n: tp_limit(d, n, problem.constraints),
                default=None,
            )
            host = hosts.get(d.id) if wp.site == Site.PREMISES else rented
            slots = host.slots if host else 1
            bridged = host is not None and carries_scale_up(d, host)
            domain = d.interconnect.domain_size if bridged else 1
            where = f"`{wp.name}` stage {i} on {s.device} at tp {s.tp}"
            if s.tp < 1 or heads % s.tp:
                out.append(
                    f"tensor parallelism: {where} does not divide {heads} heads (the attention "
                    "heads, and a hybrid's linear-attention query/key heads)"
                )
            if s.across_machines:
                out += _across_machines(plan, problem, cat, wp, s, host, where)
                continue
            if s.tp > slots:
                out.append(
                    f"node slots: {where} > {slots} slots of {host.id if host else 'its host'}"
                )
            elif s.tp > domain and not pcie:
                out.append(
                    f"constraints.tensor_parallel_over_pcie: {where} exceeds the scale-up domain "
                    f"of {domain} (over PCIe, which the problem forbids)"
                )
    return out


def _across_machines(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    wp: WorkloadPlan,
    s: StageLine,
    host: Node | None,
    where: str,
) -> list[str]:
    """A tensor-parallel group across machines: 2, 4 or 8 of them, on premises, one device per
    machine (a host of one slot, and a device no host of which holds more), joined by the
    problem's network, under an engine that runs a group over machines."""
    out = []
    where += " across machines"
    if s.tp not in (2, 4, 8):
        out.append(
            f"tensor parallelism: {where}; a group across machines is 2, 4 or 8 machines (the "
            "plan's design space)"
        )
    if wp.site != Site.PREMISES:
        out.append(f"tensor parallelism: {where} is rented; a group across machines is owned")
    if host is None or host.slots != 1:
        out.append(
            f"node slots: {where} in {host.id if host else 'no host'}; a group across machines "
            "puts one device in each machine"
        )
    wide = [n.id for n in host_options(cat, cat.accelerator(s.device), problem) if n.slots > 1]
    if wide:
        out.append(
            f"node slots: {where}, but {', '.join(wide)} would hold a group inside one host; "
            "groups span machines only for devices every host of which holds one"
        )
    eng = cat.engines.get(wp.engine or "")
    if eng is None or not eng.tensor_parallel_across_machines:
        out.append(
            f"workloads.engine: {where} under {wp.engine or 'no engine'}, which runs no "
            "tensor-parallel group over machines"
        )
    for net in [lk.id for lk in group_route(problem, cat, s.device).links]:
        if net not in plan.links:
            out.append(f"constraints.network: {where}, but the plan joins no machines over {net}")
    return out


def _stages(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.max_stages
    return [
        f"constraints.max_stages: `{wp.name}` has {len(wp.stages)} stages > {cap}"
        for wp in plan.workloads
        if len(wp.stages) > cap
    ]


def _network(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """The network between hosts must be an inter-host link (not NVLink inside a server)."""
    net = problem.constraints.network
    link = network_link(problem, cat)
    stated = {s.id for s in problem.links}
    out = []
    if link.scope == "intra-node":
        out.append(
            f"constraints.network: `{net}` is an intra-node link ({link.kind}); hosts cannot be "
            "joined by it"
        )
    for name in plan.links:
        if name not in cat.links and name not in stated:
            out.append(f"links: unknown link `{name}`")
    hosts = sum(n.count for n in plan.nodes)
    if hosts > 1 and net not in plan.links:
        out.append(f"constraints.network: {hosts} hosts, but the plan's links omit `{net}`")
    return out


def _heterogeneous(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    if problem.constraints.heterogeneous_pipelines:
        return []
    return [
        f"constraints.heterogeneous_pipelines: `{wp.name}` mixes "
        f"{sorted({s.device for s in wp.stages})} in one replica"
        for wp in plan.workloads
        if len({s.device for s in wp.stages}) > 1
    ]


def _supported(cat: Catalog, engine: str, backend: str, device: str, w: InferenceWorkload) -> bool:
    """A support row names this engine and backend for the device's architecture and the
    workload's formats (experimental rows only for an engine the workload names); a file
    mixed per tensor class needs a row that runs both of its formats."""
    arch = cat.accelerator(device).architecture
    parts = format_parts(w.weights)
    return any(
        row.engine == engine
        and row.backend == backend
        and arch in row.architectures
        and all(p in row.weights for p in parts)
        and w.kv in row.kv
        and (not row.experimental or w.engine == engine)
        and not gguf_row_refused(cat, row.engine, row.experimental, w.weights)
        for row in cat.support
    )


def _tensor_groups(cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan) -> list[str]:
    """A tensor-parallel group only where the engine's mode runs the model on the stage's
    backend (support.tensor_parallel_refusal), and as the replica's one stage where that mode
    takes every device of the replica (Engine.tensor_parallel_single_stage)."""
    eng = cat.engines.get(wp.engine) if wp.engine else None
    groups = [s for s in wp.stages if s.tp > 1]
    if eng is None or not groups:
        return []
    m = cat.model(w.model)
    out = []
    for s in groups:
        why = tensor_parallel_refusal(cat, wp.engine, wp.backends.get(s.device, ""), m)
        if why is not None:
            out.append(f"workloads.engine: `{w.name}` stage on {s.device} at tp {s.tp}: {why}")
    if eng.tensor_parallel_single_stage and len(wp.stages) > 1:
        out.append(
            f"workloads.engine: `{w.name}` runs a tensor-parallel group in one of "
            f"{len(wp.stages)} pipeline stages; {wp.engine}'s tensor-parallel mode takes every "
            "device of the replica (one stage)"
        )
    return out


def _engine(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for w, wp in _inference(plan, problem):
        if not wp.engine:
            out.append(f"workloads.engine: `{w.name}` names no serving engine")
            continue
        if w.engine is not None and wp.engine != w.engine:
            out.append(f"workloads.engine: `{w.name}` runs {wp.engine}, not {w.engine}")
        eng = cat.engines.get(wp.engine)
        sizes = sorted({s.tp for s in wp.stages})
        if eng is not None and eng.uniform_tensor_parallel and len(sizes) > 1:
            out.append(
                f"workloads.engine: `{w.name}` runs stages of tensor-parallel sizes {sizes} in "
                f"one replica; {wp.engine} takes one size for every stage"
            )
        if eng is not None and not eng.pipeline_parallel and len(wp.stages) > 1:
            out.append(
                f"workloads.engine: `{w.name}` splits its layers over {len(wp.stages)} pipeline "
                f"stages under {wp.engine}, which runs no pipeline (its catalog entry: "
                "pipeline_parallel: false); give a replica one stage, or name an engine that "
                "pipelines"
            )
        out += _tensor_groups(cat, w, wp)
        for dev in sorted({s.device for s in wp.stages}):
            backend = wp.backends.get(dev, "")
            if not _supported(cat, wp.engine, backend, dev, w):
                out.append(
                    f"workloads.engine: no support row runs {w.weights} weights with a {w.kv} "
                    f"KV cache on {dev} under {wp.engine} ({backend or 'no backend'})"
                )
    return out


def _index(plan: Plan, wp: WorkloadPlan) -> int:
    return next(i for i, x in enumerate(plan.workloads) if x is wp)


def _recipe(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """Each serving replica's launch settings are the ones its figures assume: its stages'
    sizes and layers, batch x stages sequences, its token budget, the workload's formats."""
    out = []
    for w, wp in _inference(plan, problem):
        at = f"workloads.{_index(plan, wp)}.recipe"
        r = wp.recipe
        if r is None:
            out.append(f"`{at}`: `{w.name}` states no launch settings")
            continue
        want = {
            "engine": wp.engine,
            "tensor_parallel": tuple(s.tp for s in wp.stages),
            "pipeline_parallel": len(wp.stages),
            "layer_split": tuple(s.layers[1] - s.layers[0] + 1 for s in wp.stages),
            "max_sequences": _sequences(w, wp),
            "token_budget": wp.token_budget,
            "kv_cache_dtype": w.kv,
            "weights": w.weights,
        }
        for key, value in want.items():
            got = getattr(r, key)
            if (tuple(got) if isinstance(got, list) else got) != value:
                out.append(f"`{at}.{key}`: stated {got}, the design's is {value}")
        command = _launch_command(plan, cat, w, wp) if wp.stages else r.command
        if r.command != command:
            out.append(f"`{at}.command`: stated `{r.command}`, the design's is `{command}`")
    return out


def _sequences(w: InferenceWorkload, wp: WorkloadPlan) -> int:
    """The sequences a replica's launch settings admit (planner.plan.recipe.served_sequences)."""
    pairs = [(s.device, s.tp) for s in wp.stages]
    one = {k: v / wp.replicas for k, v in wp.requests_per_s.items()} if wp.replicas else {}
    return served_sequences(w, pairs, wp.batch, one, wp.ms_per_token or 0.0, wp.role or "both")


def _launch_command(plan: Plan, cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan) -> str:
    """The engine command a replica's own stages, sequences, budget and formats give, over
    the machines its devices fill (on premises the plan's hosts, rented the provider's)."""
    k = next((i for i, c in enumerate(w.request_mix or ()) if c.name == wp.sized_for), None)
    shape = class_workload(w, k) if k is not None else w
    hosts = {x.hosts: cat.nodes[x.type] for x in plan.nodes if x.type in cat.nodes}
    per_device: dict[str, int] = {}
    for s in wp.stages:
        per_device[s.device] = per_device.get(s.device, 0) + s.tp
    machines = 0
    for dev, n in per_device.items():
        # The host the plan holds the device in, else the catalog's default host for it (a
        # rented device's machine is counted as that host, as its share of host power is).
        host = hosts.get(dev) or cat.host_for(cat.accelerator(dev))
        machines += -(-n // (host.slots if host else 1))
    parts = [(s.device, s.tp, s.layers[1] - s.layers[0] + 1) for s in wp.stages]
    seqs = _sequences(w, wp)
    return launch_command(
        wp.engine or "",
        dict(wp.backends or {}),
        parts,
        seqs,
        wp.token_budget,
        w.kv,
        served_context(w, shape, dict(wp.requests_per_s)),
        machines,
    )


def _confidence(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """Each serving replica states the backing the calibration rows give it, recomputed."""
    out = []
    for w, wp in _inference(plan, problem):
        at = f"workloads.{_index(plan, wp)}.confidence"
        devs = [cat.accelerator(x) for x in sorted({s.device for s in wp.stages})]
        want = design_confidence(cat, devs, wp.engine or "", wp.batch)
        got = wp.confidence
        if got is None:
            out.append(f"`{at}`: `{w.name}` states none, the rows give {want.text}")
            continue
        for key in ("label", "rows", "low_pct", "high_pct"):
            a, b = getattr(got, key), getattr(want, key)
            if a != b if isinstance(a, str) else abs(a - b) > REL_TOL * max(1.0, abs(b)):
                out.append(f"`{at}.{key}`: stated {a}, the calibration rows give {b}")
    return out


def _min_confidence(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    floor = problem.constraints.min_confidence
    most = CONFIDENCE.index(floor)
    out = []
    for _w, wp in _inference(plan, problem):
        at = f"workloads.{_index(plan, wp)}.confidence.label"
        if wp.confidence is None:
            continue
        if wp.confidence.label not in CONFIDENCE:  # a plan file's text, not one the planner writes
            out.append(f"`{at}`: `{wp.confidence.label}` is no label ({', '.join(CONFIDENCE)})")
        elif CONFIDENCE.index(wp.confidence.label) > most:
            out.append(
                f"constraints.min_confidence: `{at}` is {wp.confidence.label}, below {floor}"
            )
    return out


def _engines(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    allowed = problem.constraints.engines
    if allowed is None:
        return []
    return [
        f"constraints.engines: `{wp.name}` runs {wp.engine}, not one of {allowed}"
        for _w, wp in _inference(plan, problem)
        if wp.engine not in allowed
    ]


def _cross_stack(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for _w, wp in _inference(plan, problem):
        devs = {s.device for s in wp.stages}
        stacks = {(cat.accelerator(d).vendor, wp.backends.get(d, "")) for d in devs}
        eng = cat.engines.get(wp.engine or "")
        spans = eng is not None and eng.cross_stack_pipeline
        if len(stacks) > 1 and not (problem.constraints.cross_stack_pipelines and spans):
            out.append(
                f"constraints.cross_stack_pipelines: `{wp.name}` spans {sorted(stacks)} in one "
                f"replica under {wp.engine}"
            )
    return out


def _architecture(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for d in sorted(_stage_devices(plan) | set(_held(plan))):
        arch = cat.architectures[cat.accelerator(d).architecture]
        for name in problem.constraints.min_architecture:
            floor = cat.architectures[name]
            if floor.family == arch.family and arch.generation < floor.generation:
                out.append(f"constraints.min_architecture: {d} is {arch.id}, older than {name}")
    return out


def _end_of_life(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    if not problem.constraints.exclude_end_of_life:
        return []
    out = []
    for d in sorted(_stage_devices(plan) | set(_held(plan))):
        arch = cat.architectures[cat.accelerator(d).architecture]
        if arch.end_of_life is not None:
            out.append(
                f"constraints.exclude_end_of_life: {d} is {arch.id}, unsupported since "
                f"{arch.end_of_life}"
            )
    return out


def _one_provider(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """A rented replica has one device type (the catalog's rents name no provider)."""
    return [
        f"horizon.procurement: `{wp.name}` rents {sorted({s.device for s in wp.stages})} in one "
        "replica, which could come from two providers"
        for wp in plan.workloads
        if wp.site == "cloud" and wp.kind == "inference" and len({s.device for s in wp.stages}) > 1
    ]


def _rack_units(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.max_rack_units
    over = cap is not None and plan.rack_units > cap
    return [f"constraints.max_rack_units: {plan.rack_units} > {cap}"] if over else []


def _carbon(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    cap = problem.constraints.max_carbon_kgco2e
    if cap is None:
        return []
    got = plan.carbon.total_kgco2e if plan.carbon else None
    if got is None:
        return ["constraints.max_carbon_kgco2e: the plan states no carbon"]
    return [f"constraints.max_carbon_kgco2e: {got:.1f} kg > {cap}"] if _over(got, cap) else []


def _inventory(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    have: dict[str, int] = {}
    for o in problem.constraints.inventory:
        have[o.device] = have.get(o.device, 0) + o.count
    return [
        f"constraints.inventory: {d.type} owned {d.owned} > {have.get(d.type, 0)} in the inventory"
        for d in plan.devices
        if d.owned > have.get(d.type, 0)
    ]


# --- workloads -------------------------------------------------------------------------------


def _inference(plan: Plan, problem: Problem) -> Iterator[tuple[InferenceWorkload, WorkloadPlan]]:
    for w, wp in _parts(plan, problem):
        if isinstance(w, InferenceWorkload):
            yield w, wp


def _ceiling(key: str, stated: str, unit: str) -> Rule:
    def rule(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
        out = []
        for w, wp in _inference(plan, problem):
            limit, got = getattr(w, key), getattr(wp, stated)
            if limit is not None and got is not None and _over(got, limit):
                out.append(f"workloads.{key}: `{w.name}` {stated} {got:.4g} {unit} > {limit}")
        return out

    return rule


def _context(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for w, _wp in _inference(plan, problem):
        m = cat.model(w.model)
        if w.context_tokens > m.max_context:
            out.append(
                f"workloads.context_tokens: `{w.name}` holds {w.context_tokens} tokens, "
                f"{m.id} reads at most {m.max_context}"
            )
    return out


def _concurrency(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for w, wp in _inference(plan, problem):
        if w.concurrency is None or wp.sequences is None:
            continue
        slots = wp.batch * len(wp.stages) * wp.replicas
        if wp.sequences > slots:
            out.append(
                f"workloads.concurrency: `{w.name}` holds {wp.sequences} sequences in {slots} slots"
            )
    return out


def _deadline(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    out = []
    for w, wp in _parts(plan, problem):
        if not isinstance(w, TrainingWorkload) or w.deadline_hours is None:
            continue
        if wp.finish_hours is None or _over(wp.finish_hours, w.deadline_hours):
            out.append(
                f"workloads.deadline_hours: `{w.name}` finishes in {wp.finish_hours} h > "
                f"{w.deadline_hours} h"
            )
    return out


def _min_rate(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """Every period's served capacity reaches the stated floor times the period's scale."""
    out = []
    for w in problem.workloads:
        if not isinstance(w, InferenceWorkload) or not w.min_tokens_per_s:
            continue
        for p in plan.periods:
            got = sum(
                wp.tokens_per_s
                for wp in plan.workloads
                if wp.name == w.name and (wp.period is None or wp.period == p.name)
            )
            need = w.min_tokens_per_s * p.scale
            if need > 0 and got < need * (1 - REL_TOL):
                out.append(
                    f"workloads.min_tokens_per_s: `{w.name}` serves {got:.1f} tokens/s in "
                    f"`{p.name}`, needs {need:.1f}"
                )
    return out


RULES: dict[str, Rule] = {
    "constraints.budget_usd": _budget,
    "constraints.capex_usd": _capex,
    "constraints.power_w": _power,
    "constraints.max_devices": _max_devices,
    "constraints.allowed_devices": _allowed,
    "constraints.excluded_devices": _excluded,
    "constraints.allowed_hosts": _allowed_hosts,
    "constraints.vendors": _vendors,
    "constraints.require_ecc": _ecc,
    "constraints.memory_headroom": _headroom,
    "constraints.max_tensor_parallel": _tp_cap,
    "constraints.max_stages": _stages,
    "constraints.tensor_parallel_over_pcie": _tp_domain,
    "constraints.network": _network,
    "constraints.heterogeneous_pipelines": _heterogeneous,
    "constraints.cross_stack_pipelines": _cross_stack,
    "constraints.engines": _engines,
    "constraints.min_confidence": _min_confidence,
    "constraints.min_architecture": _architecture,
    "constraints.exclude_end_of_life": _end_of_life,
    "constraints.max_rack_units": _rack_units,
    "constraints.max_carbon_kgco2e": _carbon,
    "constraints.inventory": _inventory,
    "horizon.procurement": _one_provider,
    "workloads.context_tokens": _context,
    "workloads.engine": _engine,
    "workloads.recipe": _recipe,
    "workloads.confidence": _confidence,
    "workloads.concurrency": _concurrency,
    "workloads.max_ttft_s": _ceiling("max_ttft_s", "ttft_s", "s"),
    "workloads.max_ms_per_token": _ceiling("max_ms_per_token", "ms_per_token", "ms"),
    "workloads.min_tokens_per_s": _min_rate,
    "workloads.deadline_hours": _deadline,
}

# Workload limits whose check lives in planner.verify beside the recomputation it needs: the
# registry names where.
CHECKED_IN_VERIFY = {
    "constraints.risk_margin": "planner.verify_workloads.check_demand (the tokens/s floor met "
    "with uncalibrated designs' tokens less the margin)",
    "workloads.max_e2e_s": "planner.verify._check_serving (end-to-end latency at the percentile)",
    "workloads.max_utilization": "planner.verify._check_replicas (replicas' time needed at the "
    "rate estimator.request_mix.replica_rate allows under max_utilization)",
    "workloads.requests_per_s": "planner.verify._check_demand (every request class served)",
}


def rule_failures(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """Every structural failure of `plan`, each naming its constraint field."""
    out: list[str] = []
    for key, rule in RULES.items():
        try:
            out += rule(plan, problem, cat)
        except PlannerError as e:  # an unknown device or link in a tampered plan
            out.append(f"{key}: cannot be checked: {e}")
    return out
