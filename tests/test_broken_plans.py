"""A corpus of plans each breaking one constraint (the problem tightened under a solved plan, or
the plan edited), each caught by `planner verify` with a message naming it; the registry of
structural checks covers every constraint field of the schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from plan_docs import get_path, solved_doc

from planner.catalog import load_catalog
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import Constraints, InferenceWorkload, Problem, TrainingWorkload
from planner.verify_plan import plan_failures
from planner.verify_rules import CHECKED_IN_VERIFY, RULES

Edit = Callable[[dict[str, Any]], None]


def setp(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        node, key = get_path(doc, path)
        node[key] = value(node[key]) if callable(value) else value

    return edit


def problem_set(path: str, value: Any) -> Edit:
    return setp(f"problem_document.{path}", value)


def exclude_own_device(doc: dict[str, Any]) -> None:
    """Exclude, in the plan's problem, the first device type the plan holds (whichever the
    optimum picked)."""
    doc["problem_document"]["constraints"]["excluded_devices"] = [doc["devices"][0]["type"]]


def failures(name: str, edits: list[Edit]) -> list[str]:
    """Apply `edits` to the example's plan document, re-hash its problem (so only the edit
    differs) and verify it."""
    doc = json.loads(solved_doc(name))
    for edit in edits:
        edit(doc)
    cat = load_catalog()
    problem = Problem.model_validate(doc["problem_document"])
    rest = {k: v for k, v in doc.items() if k != "problem_document"}
    pf = plan_from_data(rest | {"problem_document": doc["problem_document"]}, name)
    fresh = plan_document(pf.plan, problem, cat)
    for key in ("gap", "summary"):
        fresh[key] = doc.get(key)
    return plan_failures(plan_from_data(json.loads(dumps_plan(fresh)), name), cat)


CORPUS: dict[str, tuple[str, list[Edit], str]] = {
    "ttft over max_ttft_s": (
        "chat-70b",
        [problem_set("workloads.0.max_ttft_s", 0.1)],
        "max_ttft_s",
    ),
    "time per token over max_ms_per_token": (
        "chat-70b",
        [problem_set("workloads.0.max_ms_per_token", 1.0)],
        "max_ms_per_token",
    ),
    "tp over PCIe": (
        "tokens-per-joule-10kw",  # H100 PCIe, tensor parallel 4 over PCIe in an 8-slot server
        [problem_set("constraints.tensor_parallel_over_pcie", False)],
        "tensor_parallel_over_pcie",
    ),
    "host outside allowed_hosts": (
        "tokens-per-joule-10kw",  # its H100 PCIe cards sit in an 8-slot PCIe server
        [problem_set("constraints.allowed_hosts", ["pcie-server-4"])],
        "allowed_hosts",
    ),
    "tp > max_tensor_parallel": (
        "chat-70b",
        [problem_set("constraints.max_tensor_parallel", 1)],
        "max_tensor_parallel",
    ),
    "stages > max_stages": ("chat-70b", [problem_set("constraints.max_stages", 1)], "max_stages"),
    "vendor outside vendors": (
        "chat-70b",
        [problem_set("constraints.vendors", ["nvidia"])],
        "vendors",
    ),
    "two-type pipeline": (
        "chat-70b",
        [
            problem_set("constraints.heterogeneous_pipelines", False),
            setp("workloads.0.stages.1.device", "mi325x"),
        ],
        "heterogeneous_pipelines",
    ),
    "nvlink between hosts when network is eth": (
        "chat-and-code",
        [setp("links", lambda links: [x for x in links if not x.startswith("eth")] + ["nvlink4"])],
        "network",
    ),
    "stage times of a faster network than eth-1g": (
        "chat-and-code",
        [problem_set("constraints.network", "eth-1g")],
        "network",
    ),
    "intra-node link as the network (own-8-a100 --set network=nvlink4)": (
        "own-8-a100",
        [problem_set("constraints.network", "nvlink4")],
        "intra-node",
    ),
    "memory understated": (
        "chat-70b",
        [setp("workloads.0.stages.0.memory_bytes", lambda m: {k: v * 0.05 for k, v in m.items()})],
        "memory",
    ),
    "memory over the headroom": (
        "chat-70b",
        [problem_set("constraints.memory_headroom", 0.95)],
        "memory_headroom",
    ),
    "power understated under a cap": (
        "tokens-per-joule-10kw",
        [setp("power_w", lambda v: v / 2), setp("wall_power_w", lambda v: v / 2)],
        "power",
    ),
    "power over the cap": (
        "tokens-per-joule-10kw",
        [problem_set("constraints.power_w", 100.0)],
        "power_w",
    ),
    "device count edited": ("chat-70b", [setp("devices.0.count", 2)], "count"),
    "total cost $1": (
        "chat-70b",
        [setp("costs.total_usd", 1.0), setp("tco_usd", 1.0)],
        "total_usd",
    ),
    "tco halved": ("chat-70b", [setp("tco_usd", lambda v: v / 2)], "tco_usd"),
    "over budget": ("chat-70b", [problem_set("constraints.budget_usd", 1000.0)], "budget_usd"),
    "over capex ceiling": ("chat-70b", [problem_set("constraints.capex_usd", 1000.0)], "capex"),
    "over max_devices": ("chat-70b", [problem_set("constraints.max_devices", 1)], "max_devices"),
    "device not allowed": (
        "chat-70b",
        [problem_set("constraints.allowed_devices", ["h100-sxm"])],
        "allowed_devices",
    ),
    "device excluded": (
        "chat-70b",
        [exclude_own_device],
        "excluded",
    ),
    "no ECC": ("compute-owners-pool", [problem_set("constraints.require_ecc", True)], "ECC"),
    "over rack units": (
        "chat-70b",
        [problem_set("constraints.max_rack_units", 1)],
        "max_rack_units",
    ),
    "over the carbon cap": (
        "carbon-cap",
        [problem_set("constraints.max_carbon_kgco2e", 1.0)],
        "max_carbon_kgco2e",
    ),
    "owned beyond the inventory": (
        "compute-owners-pool",
        [problem_set("constraints.inventory", [])],
        "inventory",
    ),
    "context beyond the model": (
        "chat-70b",
        [problem_set("workloads.0.context_tokens", 1_000_000)],
        "context_tokens",
    ),
    "deadline missed": (
        "train-13b-2m",
        [problem_set("workloads.0.deadline_hours", 1.0)],
        "deadline_hours",
    ),
    "throughput floor raised": (
        "chat-70b",
        [problem_set("workloads.0.min_tokens_per_s", 1e7)],
        "min_tokens_per_s",
    ),
    "throughput claimed 1e9": ("chat-70b", [setp("workloads.0.tokens_per_s", 1e9)], "throughput"),
    "more sequences than slots": (
        "chat-70b",
        [setp("workloads.0.sequences", lambda v: v * 100)],
        "sequences",
    ),
    "step time understated": (
        "chat-70b",
        [setp("workloads.0.stages.0.seconds_per_step", lambda v: v / 3)],
        "workloads.0.stages.0.seconds_per_step",
    ),
    # Figures the verifier once read from the plan instead of recomputing them.
    "training throughput doubled with its finish time": (
        "train-13b-2m",
        [
            setp("workloads.0.tokens_per_s", lambda v: v * 2),
            setp("workloads.0.finish_hours", lambda v: v / 2),
        ],
        "workloads.0.tokens_per_s",
    ),
    "training power halved": (
        "train-13b-2m",
        [setp("workloads.0.power_w", lambda v: v / 2)],
        "workloads.0.power_w",
    ),
    "training step time": (
        "train-13b-2m",
        [setp("workloads.0.stages.1.seconds_per_step", lambda v: v / 2)],
        "workloads.0.stages.1.seconds_per_step",
    ),
    "training micro-batch": (
        "qlora-8b-deadline",
        [setp("workloads.0.batch", lambda v: v * 4)],
        "workloads.0.batch",
    ),
    "training stages of two devices": (
        "train-13b-2m",
        [setp("workloads.0.stages.1.device", "h100-sxm")],
        "workloads.0.stages.1",
    ),
    "unit price": (
        "chat-70b",
        [setp("devices.0.unit_price_usd", lambda v: v / 2)],
        "devices.0.unit_price_usd",
    ),
    "rent rate": (
        "rent-the-peak",
        [setp("devices.0.rent_usd_per_hour.on_demand", lambda v: v / 2)],
        "devices.0.rent_usd_per_hour.on_demand",
    ),
    "hosts understated": (
        "chat-and-code",
        [setp("nodes.0.count", lambda v: v - 1)],
        "nodes.0.count",
    ),
    "host rack units": ("chat-70b", [setp("nodes.0.rack_units", 1)], "nodes.0.rack_units"),
    # A baseboard or kit (the example buys a Gaudi kit or an OAM platform) is sold with every
    # slot filled: 2 devices bought in it is no purchase.
    "baseboard bought in part": (
        "chat-70b",
        [setp("devices.0.bought", 2)],
        "is sold whole",
    ),
    "host that cannot hold the device": (
        "chat-70b",
        [setp("nodes.0.type", "pcie-server-8")],
        "`nodes.0.type`: pcie-server-8 cannot host",
    ),
    "hidden-state bytes": (
        "chat-70b",
        [setp("workloads.0.stages.0.boundary_bytes_per_step", 1.0)],
        "workloads.0.stages.0.boundary_bytes_per_step",
    ),
    "tokens per joule at capacity": (
        "chat-70b",
        [setp("workloads.0.tokens_per_joule_at_capacity", lambda v: v * 3)],
        "workloads.0.tokens_per_joule_at_capacity",
    ),
    "cost per token at capacity": (
        "chat-70b",
        [setp("workloads.0.usd_per_million_tokens_at_capacity", lambda v: v / 3)],
        "workloads.0.usd_per_million_tokens_at_capacity",
    ),
    "token budget": ("chat-70b", [setp("workloads.0.token_budget", 1)], "workloads.0.token_budget"),
    "launch command edited": (
        "chat-70b",
        [setp("workloads.0.recipe.command", "rm -rf /")],
        "workloads.0.recipe.command",
    ),
    "launch command on too few machines": (
        "chat-70b",
        [setp("workloads.0.recipe.command", lambda c: c.split("  #")[0])],
        "workloads.0.recipe.command",
    ),
    "devices at work in a period": (
        "rent-the-peak",
        [setp("periods.0.devices", lambda d: {k: {**v, "on-premises": 1} for k, v in d.items()})],
        "on-premises",
    ),
    "fleet tokens per joule": (
        "chat-70b",
        [setp("tokens_per_joule", lambda v: v * 2)],
        "`tokens_per_joule`",
    ),
    "carbon per token": (
        "carbon-cap",
        [setp("carbon.sci_g_per_million_tokens", lambda v: v / 2)],
        "carbon.sci_g_per_million_tokens",
    ),
    "slack overstated": ("chat-70b", [setp("slack.latency:chat", 0.5)], "slack.latency:chat"),
    "binding limit hidden": (
        "chat-product",
        [setp("binding_constraints", [])],
        "binding_constraints",
    ),
    "objective off its figure": (
        "chat-70b",
        [setp("objective", lambda v: v / 2), setp("bound", lambda v: v / 2)],
        "`objective`",
    ),
    # Capacity goals were checked against nothing: a throughput a tenth above what the plan's
    # replicas make passed.
    "throughput objective off its capacity": (
        "max-throughput-500k",
        [setp("objective", lambda v: v * 1.1), setp("bound", lambda v: v * 1.1)],
        "`objective`",
    ),
    "tokens per joule objective off its capacity": (
        "tokens-per-joule-10kw",
        [setp("objective", lambda v: v * 1.1), setp("bound", lambda v: v * 1.1)],
        "`objective`",
    ),
    "grid intensity of a period": (
        "carbon-cap",
        [setp("periods.0.gco2e_per_kwh", lambda v: v / 2)],
        "periods.0.gco2e_per_kwh",
    ),
    # A training job's figures on a serving workload, and sequences on a request mix (the
    # planner writes none there): each set to 0 once verified, exit 0.
    "a serving workload's finish time": (
        "chat-70b",
        [setp("workloads.0.finish_hours", 0)],
        "workloads.0.finish_hours`: stated 0.0; this serving workload has none",
    ),
    "a serving workload's job cost": (
        "chat-70b",
        [setp("workloads.0.job_usd", 0)],
        "workloads.0.job_usd`: stated 0.0; this serving workload has none",
    ),
    "sequences of a request mix": (
        "p95-latency-70b",
        [setp("workloads.0.sequences", 0)],
        "workloads.0.sequences`: stated 0; this serving workload has none",
    ),
}


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_each_broken_plan_is_caught_naming_it(case: str) -> None:
    name, edits, word = CORPUS[case]
    assert failures(name, []) == [], "the unbroken plan must hold"
    found = failures(name, edits)
    assert any(word.lower() in f.lower() for f in found), (case, found)


def test_every_constraint_field_has_a_check() -> None:
    fields = {f"constraints.{k}" for k in Constraints.model_fields}
    for model in (InferenceWorkload, TrainingWorkload):
        fields |= {
            f"workloads.{k}"
            for k in model.model_fields
            if k.startswith(("max_", "min_"))
            or k in ("deadline_hours", "concurrency", "context_tokens", "requests_per_s")
        }
    missing = sorted(fields - set(RULES) - set(CHECKED_IN_VERIFY))
    assert not missing, f"constraint fields with no check: {missing}"
