"""Deterministic generator of scaled planning problems for the performance suite.

    from generate import tier_cases
    for case in tier_cases("large"):
        solve_problem(case.problem, cat=case.catalog)

A case is a validated `Problem` plus the `Catalog` it needs (the shipped catalog, extended with
synthetic entries where a tier asks for more device types or model depths than it holds).
Every size is a knob of `Scale`: device types (10/30/60), layers per model (32/80/126),
workloads (1/4/8) and the fleet the throughput floors call for (64/512/4,096 devices). The
tiers are named `small`, `medium` and `large`; each has four variants: serving only or with
training jobs, with or without owned inventory. `sweep_cases` moves one knob at a time around
the medium tier, for scaling curves. Every problem minimizes three-year cost of bought hardware.

Devices: the catalog's purchasable ones first (those with a purchase price and a host), then
synthetic copies of real ones made with pydantic's `model_copy(update=...)`:

- devices `syn-<base>-<k>`: memory size, bandwidth and price scaled by seeded factors; a base
  sold only for rent gets a purchase price of 10,000 hours of rent (near the ratio of the
  catalog's H100 SXM, 27,500 USD and 2.69 USD/h). A base whose host board names the devices it
  accepts gets its own copy of that host, `syn-<base>-<k>-host`.
- models: the catalog's Llama 3.1 8B/70B/405B (32/80/126 layers) and Mixtral 8x7B (32, MoE);
  `syn-mixtral-8x22b-<L>l` is Mixtral 8x22B with 80 or 126 layers (parameter counts scaled).

With the same seed, everything is built identically (no clock, no global random state).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import (
    Design,
    allowed_devices,
    inference_designs,
)
from planner.estimator.economics import device_economics, energy_usd_per_watt
from planner.estimator.training_designs import training_designs
from planner.load import check_names
from planner.schema.catalog import Accelerator, ModelArch, Node
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload

SEED = 20250601
RENT_HOURS_PER_PURCHASE = 10_000  # purchase price of a synthetic variant of a rent-only device

# Real devices first (the order a tier takes them in): the mainstream datacenter parts, then
# workstation and consumer cards. Synthetic variants are drawn from every real device with a
# host and some price.
PREFERRED = (
    "h100-sxm",
    "a100-80gb-sxm",
    "mi300x",
    "b200",
    "gaudi3",
    "gaudi2",
    "rtx-pro-6000-blackwell",
    "rtx-4090",
    "rtx-5090",
    "a100-80gb-pcie",
    "rtx-6000-ada",
    "rtx-a6000",
    "rtx-3090",
    "rx-7900-xtx",
    "m4-max-128gb",
    "dgx-spark",
    "m4-pro-64gb",
    "rtx-5060-ti-16gb",
    "rtx-4060-ti-16gb",
    "rtx-3060-12gb",
)
OWNED = ("a100-80gb-sxm", "h100-sxm")  # inventory variants own these (always in the pool)

# Models by depth: (dense, mixture of experts). A name not in the catalog is made by
# `_deepen` from the base after the colon.
MODELS: dict[int, tuple[str, str]] = {
    32: ("llama-3.1-8b", "mixtral-8x7b"),
    80: ("llama-3.1-70b", "syn-mixtral-8x22b-80l:mixtral-8x22b"),
    126: ("llama-3.1-405b", "syn-mixtral-8x22b-126l:mixtral-8x22b"),
}


@dataclass(frozen=True)
class Scale:
    """The knobs of one generated problem."""

    device_types: int
    layers: int  # per model: 32, 80 or 126
    workloads: int
    fleet: int  # devices the throughput floors and training deadlines call for
    training: bool = False  # some workloads are training jobs
    inventory: bool = False  # some devices are already owned


TIERS: dict[str, Scale] = {
    "small": Scale(device_types=10, layers=32, workloads=1, fleet=64),
    "medium": Scale(device_types=30, layers=80, workloads=4, fleet=512),
    "large": Scale(device_types=60, layers=126, workloads=8, fleet=4096),
}


@dataclass(frozen=True)
class Case:
    """A generated problem, the catalog that names its devices and models, and its knobs."""

    name: str
    tier: str
    scale: Scale
    problem: Problem
    catalog: Catalog


# ------------------------------------------------------------------------------------------------
# Catalog
# ------------------------------------------------------------------------------------------------


def _priced(d: Accelerator) -> bool:
    return d.price.purchase_usd is not None or d.price.rent_usd_per_hour is not None


def _variant(base: Accelerator, k: int, rng: random.Random) -> Accelerator:
    """A synthetic sibling of `base`: memory, bandwidth and price scaled by seeded factors."""
    mem = rng.choice((0.5, 0.75, 1.25, 1.5, 2.0))
    bw = round(rng.uniform(0.7, 1.4), 3)
    # Price follows capability loosely, with noise, so no variant dominates all others.
    price_factor = round((0.5 * mem + 0.5 * bw) * rng.uniform(0.8, 1.25), 3)
    base_price = base.price.purchase_usd or (
        (base.price.rent_usd_per_hour or 1.0) * RENT_HOURS_PER_PURCHASE
    )
    price = base.price.model_copy(
        update={
            "purchase_usd": round(base_price * price_factor, 2),
            "purchase_date": base.price.purchase_date or base.price.rent_date,
        }
    )
    memory = base.memory.model_copy(
        update={
            "size": round(base.memory.size * mem, 3),
            "bandwidth_gb_s": round(base.memory.bandwidth_gb_s * bw, 1),
            # A measured streaming bandwidth scales with the spec (it stays below it).
            "achievable_bandwidth_gb_s": (
                round(base.memory.achievable_bandwidth_gb_s * bw, 1)
                if base.memory.achievable_bandwidth_gb_s
                else None
            ),
        }
    )
    return base.model_copy(
        update={
            "id": f"syn-{base.id}-{k}",
            "name": f"{base.name} (synthetic variant {k}: memory x{mem}, bandwidth x{bw})",
            "memory": memory,
            "price": price,
            "notes": "Synthetic benchmark device, not a product.",
        }
    )


def _host_copy(device: Accelerator, host: Node) -> Node:
    return host.model_copy(
        update={"id": f"{device.id}-host", "name": f"{host.name} (for {device.id})"}
        | {"accepts_devices": [device.id]}
    )


def _deepen(base: ModelArch, new_id: str, layers: int) -> ModelArch:
    """`base` with `layers` identical blocks (the same width, experts and vocabulary)."""
    ratio = layers / base.num_layers
    update: dict[str, Any] = {
        "id": new_id,
        "name": f"{base.name}, {layers} layers (synthetic)",
        "num_layers": layers,
        "published_params": base.published_params * ratio,
        "notes": "Synthetic benchmark model, not a release.",
    }
    if base.published_active_params is not None:
        update["published_active_params"] = base.published_active_params * ratio
    return base.model_copy(update=update)


def device_pool(n: int, seed: int = SEED, base: Catalog | None = None) -> tuple[Catalog, list[str]]:
    """A catalog holding `n` purchasable device types with hosts, and their ids.

    Real devices come first (`PREFERRED` ones in that order, then any other the catalog sells,
    by id); synthetic variants fill the rest.
    """
    cat = base or load_catalog()
    sold = {
        d.id
        for d in cat.accelerators.values()
        if d.price.purchase_usd is not None and cat.host_for(d) is not None
    }
    real = [i for i in PREFERRED if i in sold] + sorted(sold - set(PREFERRED))
    ids = real[:n]
    accelerators = dict(cat.accelerators)
    nodes = dict(cat.nodes)
    bases = sorted(
        (d for d in cat.accelerators.values() if _priced(d) and cat.host_for(d) is not None),
        key=lambda d: d.id,
    )
    rng = random.Random(seed)
    k = 0
    while len(ids) < n:
        b = bases[k % len(bases)]
        k += 1
        syn = _variant(b, k, rng)
        host = cat.host_for(b)
        assert host is not None  # bases are filtered on it
        accelerators[syn.id] = syn
        if host.accepts_devices:
            copy = _host_copy(syn, host)
            nodes[copy.id] = copy
        ids.append(syn.id)
    models = dict(cat.models)
    for dense, moe in MODELS.values():
        for spec in (dense, moe):
            if ":" in spec:
                new_id, base_id = spec.split(":")
                layers = next(L for L, pair in MODELS.items() if spec in pair)
                models[new_id] = _deepen(cat.models[base_id], new_id, layers)
    out = Catalog(
        accelerators=accelerators,
        nodes=nodes,
        links=cat.links,
        models=models,
        references=cat.references,
        architectures=cat.architectures,
        engines=cat.engines,
        support=cat.support,
    )
    return out, ids


def _model_ids(layers: int) -> tuple[str, str]:
    dense, moe = MODELS[layers]
    return dense, moe.split(":")[0]


# ------------------------------------------------------------------------------------------------
# Workloads
# ------------------------------------------------------------------------------------------------

# Serving templates, cycled: (weights, kv, context, prompt, ms per token ceiling, ttft ceiling).
SERVING = (
    ("fp8", "fp8", 8192, 1500, 60.0, None),
    ("fp16", "fp8", 4096, 1000, 80.0, None),
    ("awq-int4", "fp8", 16384, 4000, 100.0, 4.0),
    ("fp8", "fp16", 2048, 500, 50.0, None),
)


def _workload_plan(scale: Scale) -> list[tuple[str, bool]]:
    """(kind, moe) per workload: training jobs are every fourth workload (at least one when
    asked); serving models alternate dense and MoE, training jobs too (full, then LoRA)."""
    kinds = []
    for i in range(scale.workloads):
        train = scale.training and (i % 4 == 3 or (i == 0 and scale.workloads < 4))
        moe = (i // 4) % 2 == 1 if train else i % 2 == 1
        kinds.append(("training" if train else "inference", moe))
    return kinds


def _cheapest_per_token(
    designs: list[Design], problem: Problem, cat: Catalog, devs: list[Accelerator]
) -> Design:
    """The design with the lowest (devices + host share + energy) dollars per token/s."""
    econ = device_economics(problem, cat, devs)
    per_w = energy_usd_per_watt(problem)

    def usd(d: Design) -> float:
        dev = sum(
            n * (econ[x].unit_usd + econ[x].node.price_usd / econ[x].slots)
            for x, n in d.devices.items()
        )
        return (dev + d.power_w * per_w) / d.tokens_per_s

    return min(designs, key=usd)


def _serving(i: int, model: str, scale: Scale, rng: random.Random) -> dict[str, Any]:
    weights, kv, context, prompt, ms, ttft = SERVING[i % len(SERVING)]
    w: dict[str, Any] = {
        "name": f"serve-{i}",
        "kind": "inference",
        "model": model,
        "weights": weights,
        "kv": kv,
        "context_tokens": context,
        "prompt_tokens": prompt,
        "concurrency": 64,
        "min_tokens_per_s": 1.0,
        # Deeper models get proportionally more time per token.
        "max_ms_per_token": round(ms * max(1.0, scale.layers / 80) * rng.uniform(0.9, 1.1), 1),
    }
    if ttft is not None:
        w["max_ttft_s"] = ttft
    return w


def _training(i: int, model: str, moe: bool) -> dict[str, Any]:
    return {
        "name": f"train-{i}",
        "kind": "training",
        "model": model,
        "method": "lora" if moe else "full",
        "optimizer": "adamw",
        "zero_stage": 1,
        "seq_len": 4096,
        "micro_batch": 1,
        "recompute": "selective",
        "token_budget": 1e9,
        "deadline_hours": 24 * 14,
    }


def _problem(name: str, scale: Scale, ids: list[str], workloads: list[dict[str, Any]]) -> Problem:
    constraints: dict[str, Any] = {"allowed_devices": ids, "network": "ib-ndr"}
    if scale.inventory:
        each = max(8, scale.fleet // 16 // 8 * 8)  # a sixteenth of the fleet per owned type
        constraints["inventory"] = [{"device": d, "count": each} for d in OWNED]
    return Problem.model_validate(
        {
            "name": name,
            "description": (
                f"Generated: {scale.device_types} device types, {scale.layers}-layer models, "
                f"{scale.workloads} workloads, about {scale.fleet} devices"
                + (", with training" if scale.training else "")
                + (", with owned devices" if scale.inventory else "")
                + "."
            ),
            "workloads": workloads,
            "constraints": constraints,
            "horizon": {"lifetime_years": 3, "utilization": 0.7, "procurement": "buy"},
            # Every device the pool sells may be bought, at any price condition (the catalog's
            # refurbished and used prices included), so a tier has its stated device types.
            "market": {"conditions": ["new", "refurbished", "used"]},
            "objective": {"goal": "min_cost"},
        }
    )


def generate(name: str, scale: Scale, *, tier: str = "", seed: int = SEED) -> Case:
    """One problem at `scale`; the same (scale, seed) always gives the same case.

    Throughput floors and training budgets are calibrated so that the cheapest design of each
    workload (devices, host share and energy per token/s) needs an equal share of `scale.fleet`.
    """
    # Seeded by the knobs, not the name: the same scale is the same problem under any name.
    rng = random.Random(f"{seed}:{sorted(scale.__dict__.items())}")
    cat, ids = device_pool(scale.device_types, seed)
    dense, moe = _model_ids(scale.layers)
    plan = _workload_plan(scale)
    drafts = [
        _training(i, moe if is_moe else dense, is_moe)
        if kind == "training"
        else _serving(i, moe if is_moe else dense, scale, rng)
        for i, (kind, is_moe) in enumerate(plan)
    ]
    draft = _problem(name, scale, ids, drafts)
    devs = allowed_devices(draft, cat)
    share = scale.fleet / scale.workloads
    final = []
    for w, spec in zip(draft.workloads, drafts, strict=True):
        spec = dict(spec)
        if isinstance(w, InferenceWorkload):
            # Calibrate at a high concurrency so every batch level is in play.
            probe = w.model_copy(update={"concurrency": 4096})
            best = _cheapest_per_token(inference_designs(probe, draft, cat, devs), draft, cat, devs)
            per_device = best.tokens_per_s / sum(best.devices.values())
            floor = share * per_device * rng.uniform(0.85, 1.0)
            spec["min_tokens_per_s"] = float(round(floor, -1))
            # Each sequence streams at twice the slowest rate the latency ceiling allows.
            per_seq = 2 * 1000.0 / spec["max_ms_per_token"]
            spec["concurrency"] = max(1, int(floor / per_seq))
        else:
            assert isinstance(w, TrainingWorkload)
            designs = training_designs(
                w.model_copy(update={"deadline_hours": None}), draft, cat, devs
            )
            best = _cheapest_per_token(designs, draft, cat, devs)
            per_device = best.tokens_per_s / sum(best.devices.values())
            hours = float(spec["deadline_hours"])
            budget = share * per_device * hours * 3600 * rng.uniform(0.6, 0.8)
            spec["token_budget"] = float(f"{budget:.3g}")
        final.append(spec)
    problem = _problem(name, scale, ids, final)
    check_names(problem, cat)
    return Case(name, tier, scale, problem, cat)


def tier_scales(tier: str) -> list[tuple[str, Scale]]:
    """(name, scale) of a tier's four variants: serve, serve-owned, train, train-owned."""
    scale = TIERS[tier]
    return [
        (f"{tier}-serve", scale),
        (f"{tier}-serve-owned", Scale(**{**scale.__dict__, "inventory": True})),
        (f"{tier}-train", Scale(**{**scale.__dict__, "training": True})),
        (
            f"{tier}-train-owned",
            Scale(**{**scale.__dict__, "training": True, "inventory": True}),
        ),
    ]


def tier_cases(tier: str, seed: int = SEED) -> list[Case]:
    """The four variants of a tier: serve, serve-owned, train, train-owned."""
    return [generate(n, s, tier=tier, seed=seed) for n, s in tier_scales(tier)]


# One knob at a time around the medium tier's serving problem (its knobs are the base point).
SWEEP_BASE = "medium"
SWEEPS: dict[str, tuple[int, ...]] = {
    "device_types": (10, 30, 60),
    "layers": (32, 80, 126),
    "workloads": (1, 4, 8),
    "fleet": (64, 512, 4096),
}


def sweep_cases() -> list[tuple[str, int, str, Scale]]:
    """(knob, value, case name, scale) for each point of each sweep; the base point, shared by
    every sweep, is `sweep-base` (the same problem as `medium-serve`)."""
    base = TIERS[SWEEP_BASE]
    out = []
    for knob, values in SWEEPS.items():
        for v in values:
            scale = Scale(**{**base.__dict__, knob: v})
            name = "sweep-base" if scale == base else f"sweep-{knob.replace('_', '-')}-{v}"
            out.append((knob, v, name, scale))
    return out
