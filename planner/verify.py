"""Re-check a plan without the solver: recompute every stage from the estimator and every
constraint from the catalog and the problem. A plan that fails is a bug and raises."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.catalog import Catalog
from planner.errors import InternalError
from planner.estimator.comm import p2p_seconds, pipeline_activation_bytes
from planner.estimator.devices import device_table
from planner.estimator.formats import kv_bytes, weight_format
from planner.estimator.memory import TrainingSetup, inference_memory, training_memory
from planner.estimator.perf import decode_layer_seconds, head_seconds
from planner.model.designs import Design
from planner.model.economics import energy_usd_per_watt, in_fleet
from planner.plan import Plan, WorkloadPlan
from planner.problem_schema import InferenceWorkload, Problem, TrainingWorkload, Workload

REL_TOL = 1e-6


@dataclass(frozen=True)
class StageFigures:
    memory: dict[str, float]
    seconds: float
    boundary_bytes: float


def stage_figures(w: Workload, cat: Catalog, d: Design, s_i: int, problem: Problem) -> StageFigures:
    """Memory and step time of stage `s_i` of design `d`, straight from the estimator."""
    m = cat.model(w.model)
    st = d.stages[s_i]
    S = len(d.stages)
    first, last = s_i == 0, s_i == S - 1
    if isinstance(w, TrainingWorkload):
        setup = TrainingSetup(
            method=w.method,
            optimizer=w.optimizer,
            zero_stage=w.zero_stage,
            data_parallel=d.replicas_dp,
            tensor_parallel=st.tp,
            seq_len=w.seq_len,
            micro_batch=w.micro_batch,
            recompute=w.recompute,
            lora_rank=w.lora_rank,
        )
        mem = training_memory(m, setup, layers=st.layers, last=last)
        return StageFigures(mem.as_dict(), 0.0, 0.0)
    fmt, kvb = weight_format(w.weights), kv_bytes(w.kv)
    seqs = d.batch * S
    mem = inference_memory(
        m,
        fmt,
        kvb,
        batch=seqs,
        context=w.context_tokens,
        layers=st.layers,
        tp=st.tp,
        first=first,
        last=last,
    )
    dev = device_table([cat.accelerator(st.device)])
    tau = decode_layer_seconds(m, fmt, kvb, dev, batch=d.batch, context=w.context_tokens, tp=st.tp)
    fixed = head_seconds(m, fmt, dev, d.batch) / st.tp + dev.step_overhead_s
    net = cat.link(problem.constraints.network)
    boundary = pipeline_activation_bytes(d.batch, 1, m.hidden_size) if S > 1 else 0.0
    hop = (
        float(p2p_seconds(boundary, net.bandwidth_gb_s * 1e9, net.latency_us * 1e-6))
        if S > 1
        else 0.0
    )
    seconds = float(np.asarray(st.layers * tau + fixed)[0]) + hop
    return StageFigures(mem.as_dict(), seconds, boundary)


def _fail(problem: Problem, what: str) -> None:
    raise InternalError(f"plan for `{problem.name}` failed verification: {what}")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def verify(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """Raise InternalError if any constraint or figure of `plan` does not hold."""
    c = problem.constraints
    h = problem.horizon
    used: dict[str, int] = {}
    by_workload: dict[str, list[WorkloadPlan]] = {}
    for wp in plan.workloads:
        by_workload.setdefault(wp.name, []).append(wp)
    for w in problem.workloads:
        parts = by_workload.get(w.name, [])
        if not parts:
            _fail(problem, f"workload `{w.name}` has no replicas")
        m = cat.model(w.model)
        thr = 0.0
        conc = 0
        for wp in parts:
            layers = sum(s.layers[1] - s.layers[0] + 1 for s in wp.stages)
            if layers != m.num_layers:
                _fail(problem, f"`{w.name}` places {layers} layers, the model has {m.num_layers}")
            expect = 0
            for s in wp.stages:
                if s.layers[0] != expect:
                    _fail(problem, f"`{w.name}` layer ranges are not contiguous")
                expect = s.layers[1] + 1
                dev = cat.accelerator(s.device)
                usable = dev.memory.bytes * (1.0 - c.memory_headroom)
                if s.memory_bytes["total"] > usable * (1 + REL_TOL):
                    _fail(
                        problem,
                        f"`{w.name}` stage on {s.device} needs {s.memory_bytes['total']:.4g} B, "
                        f"usable {usable:.4g} B",
                    )
                if in_fleet(w, problem):
                    used[s.device] = used.get(s.device, 0) + s.tp * wp.replicas
            if isinstance(w, InferenceWorkload):
                T = max(s.seconds_per_step for s in wp.stages)
                S = len(wp.stages)
                per_replica = wp.batch / T
                if not _close(per_replica * wp.replicas, wp.tokens_per_s):
                    _fail(
                        problem,
                        f"`{w.name}` throughput {wp.tokens_per_s} != recomputed {per_replica * wp.replicas}",
                    )
                if (
                    w.max_ms_per_token is not None
                    and w.max_ms_per_token * (1 + REL_TOL) < S * T * 1e3
                ):
                    _fail(
                        problem, f"`{w.name}` time per token {S * T * 1e3:.3f} ms over the ceiling"
                    )
                thr += per_replica * wp.replicas
                conc += wp.batch * S * wp.replicas
            else:
                hours = wp.finish_hours or 0.0
                if w.deadline_hours is not None and hours > w.deadline_hours * (1 + REL_TOL):
                    _fail(
                        problem,
                        f"`{w.name}` finishes in {hours:.2f} h, deadline {w.deadline_hours} h",
                    )
        if isinstance(w, InferenceWorkload):
            if thr < w.min_tokens_per_s * (1 - REL_TOL):
                _fail(problem, f"`{w.name}` serves {thr:.1f} tokens/s < {w.min_tokens_per_s}")
            if conc < w.concurrency:
                _fail(problem, f"`{w.name}` holds {conc} sequences < {w.concurrency}")
    # Bill of materials
    owned = {o.device: 0 for o in c.inventory}
    for o in c.inventory:
        owned[o.device] += o.count
    for line in plan.devices:
        if used.get(line.type, 0) != line.count:
            _fail(
                problem,
                f"{line.type}: plan lists {line.count}, stages use {used.get(line.type, 0)}",
            )
        if (
            line.owned > owned.get(line.type, 0)
            or line.bought != line.count - line.owned
            or line.bought < 0
        ):
            _fail(problem, f"{line.type}: owned/bought split is wrong")
        if (
            c.allowed_devices is not None
            and line.type not in c.allowed_devices
            and line.type not in owned
        ):
            _fail(problem, f"{line.type} is not allowed")
        if line.type in c.excluded_devices:
            _fail(problem, f"{line.type} is excluded")
        if c.require_ecc and not cat.accelerator(line.type).ecc:
            _fail(problem, f"{line.type} has no ECC")
    for node in plan.nodes:
        n = cat.node(node.type)
        cnt = used.get(node.hosts, 0)
        if node.count * n.slots < cnt:
            _fail(problem, f"{node.count} x {node.type} cannot host {cnt} {node.hosts}")
    if c.max_devices is not None and sum(used.values()) > c.max_devices:
        _fail(problem, f"{sum(used.values())} devices > max_devices {c.max_devices}")
    if c.max_rack_units is not None and plan.rack_units > c.max_rack_units:
        _fail(problem, f"{plan.rack_units} rack units > {c.max_rack_units}")
    power = sum(wp.power_w for wp in plan.workloads if wp.kind == "inference")
    power += sum(cat.node(n.type).power_overhead_w * n.count for n in plan.nodes)
    if not _close(power, plan.power_w):
        _fail(problem, f"power {plan.power_w} != recomputed {power}")
    if c.power_w is not None and power * h.pue > c.power_w * (1 + REL_TOL):
        _fail(problem, f"wall power {power * h.pue:.0f} W > cap {c.power_w} W")
    capex = sum(x.bought * x.unit_price_usd for x in plan.devices) + sum(
        n.total_usd for n in plan.nodes
    )
    if h.procurement == "buy" and not _close(capex, plan.capex_usd):
        _fail(problem, f"capex {plan.capex_usd} != recomputed {capex}")
    if c.capex_usd is not None and plan.capex_usd > c.capex_usd * (1 + REL_TOL):
        _fail(problem, f"capex {plan.capex_usd:.0f} > {c.capex_usd}")
    if c.budget_usd is not None and plan.tco_usd > c.budget_usd * (1 + REL_TOL):
        _fail(problem, f"total cost {plan.tco_usd:.0f} > budget {c.budget_usd}")
    if h.procurement == "buy":
        energy = power * energy_usd_per_watt(problem) / h.lifetime_years
        if not _close(energy, plan.opex_usd_per_year):
            _fail(problem, f"opex {plan.opex_usd_per_year} != recomputed {energy}")
