"""docs/support-matrix.md, generated from the catalog's support matrix (support.yaml) so the
document cannot drift from what the planner uses: `python -m planner.report.support_doc` prints
it; a test holds the committed file to this output."""

from __future__ import annotations

import sys

from planner.catalog import Catalog, default_catalog_dir, load_catalog
from planner.schema.support import Engine


def _cell(items: list[str]) -> str:
    return ", ".join(items) if items else "-"


def _launch(per_layer_us: float, per_step_us: float) -> str:
    """An engine's host launch time without CUDA graphs (Engine.launch_us_per_layer, _step)."""
    if not per_layer_us and not per_step_us:
        return "-"
    return f"{per_layer_us:g} us, {per_step_us:g} us"


def _tp_cell(e: Engine) -> str:
    """Whether the engine's tensor parallelism is planned, and where it is not
    (support.tensor_parallel_refusal)."""
    if not e.tensor_parallel:
        return "no"
    limits = []
    if e.tensor_parallel_backends is not None:
        limits.append(f"on {', '.join(e.tensor_parallel_backends)} only")
    if e.tensor_parallel_single_stage:
        limits.append("one stage of all the replica's devices")
    refused = (["multi-head latent attention"] if e.tensor_parallel_refuses_mla else []) + list(
        e.tensor_parallel_excluded_families
    )
    if refused:
        limits.append(f"not for {', '.join(refused)}")
    return f"yes ({'; '.join(limits)})" if limits else "yes"


def support_markdown(cat: Catalog) -> str:
    """The matrix as Markdown: architectures with their devices, engines, then every row with
    its source and date, then the sources."""
    devices: dict[str, list[str]] = {}
    for d in cat.accelerators.values():
        devices.setdefault(d.architecture, []).append(d.id)
    lines = [
        "# Support matrix",
        "",
        "Generated from `planner/catalog_data/support.yaml` by "
        "`python -m planner.report.support_doc > docs/support-matrix.md`; do not edit by hand.",
        "",
        "A design runs a workload's weight and KV-cache formats on a device only under an engine "
        "a row below lists for the device's architecture. A workload names its `engine`, or "
        "each device takes the first engine by rank that runs its formats (rows marked "
        "experimental only when the engine is named; vLLM's experimental GGUF rows not even then: "
        "its own GGUF kernels are timed by no measurement, support.gguf_refusal).",
        "",
        "## Architectures",
        "",
        "| architecture | vendor | line | generation | released | end of life | devices |",
        "|---|---|---|---:|---|---|---|",
    ]
    for a in cat.architectures.values():
        lines.append(
            f"| {a.id} | {a.vendor} | {a.family} | {a.generation:g} | {a.released} "
            f"| {a.end_of_life or '-'} | {_cell(devices.get(a.id, []))} |"
        )
    lines += [
        "",
        "## Engines",
        "",
        "| rank | engine | name | tensor parallel | across machines | pipeline parallel "
        "| across vendors | prefill kernels "
        "| time per hop between machines | time per exchange between machines "
        "| host time per generated token | host launch time per block, per step |",
        "|---:|---|---|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    for e in sorted(cat.engines.values(), key=lambda e: (e.rank, e.id)):
        yes = {True: "yes", False: "no"}
        lines.append(
            f"| {e.rank} | {e.id} | {e.name}{' (only where named)' if e.named_only else ''} "
            f"| {_tp_cell(e)} | {yes[e.tensor_parallel_across_machines]} "
            f"| {yes[e.pipeline_parallel]} | {yes[e.cross_stack_pipeline]} | {e.kernels} "
            f"| {_hop_cell(e)} "
            f"| {_exchange_cell(e)} "
            f"| {f'{e.host_us_per_token:g} us' if e.host_us_per_token else '-'} "
            f"| {_launch(e.launch_us_per_layer, e.launch_us_per_step)} |"
        )
    lines += [
        "",
        "## What runs where",
        "",
        "| engine | backend | architectures | weights | KV cache | source | date |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in cat.support:
        flag = " (experimental)" if r.experimental else ""
        lines.append(
            f"| {r.engine}{flag} | {r.backend} | {_cell(r.architectures)} | {_cell(r.weights)} "
            f"| {_cell(r.kv)} | [{r.source}] | {r.date} |"
        )
    cited = dict.fromkeys(
        [r.source for r in cat.support]
        + [
            s
            for x in (*cat.architectures.values(), *cat.engines.values())
            for s in x.sources.values()
        ]
    )
    lines += ["", "## Sources", ""]
    for key in cited:
        ref = cat.references[key]
        lines.append(f"- [{key}]: {ref.title}, {ref.url or 'no address'} ({ref.date or 'undated'})")
    lines.append("")
    for key in cited:
        url = cat.references[key].url
        if url:
            lines.append(f"[{key}]: {url}")
    return "\n".join(lines) + "\n"


def _hop_cell(e: Engine) -> str:
    """The engine's own time per hop between machines: a constant per hop, or its RPC
    backend's round trips per remote stage (planner.estimator.rpc_hop)."""
    parts = [f"{e.hop_overhead_us / 1e3:g} ms"] if e.hop_overhead_us else []
    if e.rpc_round_trips and e.rpc_round_trip_us:
        rpc = f"{e.rpc_round_trips} x {e.rpc_round_trip_us / 1e3:g} ms per remote stage"
        parts.append(rpc + (", its graph re-sent" if e.rpc_graph_resent else ""))
    return "; ".join(parts) or "-"


def _exchange_cell(e: Engine) -> str:
    """The engine's own time per exchange, and the machine it was measured on where it is
    scaled to others (planner.estimator.support.exchange_overhead_s)."""
    if not e.exchange_overhead_us:
        return "-"
    cell = f"{e.exchange_overhead_us / 1e3:g} ms"
    if e.task_sync_us:
        per = ", ".join(f"{d} {us:g} us" for d, us in sorted(e.task_sync_us.items()))
        cell += f" on {e.exchange_overhead_device}, scaled by each machine's task time ({per})"
    return cell


def main() -> None:
    sys.stdout.write(support_markdown(load_catalog(default_catalog_dir())))


if __name__ == "__main__":
    main()
