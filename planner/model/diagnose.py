"""Why a problem has no plan: a sentence with numbers when no replica design exists, and the
constraint families whose removal (one at a time) admits a plan."""

from __future__ import annotations

import math
import time

from planner.catalog import Catalog
from planner.estimator.designs import across_machine_degrees, allowed_devices, tp_degrees
from planner.estimator.formats import weight_format
from planner.estimator.memory import weight_bytes
from planner.estimator.support import runtime_for, runtimes
from planner.load import why_no_device
from planner.model.cpsat import PlannerModel
from planner.model.tables import Tables
from planner.schema.catalog import Accelerator
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload


def why_no_design(w: InferenceWorkload | TrainingWorkload, problem: Problem, cat: Catalog) -> str:
    """A sentence with numbers: why no replica configuration exists for `w`."""
    m = cat.model(w.model)
    devs = allowed_devices(problem, cat)
    if not devs:
        return f"workload `{w.name}`: {why_no_device(problem, cat)}"
    c = problem.constraints
    if isinstance(w, InferenceWorkload):
        runs = [d for d in devs if runtime_for(cat, d, w, c) is not None]
        if not runs:
            return f"workload `{w.name}`: {_unsupported(w, problem, cat, devs)}"
        devs = runs

    def usable_on(d: Accelerator) -> float:
        """Bytes one `d` may fill: the catalog's, at most the workload's memory_gb figure."""
        u = d.memory.usable_bytes(c.memory_headroom)
        return w.capped_usable(d.id, u) if isinstance(w, InferenceWorkload) else u

    if isinstance(w, TrainingWorkload) and w.deadline_hours:
        late = _too_slow(w, problem, cat, devs)
        if late:
            return late
    biggest = max(devs, key=usable_on)
    usable = usable_on(biggest)
    capped = usable < biggest.memory.usable_bytes(c.memory_headroom)
    # Training holds its base weights in bf16, QLoRA's in 4-bit NF4 (planner.estimator.memory).
    base = "nf4" if isinstance(w, TrainingWorkload) and w.method == "qlora" else "bf16"
    fmt = weight_format(w.weights if isinstance(w, InferenceWorkload) else base)
    need = weight_bytes(m, fmt)
    tp = max(tp_degrees(biggest, cat, problem, m) or [1])
    stages, engine = c.max_stages, None
    if isinstance(w, InferenceWorkload):
        run = runtime_for(cat, biggest, w, c)
        engine = cat.engines[run.engine] if run is not None else None
    if engine is not None:
        # A group across machines (designs.across_machine_degrees), and an engine that splits
        # no layers over stages serves in one stage only.
        tp = max([tp, *across_machine_degrees(biggest, cat, problem, m, engine.id)])
        stages = stages if engine.pipeline_parallel else 1
    most = usable * stages * tp
    text = (
        f"workload `{w.name}`: {m.name} needs {need / 1e9:,.0f} GB of weights alone "
        f"({fmt.id}); the largest allowed device, {biggest.id}, offers {usable / 1e9:,.0f} GB usable"
        + (" (the workload's memory_gb figure for it)" if capped else "")
    )
    # A headroom above the default is a cause of its own: name it first.
    default = type(c).model_fields["memory_headroom"].default
    kept = (
        f"lower constraints.memory_headroom ({c.memory_headroom:.0%} of memory kept free), "
        # (only where it binds: a platform's share, macOS's on a Mac, may bind first)
        if c.memory_headroom > default
        and 1 - c.memory_headroom < (biggest.memory.gpu_share or 1)
        and not capped
        else ""
    )
    if capped and isinstance(w, InferenceWorkload):
        kept = f"raise the memory_gb profile figures ({w.memory_cap_where(biggest.id)}), "
    if need > most and stages == 1 and engine is not None and not engine.pipeline_parallel:
        return text + (
            f", and {engine.id} runs no pipeline (its catalog entry: pipeline_parallel: false): "
            f"one stage of {tp}-way tensor parallelism holds {most / 1e9:,.0f} GB: {kept}raise "
            "constraints.max_tensor_parallel, allow larger devices, use a smaller format or "
            "name an engine that pipelines"
        )
    if need > most:
        return text + (
            f", and at most {stages} stages x {tp}-way tensor "
            f"parallelism hold {most / 1e9:,.0f} GB: {kept}raise constraints.max_stages, allow "
            "larger devices or use a smaller format"
        )
    return (
        text + "; no configuration both fits in memory and meets the limits: " + kept + _limits(w)
    )


