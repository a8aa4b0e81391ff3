"""The `planner` command line: the only module that reads user files and prints."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console

from planner.catalog import load_catalog
from planner.catalog_schema import ModelArch
from planner.errors import InputError, PlannerError
from planner.estimator.cost import Economics
from planner.estimator.devices import device_table
from planner.estimator.estimate import (
    Estimate,
    InferenceQuery,
    TrainingQuery,
    estimate_inference,
    estimate_training,
)
from planner.estimator.estimate import Task as EstTask
from planner.estimator.memory import Method, Optimizer, Recompute, TrainingSetup
from planner.hf_config import load_hf_config
from planner.measurements import load_measurements
from planner.report_estimate import (
    catalog_rows,
    entry_table,
    estimate_dict,
    estimate_tables,
    estimates_table,
    table_of,
)

app = typer.Typer(
    help="Which accelerators to buy or rent for LLM workloads, how many, and which layers run where.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(
    help="Browse the catalog of devices, models, nodes and links.", no_args_is_help=True
)
app.add_typer(catalog_app, name="catalog")

out = Console(soft_wrap=False, width=160)
err = Console(stderr=True)


class Format(StrEnum):
    table = "table"
    json = "json"


class Kind(StrEnum):
    devices = "devices"
    models = "models"
    nodes = "nodes"
    links = "links"


class Task(StrEnum):
    inference = "inference"
    full = "full"
    lora = "lora"
    qlora = "qlora"


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn planner errors into a one-line message on stderr and the documented exit code."""
    try:
        yield
    except PlannerError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, markup=True)
        raise typer.Exit(e.exit_code) from None


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


# ------------------------------------------------------------------------------------------------
# catalog
# ------------------------------------------------------------------------------------------------