def _too_slow(
    w: TrainingWorkload, problem: Problem, cat: Catalog, devs: list[Accelerator]
) -> str | None:
    """When shapes fit in memory but none finishes by the deadline: the fastest one's hours,
    the shortest deadline that has a plan within the device limit."""
    from planner.estimator.training_designs import training_designs

    free = w.model_copy(update={"deadline_hours": None})
    shapes = training_designs(free, problem, cat, devs, prune=False)
    if not shapes:
        return None  # nothing fits in memory: the memory sentence says why
    fast = max(shapes, key=lambda d: d.tokens_per_s)
    hours = w.token_budget / fast.tokens_per_s / 3600
    n = sum(fast.devices.values())
    most = problem.constraints.max_devices
    cap = f"{most:,} devices (constraints.max_devices)" if most else "4,096 devices"
    return (
        f"workload `{w.name}`: no shape of at most {cap} finishes {w.token_budget:,.0f} tokens "
        f"in deadline_hours {w.deadline_hours:g}: the fastest, {n} x {fast.stages[0].device}, "
        f"takes {hours:,.1f} h; relax deadline_hours to at least {math.ceil(hours * 10) / 10:g}, "
        "raise max_devices, or allow faster devices"
    )


def _unsupported(
    w: InferenceWorkload, problem: Problem, cat: Catalog, devs: list[Accelerator]
) -> str:
    """Why no allowed device runs the workload's formats: what the support matrix offers."""
    named = f" under engine {w.engine}" if w.engine else ""
    allowed = problem.constraints.engines
    if allowed is not None and not w.engine:
        named = f" under constraints.engines ({', '.join(allowed)})"
    shown = ", ".join(d.id for d in devs[:6]) + (", ..." if len(devs) > 6 else "")
    offers = []
    for d in devs[:3]:
        rows = runtimes(cat, d, "fp16", "fp16") + runtimes(cat, d, "bf16", "bf16")
        engines = sorted({r.engine for r in rows}) or ["none"]
        weights = sorted(
            {f for row in cat.support if d.architecture in row.architectures for f in row.weights}
        )
        offers.append(
            f"{d.id} ({d.architecture}): {', '.join(engines)}; weights {', '.join(weights)}"
        )
    return (
        f"no engine in the catalog's support matrix runs {w.weights} weights with a {w.kv} KV "
        f"cache{named} on the allowed devices ({shown}); the matrix offers "
        + " / ".join(offers)
        + ". Change workloads.weights, kv or engine, or the devices (`planner catalog list "
        "support`)"
    )


def _limits(w: InferenceWorkload | TrainingWorkload) -> str:
    """The workload's own keys that bound memory and time, with their values, to relax."""
    if isinstance(w, TrainingWorkload):
        deadline = f", or relax deadline_hours ({w.deadline_hours:g} h)" if w.deadline_hours else ""
        return (
            f"lower micro_batch ({w.micro_batch:,}) or seq_len ({w.seq_len:,}), "
            f"raise zero_stage ({w.zero_stage}){deadline}"
        )
    ceilings = [
        f"{key} ({value:g} {unit})"
        for key, value, unit in (
            ("max_ms_per_token", w.max_ms_per_token, "ms"),
            ("max_ttft_s", w.max_ttft_s, "s"),
        )
        if value is not None
    ]
    relax = f"relax {' or '.join(ceilings)}, or " if ceilings else ""
    if w.concurrency is None:  # unbounded: every slot counts as filled
        return f"{relax}lower context_tokens ({w.context_tokens:,})"
    return f"{relax}lower context_tokens ({w.context_tokens:,}) or concurrency ({w.concurrency:,})"


def blocking_constraints(
    tables: Tables, *, time_limit: float, seed: int, deadline: float | None = None
) -> list[str]:
    """Which single constraint family, switched off, makes the problem feasible. Each family
    is tried in its share of `time_limit`, and none once `deadline` (a `time.monotonic()`
    instant: the whole command's) has passed, since every trial builds the model again. A
    family whose trial neither found a plan nor proved there is none is named as undecided,
    never counted among the limits that block together."""
    if deadline is not None and time.monotonic() >= deadline:
        return ["not explained: no time was left to try the constraints; raise --time-limit"]
    probe = PlannerModel(tables)
    names = sorted(probe.named)
    freed, undecided = [], []
    for i, name in enumerate(names):
        if deadline is not None and time.monotonic() >= deadline:
            undecided += names[i:]
            break
        trial = PlannerModel(tables)
        sol = trial.solve(
            time_limit=time_limit / max(1, len(names)),
            workers=1,
            seed=seed,
            relax=frozenset({name}),
        )
        if sol.status in ("OPTIMAL", "FEASIBLE"):
            freed.append(name)
        elif sol.status != "INFEASIBLE":
            undecided.append(name)
    if not freed and undecided:
        return [
            "no single constraint was shown to explain it within the time limit (not settled: "
            f"{', '.join(undecided)}); raise --time-limit to find out"
        ]
    if not freed:
        return [
            f"no single constraint explains it: several limits block together ({', '.join(names)})"
        ]
    return [
        f"infeasible because of `{n}`: without it a plan exists"
        + _concurrency_why(n, tables)
        + _requests_why(n, tables)
        for n in freed
    ]