@catalog_app.command("list")
def catalog_list(
    kind: Annotated[Kind, typer.Argument(help="What to list.")],
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """List catalog entries with their key figures."""
    with user_errors():
        rows = catalog_rows(load_catalog(), kind.value)
        if fmt is Format.json:
            emit_json(rows)
        else:
            out.print(table_of(rows, f"{kind.value} ({len(rows)})"))


@catalog_app.command("show")
def catalog_show(
    name: Annotated[str, typer.Argument(help="A device, model, node or link id.")],
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """Show every field of one catalog entry, with its sources."""
    with user_errors():
        cat = load_catalog()
        for table in (cat.accelerators, cat.models, cat.nodes, cat.links):
            if name in table:
                item = table[name]
                data = item.model_dump(mode="json")
                data["sources"] = {
                    k: {"id": v, **cat.references[v].model_dump(exclude_none=True)}
                    for k, v in item.sources.items()
                }
                if fmt is Format.json:
                    emit_json(data)
                else:
                    out.print(entry_table(data, name))
                return
        everything = [*cat.accelerators, *cat.models, *cat.nodes, *cat.links]
        from planner.errors import did_you_mean

        raise InputError(f"nothing named `{name}` in the catalog{did_you_mean(name, everything)}")


# ------------------------------------------------------------------------------------------------
# estimate
# ------------------------------------------------------------------------------------------------


def resolve_model(name: str) -> ModelArch:
    """A catalog id, or a path to a Hugging Face config.json (or a folder holding one)."""
    path = Path(name)
    if name.endswith(".json") or path.is_dir() or "/" in name:
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise InputError(
                f"{path}: no such file (give a catalog model id or a config.json path)"
            )
        return load_hf_config(path)
    return load_catalog().model(name)


def parse_overrides(pairs: list[str]) -> dict[str, dict[str, float]]:
    """`[class-or-device:]factor=value` -> {scope: {factor: value}} ('*' for every device)."""
    result: dict[str, dict[str, float]] = {}
    for pair in pairs:
        if "=" not in pair:
            raise InputError(f"--efficiency `{pair}`: expected FACTOR=VALUE or DEVICE:FACTOR=VALUE")
        key, raw = pair.split("=", 1)
        scope, _, factor = key.rpartition(":")
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"--efficiency `{pair}`: `{raw}` is not a number") from None
        result.setdefault(scope or "*", {})[factor] = value
    return result


@app.command()
def estimate(
    model: Annotated[
        str, typer.Option("--model", "-m", help="Catalog model id, or a path to a config.json.")
    ],
    device: Annotated[str, typer.Option("--device", "-d", help="Catalog device id, or `all`.")],
    task: Annotated[
        Task, typer.Option(help="inference, or training: full, lora, qlora.")
    ] = Task.inference,
    weights: Annotated[
        str,
        typer.Option(help="Weight format: fp16, bf16, fp8, int8, awq-int4, q4_0, q4_k_m, nf4..."),
    ] = "fp16",
    kv: Annotated[str, typer.Option(help="KV-cache format: fp16, fp8, q8_0...")] = "fp16",
    context: Annotated[
        int, typer.Option(min=1, help="Tokens held per sequence in the KV cache.")
    ] = 4096,
    batch: Annotated[int, typer.Option(min=1, help="Concurrent sequences (inference).")] = 1,
    prompt: Annotated[
        int, typer.Option(min=1, help="Prompt tokens, for time to first token.")
    ] = 1024,
    seq: Annotated[int, typer.Option(min=1, help="Training sequence length.")] = 4096,
    micro_batch: Annotated[
        int, typer.Option("--micro-batch", min=1, help="Training micro-batch per device.")
    ] = 1,
    optimizer: Annotated[str, typer.Option(help="adamw, adamw-8bit, sgd, adafactor.")] = "adamw",
    zero: Annotated[
        int, typer.Option(min=0, max=3, help="ZeRO stage across data-parallel ranks.")
    ] = 0,
    dp: Annotated[int, typer.Option(min=1, help="Data-parallel ranks (for ZeRO sharding).")] = 1,
    recompute: Annotated[
        str | None,
        typer.Option(
            help="Activation recomputation: none, selective, full (default: full for LoRA/QLoRA, selective otherwise)."
        ),
    ] = None,
    lora_rank: Annotated[int, typer.Option(min=1, help="LoRA rank.")] = 16,
    tokens: Annotated[float | None, typer.Option(help="Training token budget (e.g. 2e9).")] = None,
    lifetime_years: Annotated[
        float, typer.Option(min=0.1, help="Depreciation period of bought devices.")
    ] = 4.0,
    utilization: Annotated[
        float, typer.Option(min=0.01, max=1.0, help="Share of hours doing useful work.")
    ] = 0.6,
    electricity: Annotated[
        float, typer.Option(min=0.0, help="Electricity price, USD per kWh.")
    ] = 0.12,
    pue: Annotated[
        float, typer.Option(min=1.0, help="Power usage effectiveness of the site.")
    ] = 1.3,
    efficiency: Annotated[
        list[str] | None,
        typer.Option(help="Override an efficiency factor: [DEVICE_OR_CLASS:]FACTOR=VALUE."),
    ] = None,
    measured: Annotated[
        Path | None, typer.Option(help="YAML table of measured figures that replace estimates.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """Does a model fit on a device, how fast does it run, and what does it cost?"""
    with user_errors():
        cat = load_catalog()
        arch = resolve_model(model)
        devices = list(cat.accelerators.values()) if device == "all" else [cat.accelerator(device)]
        ov = parse_overrides(efficiency or [])
        star = ov.pop("*", {})
        if star:
            for d in devices:
                ov[d.id] = {**star, **ov.get(d.id, {})}
        table = device_table(devices, ov)
        econ = Economics(
            lifetime_years=lifetime_years,
            utilization=utilization,
            electricity_usd_per_kwh=electricity,
            pue=pue,
        )
        rows: list[Estimate]
        if task is Task.inference:
            mfile = load_measurements(measured) if measured else None
            q = InferenceQuery(weights=weights, kv=kv, context=context, batch=batch, prompt=prompt)
            rows = estimate_inference(arch, table, q, econ, mfile)
        else:
            rc = recompute or ("full" if task in (Task.lora, Task.qlora) else "selective")
            if rc not in ("none", "selective", "full"):
                raise InputError(f"--recompute `{rc}`: choose none, selective or full")
            if optimizer not in ("adamw", "adamw-8bit", "sgd", "adafactor"):
                raise InputError(
                    f"--optimizer `{optimizer}`: choose adamw, adamw-8bit, sgd or adafactor"
                )
            setup = TrainingSetup(
                method=cast(Method, task.value),
                optimizer=cast(Optimizer, optimizer),
                zero_stage=zero,
                data_parallel=dp,
                seq_len=seq,
                micro_batch=micro_batch,
                recompute=cast(Recompute, rc),
                lora_rank=lora_rank,
            )
            rows = estimate_training(
                arch,
                table,
                cast(EstTask, task.value),
                TrainingQuery(setup=setup, token_budget=tokens),
                econ,
            )
        if fmt is Format.json:
            emit_json(
                [estimate_dict(r) for r in rows] if device == "all" else estimate_dict(rows[0])
            )
        elif device == "all":
            out.print(estimates_table(rows))
        else:
            for t in estimate_tables(rows[0]):
                out.print(t)
        if device != "all" and not rows[0].devices_needed:
            raise typer.Exit(3)


@app.command()
def solve(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Also write the plan as JSON to this file.")
    ] = None,
    time_limit: Annotated[
        float, typer.Option("--time-limit", min=0.1, help="Seconds the solver may take.")
    ] = 30.0,
    workers: Annotated[
        int,
        typer.Option(min=1, max=64, help="Solver threads (1 is deterministic and fastest here)."),
    ] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Solver random seed.")] = 0,
) -> None:
    """Solve a problem file: the optimal bill of materials, layer map and figures."""
    with user_errors():
        from planner.report_plan import plan_renderable
        from planner.solve import load_problem, solve_problem

        prob = load_problem(problem)
        plan = solve_problem(prob, time_limit=time_limit, workers=workers, seed=seed)
        data = plan.to_dict()
        if out_path is not None:
            write_atomic(out_path, json.dumps(data, indent=2, default=str) + "\n")
        if fmt is Format.json:
            emit_json(data)
        else:
            out.print(plan_renderable(plan))
        if plan.status == "INFEASIBLE":
            raise typer.Exit(3)
        if plan.status == "NO_PLAN":
            err.print(f"no plan found within {time_limit:g} s")
            raise typer.Exit(4)


@app.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of problem files (for editor completion)."""
    from planner.problem_schema import Problem

    emit_json(Problem.model_json_schema())


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so no half-written file is ever left behind."""
    import os
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(
            dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp"
        )
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