def _requests_why(name: str, tables: Tables) -> str:
    """For `requests:<workload>` of a request mix: the classes no replica design prefills, or
    none decodes, within the workload's latency targets at any load (their ceilings, named,
    are what to raise)."""
    kind, _, wn = name.partition(":")
    w = next((x for x in tables.problem.workloads if x.name == wn), None)
    if kind != "requests" or not isinstance(w, InferenceWorkload) or w.request_mix is None:
        return ""
    designs, serves = tables.designs.get(wn, []), tables.serves.get(wn, [])
    lacking: dict[str, list[str]] = {"prefill": [], "decode": []}
    for k, cls in enumerate(w.request_mix):
        sides = {
            side
            for d, rates in zip(designs, serves, strict=True)
            if rates.get(k, 0.0) > 0
            for side in (("prefill", "decode") if d.role == "both" else (d.role,))
        }
        for side, names in lacking.items():
            if side not in sides:
                names.append(f"`{cls.name}`")
    verbs = {"prefill": "prefills", "decode": "decodes"}
    said = [f"{verbs[side]} {' or '.join(names)}" for side, names in lacking.items() if names]
    if not said:
        return ""
    targets = [
        f"{key} {getattr(w, key):g}"
        for key in ("max_ttft_s", "max_e2e_s", "max_ms_per_token")
        if getattr(w, key) is not None
    ]
    return (
        f" (no replica design {', and none '.join(said)} within the latency targets at any "
        f"load: {', '.join(targets) or 'none stated'} at the {w.latency_percentile}th "
        "percentile; raise them, or allow faster devices)"
    )


def _concurrency_why(name: str, tables: Tables) -> str:
    """For `concurrency:<workload>`: the sequences held and the most they make (output tokens/s
    <= sequences / time per token), and the default of one when the file states none."""
    kind, _, wn = name.partition(":")
    w = next((x for x in tables.problem.workloads if x.name == wn), None)
    if kind != "concurrency" or not isinstance(w, InferenceWorkload) or w.concurrency is None:
        return ""
    fastest = min((d.ms_per_token for d in tables.designs.get(wn, [])), default=0.0)
    if fastest <= 0:
        return ""
    most = w.concurrency * 1000.0 / fastest
    stated = "concurrency" in w.model_fields_set
    said = f"{w.concurrency:,} at once" + ("" if stated else ", the default: the file states none")
    need = ""
    if w.min_tokens_per_s and most >= w.min_tokens_per_s:
        need = (
            f": the {w.min_tokens_per_s:,.0f} asked only on designs as fast as that, which the "
            "other limits (budget, owned devices, power, machines) do not let the fleet hold, "
            "so on the designs it can hold more sequences must exist"
        )
    elif w.min_tokens_per_s and most < w.min_tokens_per_s:
        need = (
            f", below the {w.min_tokens_per_s:,.0f} asked: at least "
            f"{math.ceil(w.min_tokens_per_s * fastest / 1000.0 - 1e-9):,} sequences must exist"
        )
    return (
        f" (sequences: {said}; at the fastest design's {fastest:.3g} ms per token they make "
        f"at most {most:,.0f} output tokens/s{need}; state the sequences that exist, "
        "`concurrency: N`, or `unbounded` for open-ended demand)"
    )


def capped_out(tables: Tables) -> list[str]:
    """A workload's devices that its memory_gb figures leave without any design (none of
    their stages fits in that memory): a cause of no plan that no model constraint names."""
    out = []
    for w in tables.problem.workloads:
        if not isinstance(w, InferenceWorkload):
            continue
        used = {dev for d in tables.designs.get(w.name, []) for dev in d.devices}
        headroom = tables.problem.constraints.memory_headroom
        for p in w.layer_times:
            e = tables.econ.get(p.device)
            if p.metric != "memory_gb" or e is None or p.device in used:
                continue
            usable = e.device.memory.usable_bytes(headroom)
            if w.capped_usable(p.device, usable) < usable:
                out.append(
                    f"workload `{w.name}`: no design on {p.device} fits in its memory_gb figure "
                    f"({p.gb:g} GB, workloads.{w.name}.measured); raise it to plan with {p.device}"
                )
    return out
