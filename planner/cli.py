"""The `planner` command line: the only module that reads user files and prints.

Long because every command declares its options here (typer reads them from the signatures);
each command body only parses, calls one function and hands the result to planner/report."""

import errno
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeGuard, cast

import typer

from planner.errors import InputError, PlannerError, visible
from planner.model import interrupt
from planner.process import ctrl_c_in, pause_gc, resume_gc
from planner.schema.files import out_target, read_json, write_atomic

if TYPE_CHECKING:  # each command imports what it uses, so `--help` loads no numpy or solver
    from planner.catalog import Catalog
    from planner.estimator.estimate import Estimate
    from planner.plan.types import Plan
    from planner.schema.catalog import ModelArch
    from planner.schema.problem import Problem
    from planner.whatif.frontier import Frontier

app = typer.Typer(
    help="Which accelerators to buy or rent for LLM workloads, how many, and which layers run where.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help and usage errors: typer's rich help imports a Markdown parser (about 0.2 s).
    rich_markup_mode=None,
)
catalog_app = typer.Typer(
    help="Browse the catalog of devices, models, nodes and links.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(catalog_app, name="catalog")
prices_app = typer.Typer(
    help="Refresh cloud prices from published price lists into a user catalog overlay.",
    no_args_is_help=True,
)
app.add_typer(prices_app, name="prices")


@app.callback()
def _options(
    catalog: Annotated[
        list[Path] | None,
        typer.Option(
            "--catalog",
            help="A folder of catalog files (accelerators.yaml, models.yaml, nodes.yaml, "
            "links.yaml, regions.yaml; any of them) whose entries add to or replace the shipped "
            "ones; repeatable, also PLANNER_CATALOG.",
        ),
    ] = None,
) -> None:
    """Which accelerators to buy or rent for LLM workloads, how many, and which layers run where."""
    from planner.catalog import use_overlays

    _began[:] = [_process_began.pop() if _process_began else time.monotonic()]
    use_overlays(catalog or [])


_began: list[float] = []  # when this command began (monotonic), start-up included
_process_began: list[float] = []  # set by `main`: when the process began, for its command


def deadline(seconds: float) -> float:
    """The monotonic instant `seconds` after this command began."""
    return (_began[0] if _began else time.monotonic()) + seconds


PIPE_WIDTH = 160  # columns of tables written to a file or pipe, so their bytes do not vary


def table_width(is_tty: bool, columns: int) -> int:
    """Tables fit the terminal they are shown on (rich wraps cells to fit); written to a file
    or a pipe they are PIPE_WIDTH wide whatever the terminal."""
    return max(40, columns) if is_tty else PIPE_WIDTH


class LazyConsole:
    """A rich Console made at its first use, so `--help` and usage errors import no rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def get(self) -> Any:
        """The Console itself."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


def escape(text: str) -> str:
    """`text` with rich markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# emoji=False: a message quoting the user's `:smile:` must print it as written.
out = LazyConsole(
    soft_wrap=False,
    emoji=False,
    width=table_width(sys.stdout.isatty(), shutil.get_terminal_size((PIPE_WIDTH, 24)).columns),
)
err = LazyConsole(stderr=True, soft_wrap=True, emoji=False)


class Format(StrEnum):
    table = "table"
    json = "json"


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Change the problem: PATH=VALUE, e.g. constraints.budget_usd=800000 or "
        "workloads.chat.context_tokens=32768 (repeatable).",
    ),
]
TimeLimit = Annotated[
    float, typer.Option("--time-limit", min=0.1, help="Seconds each solve may take.")
]
CommandTimeLimit = Annotated[
    float,
    typer.Option(
        "--time-limit",
        min=0.1,
        help="Seconds the whole command may take: start-up, design enumeration, model "
        "building, the search, the check of the plan and its explanations.",
    ),
]
Workers = Annotated[
    int,
    typer.Option(min=1, max=64, help="Solver threads (1 is deterministic and fastest here)."),
]
MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is a signed 32-bit integer
Seed = Annotated[
    int, typer.Option(min=0, max=MAX_SEED, help=f"Solver random seed (0 to {MAX_SEED:,}).")
]
Gap = Annotated[
    float,
    typer.Option(
        "--gap",
        min=0.0,
        max=0.5,
        help="Stop once the plan is proved within this relative gap of the best possible "
        "(0.01 = 1 %); 0 proves it optimal.",
    ),
]
RowsOut = Annotated[
    Path | None, typer.Option("--out", help="Write the rows to a .csv or .json file.")
]
PlotOut = Annotated[
    Path | None, typer.Option("--plot", help="Draw a chart to a .png, .svg or .pdf file.")
]
FormatOption = Annotated[Format, typer.Option("--format", help="table or json.")]


class ExecutorKind(StrEnum):
    serial = "serial"
    local = "local"
    dask = "dask"


ExecutorOption = Annotated[
    ExecutorKind,
    typer.Option(
        "--executor",
        help="Where the points are solved: serial (this process), local (a pool of processes) "
        "or dask (a Dask cluster; pip install 'planner\\[dask]'). The rows are the "
        "same whichever.",
    ),
]
JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        min=1,
        max=256,
        help="Processes of the local pool, or workers of a Dask cluster started for the run "
        "(default: one per CPU and per 16 points; fewer points run in this process). Each "
        "process runs solves of --workers threads.",
    ),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        "--executor-address",
        help="A running Dask scheduler to use, e.g. tcp://10.0.0.5:8786 (with --executor dask).",
    ),
]
NoTimings = Annotated[
    bool,
    typer.Option("--no-timings", help="Leave solve_seconds out, so equal runs give equal bytes."),
]


def executor_of(kind: ExecutorKind, jobs: int | None, address: str | None) -> Any:
    from planner.whatif.executor import Executor

    return Executor(kind.value, jobs, address)


def drop_timings(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        r.pop("solve_seconds", None)


class PlanFormat(StrEnum):
    table = "table"
    json = "json"
    md = "md"
    csv = "csv"
    yaml = "yaml"


class Kind(StrEnum):
    devices = "devices"
    models = "models"
    nodes = "nodes"
    hosts = "hosts"  # the same as nodes: the servers devices go in
    links = "links"
    regions = "regions"
    instances = "instances"
    formats = "formats"
    kv_formats = "kv-formats"
    engines = "engines"
    architectures = "architectures"
    support = "support"


class Task(StrEnum):
    inference = "inference"
    full = "full"
    lora = "lora"
    qlora = "qlora"


INTERRUPTED = (
    "interrupted (Ctrl-C): what is shown above is what was done before it; a solve it stopped "
    "is not proved optimal"
)


@contextmanager
def startup() -> Iterator[None]:
    """A command's imports, with the garbage collector paused (see process.pause_gc)."""
    pause_gc()
    try:
        yield
    finally:
        resume_gc()


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn planner errors into a one-line message on stderr and the documented exit code, and
    Ctrl-C into "interrupted" and exit code 130 (after the best plan or the rows done so far).
    The command's work begins here: the collector paused for its start-up resumes."""
    resume_gc()
    interrupt.clear()
    try:
        yield
    except typer.Exit:
        if not interrupt.requested():
            raise
    except (KeyboardInterrupt, Exception) as e:
        if _lost_output(e):
            _say_output_lost(e)
            raise typer.Exit(1) from None
        # A planner error that Ctrl-C caused (inside a validator, while a catalog file loads, it
        # makes a valid value look invalid) is the user's stop, not the file's fault.
        if isinstance(e, PlannerError) and not ctrl_c_in(e):
            shown = escape(visible(str(e)))
            err.print(f"[bold red]error:[/] {shown}", highlight=False, markup=True)
            raise typer.Exit(e.exit_code) from None
        if not ctrl_c_in(e):
            raise
        # Between solves, in Python code: nothing more will be shown.
        err.print("interrupted (Ctrl-C)", highlight=False, markup=False)
        interrupt.mark_reported()
        raise typer.Exit(130) from None
    if interrupt.requested():
        # Inside a solve: the search stopped and its incumbent (or the sweep's rows) was shown.
        err.print(INTERRUPTED, highlight=False, markup=False)
        interrupt.mark_reported()
        raise typer.Exit(130)


# A write that fails for want of room or a working device (stdout sent to a full disk, a
# closed terminal): no traceback, and the exit code of an error (1).
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _lost_output(e: BaseException) -> TypeGuard[OSError]:
    """Whether `e` is a write that failed for want of room or a device (and not Ctrl-C's)."""
    return isinstance(e, OSError) and e.errno in OUTPUT_ERRNOS and not ctrl_c_in(e)


def _say_output_lost(e: OSError) -> None:
    """Say that the output could not be written (the caller ends with exit code 1). Standard
    output is pointed at the null device first, so the interpreter's own flush at exit cannot
    fail again and print a traceback of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind stdout: nothing to redirect
        pass
    err.print(
        f"error: the output could not be written: {e.strerror or e}; free some room or send "
        "the output elsewhere",
        highlight=False,
        markup=False,
    )


def emit_json(data: Any) -> None:
    """Strict JSON on stdout: a figure that is not a finite number is written as null."""
    from planner.report.json_text import json_text

    sys.stdout.write(json_text(data))


# ------------------------------------------------------------------------------------------------
# catalog
# ------------------------------------------------------------------------------------------------


@catalog_app.command("list")
def catalog_list(
    kind: Annotated[Kind, typer.Argument(help="What to list.")],
    fmt: FormatOption = Format.table,
) -> None:
    """List catalog entries with their key figures."""
    with user_errors():
        from planner.catalog import load_catalog
        from planner.report.catalog_lists import KINDS as LIST_KINDS
        from planner.report.catalog_lists import list_rows
        from planner.report.estimate import catalog_rows, table_of

        cat = load_catalog()
        if kind.value in LIST_KINDS:
            rows = list_rows(cat, kind.value)
        else:
            rows = catalog_rows(cat, "nodes" if kind is Kind.hosts else kind.value)
        if fmt is Format.json:
            emit_json(rows)
        else:
            out.print(table_of(rows, f"{kind.value} ({len(rows)})"))


@catalog_app.command("show")
def catalog_show(
    name: Annotated[str, typer.Argument(help="A device, model, node or link id.")],
    fmt: FormatOption = Format.table,
) -> None:
    """Show every field of one catalog entry, with its sources."""
    with user_errors():
        from planner.catalog import load_catalog
        from planner.report.estimate import entry_table

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


@prices_app.command("import")
def prices_import(
    out_dir: Annotated[
        Path,
        typer.Option("--out", help="The overlay folder (accelerators.yaml and instances.yaml)."),
    ],
    skypilot: Annotated[
        list[Path] | None,
        typer.Option("--skypilot", help="A SkyPilot catalog vms.csv, or a folder of them."),
    ] = None,
    gpuhunt: Annotated[
        list[Path] | None, typer.Option("--gpuhunt", help="A CSV saved by gpuhunt.")
    ] = None,
    date: Annotated[
        str | None, typer.Option("--date", help="When the prices were read (YYYY-MM); today.")
    ] = None,
    gcp_host: Annotated[
        str, typer.Option("--gcp-host", help="GCP host instance added to GPU rows.")
    ] = "n1-standard-8",
) -> None:
    """On-demand and spot rent from SkyPilot and gpuhunt price lists, written as a user catalog
    overlay (use it with --catalog or PLANNER_CATALOG): per device where devices are rented one
    at a time, whole instances where an instance holds several."""
    import datetime

    from planner.catalog import load_catalog
    from planner.prices import (
        Imported,
        cheapest,
        overlay_document,
        read_gpuhunt,
        read_skypilot,
        skypilot_files,
        write_overlay,
    )
    from planner.report.estimate import table_of

    with user_errors():
        if not skypilot and not gpuhunt:
            raise InputError("name a price list: --skypilot FILE|DIR and/or --gpuhunt FILE")
        when = date or datetime.datetime.now(datetime.UTC).strftime("%Y-%m")
        imported = Imported()
        for path in skypilot or []:
            for f in skypilot_files(path):
                read_skypilot(f, imported, gcp_host)
        for path in gpuhunt or []:
            read_gpuhunt(path, imported)
        cat = load_catalog()
        written = write_overlay(out_dir, overlay_document(cat, imported, when))
        rows = [
            {
                "device": o.device,
                "mode": "spot" if o.spot else "on demand",
                "catalog $/h": getattr(
                    cat.accelerator(o.device).price,
                    "spot_usd_per_hour" if o.spot else "rent_usd_per_hour",
                ),
                "imported $/h": round(o.usd_per_device_hour, 4),
                "cheapest at": f"{o.source} {o.cloud} {o.instance} {o.region}".strip(),
            }
            for (_, _), o in sorted(cheapest(imported.offers).items())
        ]
        out.print(table_of(rows, f"prices per device-hour ({len(imported.offers)} offers)"))
        out.print("written: " + ", ".join(str(p) for p in written))
        out.print(f"skipped: {imported.empty_prices} empty prices")
        if imported.no_host:
            out.print(f"skipped: {imported.no_host} GCP GPU rows without a {gcp_host} row")
        names = ", ".join(f"{n} ({k} rows)" for n, k in sorted(imported.unmapped.items()))
        out.print(f"unmapped names: {names or 'none'}")


# ------------------------------------------------------------------------------------------------
# estimate
# ------------------------------------------------------------------------------------------------


def resolve_model(name: str) -> "ModelArch":
    """A catalog id, or a path to a Hugging Face config.json (or a folder holding one)."""
    from planner.catalog import load_catalog
    from planner.hf_config import load_hf_config

    if not name.strip():
        raise InputError(
            "--model is empty: give a catalog model id (`planner catalog list models`) or the "
            "path of a config.json"
        )
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


# `estimate` answers with the same defaults a problem file gets when it leaves a field out (those
# of the schema's Horizon, InferenceWorkload and TrainingWorkload, which a test holds these to),
# written out so that `--help` needs no pydantic model.
_HZ: dict[str, Any] = {
    "lifetime_years": 3.0,
    "utilization": 0.6,
    "electricity_usd_per_kwh": 0.12,
    "pue": 1.3,
}
_INF: dict[str, Any] = {
    "weights": "fp16",
    "kv": "fp16",
    "context_tokens": 4096,
    "prompt_tokens": 1024,
}
_TRN: dict[str, Any] = {
    "seq_len": 4096,
    "micro_batch": 1,
    "optimizer": "adamw",
    "zero_stage": 1,
    "lora_rank": 16,
}


def _check_estimate_bounds(given: dict[str, int | None]) -> None:
    """Refuse option values past the limits problem files have (the schema's constants), so
    that no figure is computed from a batch of 10^23 sequences or a million ranks."""
    from planner.estimator.estimate import MAX_DEVICES
    from planner.schema.problem import MAX_BATCH, MAX_CONTEXT, MAX_LORA_RANK, MAX_MICRO_BATCH

    window = (MAX_CONTEXT, "longer than any model's context window (2M = 2,097,152)")
    limits = {
        "--batch": (MAX_BATCH, "more sequences than any engine batches"),
        "--context": window,
        "--seq": window,
        "--micro-batch": (MAX_MICRO_BATCH, "larger micro-batches fit on no device"),
        "--lora-rank": (MAX_LORA_RANK, "a rank this high is a full fine-tune; use --task full"),
        "--dp": (
            MAX_DEVICES,
            "the most devices estimate lays out (data parallelism alone); plan larger fleets "
            "with `planner solve`",
        ),
    }
    for option, value in given.items():
        most, why = limits[option]
        if value is not None and value > most:
            raise InputError(f"{option} {value:,}: at most {most:,}: {why}")


# The options of one kind of estimate: a serving one reads no training shape, a training one
# no serving shape (as a problem file's training workload has no `concurrency`), so an option
# of the other kind would be dropped without a word and the figures answer another question.
_SERVING_OPTIONS = {
    "weights": "--weights",
    "kv": "--kv",
    "context": "--context",
    "batch": "--batch",
    "prompt": "--prompt",
    "tp": "--tp",
}
_TRAINING_OPTIONS = {
    "seq": "--seq",
    "micro_batch": "--micro-batch",
    "optimizer": "--optimizer",
    "recompute": "--recompute",
    "lora_rank": "--lora-rank",
    "tokens": "--tokens",
}


def _check_task_options(call: typer.Context, task: Task) -> None:
    """Refuse an option the task does not read, naming it and the task it goes with."""

    def given(name: str) -> bool:
        source = call.get_parameter_source(name)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    if task is Task.inference:
        stray = [flag for name, flag in _TRAINING_OPTIONS.items() if given(name)]
        if stray:
            raise InputError(
                f"{', '.join(stray)} shape a training run: they go with --task full, lora or "
                "qlora; drop them for a serving estimate"
            )
        return
    stray = [flag for name, flag in _SERVING_OPTIONS.items() if given(name)]
    if stray:
        raise InputError(
            f"{', '.join(stray)} shape a serving estimate: they go with --task inference; a "
            f"--task {task.value} estimate takes --seq, --micro-batch, --optimizer, --recompute, "
            "--zero, --dp and --tokens"
        )
    if task is Task.full and given("lora_rank"):
        raise InputError(
            "--lora-rank sets the rank of LoRA adapters: a --task full run trains every weight "
            "and no adapter; drop it, or use --task lora or qlora"
        )


@app.command()
def estimate(
    call: typer.Context,
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
    ] = _INF["weights"],
    kv: Annotated[str, typer.Option(help="KV-cache format: fp16, fp8, q8_0...")] = _INF["kv"],
    context: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Tokens held per sequence in the KV cache.  [default: {_INF['context_tokens']}]",
        ),
    ] = None,
    batch: Annotated[int, typer.Option(min=1, help="Concurrent sequences (inference).")] = 1,
    prompt: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Prompt tokens, for time to first token.  [default: {_INF['prompt_tokens']}]",
        ),
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=72,
            help="Tensor-parallel degree (inference); pipeline stages are added when a group of "
            "this many devices cannot hold the model. Default: the smallest layout that fits.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="Serving engine (inference): vllm, sglang, tensorrt-llm, llama.cpp, vllm-0.5...; "
            "`planner catalog list engines`. Default: per device, the first engine the support "
            "matrix lists for it and the formats.",
        ),
    ] = None,
    seq: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Training sequence length. Default: {_TRN['seq_len']:,}, or the model's "
            "context where that is shorter.",
        ),
    ] = None,
    micro_batch: Annotated[
        int, typer.Option("--micro-batch", min=1, help="Training micro-batch per device.")
    ] = _TRN["micro_batch"],
    optimizer: Annotated[str, typer.Option(help="adamw, adamw-8bit, sgd, adafactor.")] = _TRN[
        "optimizer"
    ],
    zero: Annotated[
        int,
        typer.Option(
            min=0,
            max=3,
            show_default=False,
            help="ZeRO stage across data-parallel ranks, honoured when given. Left out: "
            f"{_TRN['zero_stage']} on the ranks --dp gives (the problem files' default); "
            "without --dp, 3 over the fewest devices that hold the model.",
        ),
    ] = _TRN["zero_stage"],
    dp: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Data-parallel ranks, each a device (for ZeRO sharding). Default: the fewest "
            "that hold the model.",
        ),
    ] = None,
    recompute: Annotated[
        str | None,
        typer.Option(
            help="Activation recomputation: none, selective, full (default, as in problem files: "
            "full for LoRA/QLoRA, selective otherwise)."
        ),
    ] = None,
    lora_rank: Annotated[int, typer.Option(min=1, help="LoRA rank.")] = _TRN["lora_rank"],
    tokens: Annotated[
        float | None,
        typer.Option(min=1, max=1e16, help="Training token budget (e.g. 2e9)."),
    ] = None,
    lifetime_years: Annotated[
        float, typer.Option(min=0.1, max=20, help="Depreciation period of bought devices.")
    ] = _HZ["lifetime_years"],
    utilization: Annotated[
        float, typer.Option(min=0.01, max=1.0, help="Share of hours doing useful work.")
    ] = _HZ["utilization"],
    electricity: Annotated[
        float, typer.Option(min=0.0, max=10, help="Electricity price, USD per kWh.")
    ] = _HZ["electricity_usd_per_kwh"],
    pue: Annotated[
        float, typer.Option(min=1.0, max=5, help="Power usage effectiveness of the site.")
    ] = _HZ["pue"],
    efficiency: Annotated[
        list[str] | None,
        typer.Option(help="Override an efficiency factor: [DEVICE_OR_CLASS:]FACTOR=VALUE."),
    ] = None,
    measured: Annotated[
        Path | None, typer.Option(help="YAML table of measured figures that replace estimates.")
    ] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Does a model fit on a device, how fast does it run, and what does it cost?

    Long because typer declares every option in the signature.
    """
    with user_errors():
        from planner.catalog import load_catalog
        from planner.estimator.cost import Economics
        from planner.estimator.devices import device_table
        from planner.estimator.estimate import (
            InferenceQuery,
            TrainingQuery,
            estimate_inference,
            estimate_training,
        )
        from planner.estimator.estimate import Task as EstTask
        from planner.estimator.formats import kv_bytes, mix_without_experts, weight_format
        from planner.estimator.measured_rows import check_points, check_speeds, unused_notes
        from planner.estimator.memory import Method, Optimizer, Recompute, TrainingSetup
        from planner.estimator.support import (
            check_estimate_group,
            estimate_engines,
            estimate_solo,
            estimate_tensor_groups,
            supported_devices,
        )
        from planner.report.estimate import estimate_dict, estimate_tables, estimates_table
        from planner.report.json_text import json_text
        from planner.schema.measurements import read_measurements
        from planner.schema.model_params import split_heads
        from planner.schema.problem import default_recompute

        _check_estimate_bounds(
            {
                "--batch": batch,
                "--context": context,
                "--seq": seq,
                "--micro-batch": micro_batch,
                "--lora-rank": lora_rank,
                "--dp": dp,
            }
        )
        _check_task_options(call, task)
        source = call.get_parameter_source("zero")
        zero_given = source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
        cat = load_catalog()
        arch = resolve_model(model)
        devices = list(cat.accelerators.values()) if device == "all" else [cat.accelerator(device)]
        from planner.load import parse_efficiency

        ov = parse_efficiency(efficiency or [], cat)
        star = ov.pop("*", {})
        if star:
            for d in devices:
                ov[d.id] = {**star, **ov.get(d.id, {})}
        table = device_table(devices, ov, links=cat.links)
        econ = Economics(
            lifetime_years=lifetime_years,
            utilization=utilization,
            electricity_usd_per_kwh=electricity,
            pue=pue,
        )
        rows: list[Estimate]
        notes: list[str] = []
        if engine is not None and task is not Task.inference:
            raise InputError("--engine names a serving engine: it goes with --task inference")
        if measured is not None and task is not Task.inference:
            raise InputError(
                f"--measured {measured}: measured figures replace inference estimates only; "
                "drop it, or use --task inference"
            )
        if task is Task.inference and (dp is not None or zero_given):
            raise InputError(
                "--dp and --zero shard training state over data-parallel ranks: they go with "
                "--task full, lora or qlora"
            )
        if task is Task.inference:
            mfile, mdoc = read_measurements(measured) if measured else (None, None)
            if mfile is not None and mdoc is not None:
                check_speeds(mfile, mdoc, arch, cat)
            if tp is not None and split_heads(arch) % tp:
                la = arch.linear_attention
                linear = f" and its {la.num_key_heads} linear-attention key heads" if la else ""
                raise InputError(
                    f"--tp {tp}: tensor parallelism splits the {arch.num_attention_heads} "
                    f"attention heads of {arch.id}{linear}; choose a degree that divides them"
                )
            # The same checks as a problem file's (planner.load): estimate and solve answer
            # one question one way.
            ctx = context or int(_INF["context_tokens"])
            ask = prompt or int(_INF["prompt_tokens"])
            said = {True: "", False: " (the default)"}
            if ask > ctx:
                raise InputError(
                    f"--prompt {ask:,}{said[prompt is not None]} is longer than --context "
                    f"{ctx:,}{said[context is not None]}: the KV cache holds the prompt and the "
                    "tokens after it; raise --context or shorten --prompt"
                )
            if ctx > arch.max_context:
                raise InputError(
                    f"--context {ctx:,}{said[context is not None]} is longer than {arch.id}'s "
                    f"maximum context of {arch.max_context:,} tokens: give --context of at most "
                    f"{arch.max_context:,}, or pick a model with a longer context"
                )
            q = InferenceQuery(weights=weights, kv=kv, context=ctx, batch=batch, prompt=ask, tp=tp)
            if mfile is not None and mdoc is not None:
                check_points(mfile, mdoc, arch, q)
            weight_format(weights), kv_bytes(kv)  # unknown names first, with their choices
            if (why := mix_without_experts(weights, arch)) is not None:
                raise InputError(f"--weights {weights}: {why}")
            runs = supported_devices(cat, devices, weights, kv)
            check_estimate_group(cat, engine, tp)
            runs, engines = estimate_engines(cat, runs, weights, kv, engine)
            runs, engines = estimate_tensor_groups(cat, runs, engines, weights, kv, arch, tp)
            if len(runs) < len(devices):
                table = device_table(runs, ov, links=cat.links)
            one_stage = {
                e.id: e.tensor_layout != "ring-allreduce"
                for e in cat.engines.values()
                if not e.pipeline_parallel
            }
            solo = estimate_solo(cat, runs, engines, weights, kv, arch)
            rows = estimate_inference(arch, table, q, econ, mfile, engines, one_stage, solo)
            if mfile is not None and mdoc is not None:
                notes = unused_notes(mfile, mdoc, arch, rows, q, cat)
        else:
            rc = recompute or default_recompute(task.value)
            if rc not in ("none", "selective", "full"):
                raise InputError(f"--recompute `{rc}`: choose none, selective or full")
            if optimizer not in ("adamw", "adamw-8bit", "sgd", "adafactor"):
                raise InputError(
                    f"--optimizer `{optimizer}`: choose adamw, adamw-8bit, sgd or adafactor"
                )
            if seq is None:
                seq = min(int(_TRN["seq_len"]), arch.max_context)
            elif seq > arch.max_context:  # as a problem file's training seq_len (planner.load)
                raise InputError(
                    f"--seq {seq:,} is longer than {arch.id}'s maximum context of "
                    f"{arch.max_context:,} tokens: give --seq of at most {arch.max_context:,}, "
                    "or pick a model with a longer context"
                )
            setup = TrainingSetup(
                method=cast(Method, task.value),
                optimizer=cast(Optimizer, optimizer),
                zero_stage=zero,
                data_parallel=dp or 1,
                seq_len=seq,
                micro_batch=micro_batch,
                recompute=cast(Recompute, rc),
                lora_rank=lora_rank,
            )
            rows = estimate_training(
                arch,
                table,
                cast(EstTask, task.value),
                # The stage as given; left out, the problem files' default on the ranks given,
                # or ZeRO-3 over the fewest devices that hold the model.
                TrainingQuery(
                    setup=setup,
                    token_budget=tokens,
                    ranks=dp,
                    stage=zero if zero_given or dp is not None else None,
                ),
                econ,
            )
        if fmt is Format.json:
            # Strict JSON (a non-finite figure is null); notes on stderr keep stdout parseable.
            data = [estimate_dict(r) for r in rows] if device == "all" else estimate_dict(rows[0])
            sys.stdout.write(json_text(data))
            for n in notes:
                err.print(f"note: {n}", highlight=False, markup=False)
        else:
            if device == "all":
                out.print(estimates_table(rows))
            else:
                for t in estimate_tables(rows[0]):
                    out.print(t)
            for n in notes:
                out.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
        if not any(r.devices_needed for r in rows):
            raise typer.Exit(3)  # nothing the model fits on (every row says so)


@app.command()
def solve(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    sets: SetOption = None,
    fmt: Annotated[
        PlanFormat,
        typer.Option(
            "--format",
            help="table, json, md (a purchase memo), csv (bill of materials and workloads), yaml.",
        ),
    ] = PlanFormat.table,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Also write the plan as JSON to this file.")
    ] = None,
    time_limit: CommandTimeLimit = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
    gap: Gap = 0.0,
    no_timings: Annotated[
        bool,
        typer.Option(
            "--no-timings", help="Leave solve_seconds out, so equal runs give equal bytes."
        ),
    ] = False,
) -> None:
    """Solve a problem file: the optimal bill of materials, layer map and figures."""
    with user_errors():
        with startup():
            from planner.estimator import mix_enumeration
            from planner.load import load_problem
            from planner.model import progress
            from planner.solve import solve_problem

        if out_path is not None:
            out_target(out_path, keep=problem)  # a bad --out fails before the solve
        prob = load_problem(problem, sets or [])

        # Best objective and gap while a long solve runs: on a terminal only, so the bytes
        # written to pipes and files never change.
        progress.show_on(sys.stderr if sys.stderr.isatty() else None)
        # One solve, then the process ends: a forked child's remembered figures are not needed.
        hand_back, mix_enumeration.HAND_BACK = mix_enumeration.HAND_BACK, False
        try:
            plan = solve_problem(
                prob,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
                gap=gap,
                deadline=deadline(time_limit),
            )
        except InputError as e:  # found while enumerating (an impossible measured capacity)
            raise InputError(f"{problem}: {e}") from None
        finally:
            progress.show_on(None)
            mix_enumeration.HAND_BACK = hand_back
        _print_plan(plan, prob, fmt, out_path, timings=not no_timings)
        if plan.status == "INFEASIBLE":
            raise typer.Exit(3)
        if plan.status == "NO_PLAN":
            if not interrupt.requested():
                err.print(f"no plan found within {time_limit:g} s")
            raise typer.Exit(4)


def _print_plan(
    plan: "Plan", prob: "Problem", fmt: PlanFormat, out_path: Path | None, timings: bool
) -> None:
    """Show the plan in `fmt` and write its file to `out_path` (if any); without `timings`
    its solve time is left out, so equal runs give equal bytes. Each output loads what it uses
    (a table: rich; a file or JSON: the plan document)."""
    from planner.catalog import load_catalog
    from planner.plan.io import dumps_plan, plan_document

    if not timings:
        plan.solve_seconds = 0.0
    # The plan document (the problem embedded, the catalog hashed) only where it is written.
    data: dict[str, Any] = {}
    if out_path is not None or fmt in (PlanFormat.json, PlanFormat.yaml):
        data = plan_document(plan, prob, load_catalog())
        if not timings:
            data.pop("solve_seconds", None)
    if out_path is not None:
        write_atomic(out_path, dumps_plan(data))
    if fmt is PlanFormat.json:
        sys.stdout.write(dumps_plan(data))
    elif fmt is PlanFormat.table:
        from planner.report.plan_table import plan_renderable

        out.print(plan_renderable(plan, timings=timings))
    else:
        from planner.report.memo import plan_csv, plan_markdown, plan_yaml

        sys.stdout.write(
            plan_markdown(plan, prob)
            if fmt is PlanFormat.md
            else plan_csv(plan)
            if fmt is PlanFormat.csv
            else plan_yaml(data)
        )


@app.command()
def simulate(
    first: Annotated[
        Path, typer.Argument(help="A plan (JSON, from `solve --out`) or a problem file (YAML).")
    ],
    problem: Annotated[
        Path | None, typer.Argument(help="The problem the plan answers (when FIRST is a plan).")
    ] = None,
    sets: SetOption = None,
    requests: Annotated[
        int, typer.Option("--requests", min=100, max=1_000_000, help="Requests to replay.")
    ] = 10_000,
    load: Annotated[
        float,
        typer.Option(
            "--load",
            min=0.01,
            max=2.0,
            help="Traffic as a share of the problem's (requests/s, or sequences held).",
        ),
    ] = 1.0,
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1, help="Random seed.")] = 0,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Latency distribution chart (.png or .svg).")
    ] = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
) -> None:
    """Replay a plan's serving engines: p50/p95/p99 TTFT, TPOT and end-to-end latency beside the
    serving model's own figures, throughput, queue and KV use (seeded, iteration-level)."""
    with user_errors():
        from planner.report.simulation import simulation_renderable, simulation_summary
        from planner.simulate import check_groups, simulate_plan, workloads_from_json

        _chart_first(plot_path)
        if problem is None:
            from planner.solve import solve_problem

            prob, cat = _with_catalog(first, sets)
            solved = prob
            plan = solve_problem(prob, time_limit=time_limit)
            if not plan.status.has_plan:
                raise InputError(f"{first}: no plan to simulate ({plan.status})")
            groups = plan.workloads
            if not any(g.kind == "inference" for g in groups):
                raise InputError(
                    f"{first}: the problem has no inference workload, so its plan has no "
                    "serving replicas to replay (simulate replays serving engines)"
                )
        else:
            from planner.plan.io import read_plan
            from planner.simulate import check_same_fleet
            from planner.verify_plan import verified

            prob, cat = _with_catalog(problem, sets)
            if first.suffix.lower() in (".yaml", ".yml"):
                raise InputError(
                    f"{first}: a problem file where the plan belongs: `planner simulate "
                    f"{first}` solves and replays it; `planner simulate PLAN.json {problem}` "
                    "replays a saved plan"
                )
            groups = workloads_from_json(read_json(first), str(first))
            check_groups(groups, prob, cat, str(first))
            # A replay shows what the plan promises only if the planner wrote the plan (an
            # edited count or device would replay a fleet nobody planned), checked against the
            # problem it embeds (exit 5 as `planner verify`); the given problem and --set may
            # change the traffic, and no more (check_same_fleet).
            verified(saved := read_plan(first), cat)
            check_same_fleet(solved := saved.problem, prob, str(first))
        rep = simulate_plan(groups, prob, cat, solved, requests=requests, seed=seed, load=load)
        summary = simulation_summary(rep, prob, cat, groups, load=load)
        if plot_path is not None:
            from planner.report.simulation import save_latency_plot

            save_latency_plot(rep, plot_path)
        if fmt is Format.json:
            emit_json(summary)
        else:
            out.print(simulation_renderable(summary))


@app.command()
def tco(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    sets: SetOption = None,
    months: Annotated[
        int | None,
        typer.Option(
            "--months",
            min=1,
            help="Months to show (default: the whole horizon; more than it holds are clamped).",
        ),
    ] = None,
    plot_path: PlotOut = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
) -> None:
    """Cost over time of the optimal plan: breakdown by kind, cumulative cost by month, and per
    device type the break-even month of buying against renting the same hours on demand."""
    with user_errors():
        from planner.load import load_problem
        from planner.report.tco import plot_tco, tco_dict, tco_report, tco_tables
        from planner.solve import solve_problem

        _chart_first(plot_path)
        prob = load_problem(problem, sets or [])
        plan = solve_problem(prob, time_limit=time_limit, workers=workers, seed=seed)
        if plan.status not in ("OPTIMAL", "FEASIBLE"):
            if fmt is Format.json:
                emit_json({"problem": plan.problem, "status": plan.status, "notes": plan.notes})
            else:
                out.print(f"[bold]{escape(plan.problem)}[/]: {plan.status}")
                for n in plan.notes:
                    out.print(n, highlight=False, markup=False)
            if plan.status == "INFEASIBLE":
                raise typer.Exit(3)
            err.print(f"no plan found within {time_limit:g} s")
            raise typer.Exit(4)
        report = tco_report(plan, prob.horizon.lifetime_years, months)
        if plot_path is not None:
            plot_tco(report, plot_path)
        from planner.catalog import load_catalog
        from planner.estimator.api import cheapest_api

        api = cheapest_api(prob, load_catalog(), plan.served_tokens)
        if fmt is Format.json:
            data = tco_dict(report)
            if api is not None:
                data["api"] = {"provider": api.price.provider, "date": api.price.date}
                data["api"] |= {"usd": api.usd, "output_tokens": api.output_tokens}
            emit_json(data)
            return
        for t in tco_tables(report):
            out.print(t)
        if api is not None:
            side = "less" if api.usd < plan.tco_usd else "more"
            out.print(
                f"call an API instead: ${api.usd:,.0f} over the horizon for the same "
                f"{api.output_tokens:,.0f} output and {api.prompt_tokens:,.0f} prompt tokens "
                f"({api.price.provider}, {api.price.date}), {side} than this plan's "
                f"${plan.tco_usd:,.0f}; `planner options` compares buy, rent and API at other "
                "demand levels",
                highlight=False,
                markup=False,
            )
        for n in report.notes:
            out.print(f"note: {n}", highlight=False, markup=False)


@app.command()
def options(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    sets: SetOption = None,
    demand: Annotated[
        str,
        typer.Option("--demand", help="Multiples of the problem's demand, comma-separated."),
    ] = "0.1,1,10",
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
) -> None:
    """Buy, rent instances, or call an API: the problem solved buying only and renting only at
    several demand levels, beside a managed API's price for the same tokens, and which is
    cheapest at each."""
    with user_errors():
        from planner.load import load_problem
        from planner.report.options import options_rows, options_table
        from planner.solve import Solver
        from planner.whatif.options import compare_options

        parts = demand.split(",")
        if any(not x.strip() for x in parts):  # `1,,2` or a trailing comma, as sweep refuses
            raise InputError(f"--demand {demand}: an empty value between commas; write 0.1,1,10")
        try:
            scales = [float(x) for x in parts]
        except ValueError:
            raise InputError(f"--demand {demand}: give multiples like 0.1,1,10") from None
        if not all(0 < x < float("inf") for x in scales):
            raise InputError(f"--demand {demand}: each multiple is a number above 0, like 1")
        prob = load_problem(problem, sets or [])
        solver = Solver(time_limit=time_limit, workers=workers, seed=seed, why=False)
        rows = compare_options(prob, scales, solver)
        if fmt is Format.json:
            emit_json(options_rows(rows))
        else:
            out.print(options_table(prob.name, prob.horizon.lifetime_years, rows))
        if not any(r.cheapest for r in rows):  # no option at any level: as solve, 3 or 4
            proved = all(p.status == "INFEASIBLE" for r in rows for p in (r.buy, r.rent))
            raise typer.Exit(3 if proved else 4)


SWEEP_COLUMNS = [
    ("status", "status"),
    ("tco_usd", "cost $"),
    ("tokens_per_s", "tokens/s"),
    ("power_w", "wall W"),
    ("tokens_per_joule", "tok/J"),
    ("usd_per_million_tokens", "$/Mtok"),
    ("devices", "devices"),
]


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}"
    return str(v)


def _rows_table(rows: list[dict[str, Any]], keys: list[str], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for k in keys:
        t.add_column(k, justify="right")
    for label in (lbl for _, lbl in SWEEP_COLUMNS):
        t.add_column(label, justify="left" if label in ("status", "devices") else "right")
    for r in rows:
        t.add_row(*(_cell(r.get(k)) for k in keys), *(_cell(r.get(k)) for k, _ in SWEEP_COLUMNS))
    return t


def _with_catalog(path: Path, sets: list[str] | None) -> "tuple[Problem, Catalog]":
    """The problem file and the catalog with the models it reads from config.json files (a
    catalog loaded before the problem does not hold them)."""
    from planner.catalog import load_catalog
    from planner.load import load_problem

    problem = load_problem(path, sets or [])
    return problem, load_catalog()


def _chart_first(plot_path: Path | None) -> None:
    """A --plot file name the plotter cannot write fails before the command's work, not after."""
    if plot_path is not None:
        from planner.report.plot import chart_format

        chart_format(plot_path)


ROW_SUFFIXES = (".csv", ".json")  # files that sweep, frontier and study rows are written to


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """CSV (by suffix .csv) or JSON rows, written atomically."""
    import csv
    import io

    if path.suffix.lower() == ".json":
        from planner.report.json_text import json_text

        write_atomic(path, json_text(rows))
        return
    if path.suffix.lower() != ".csv":
        raise InputError(f"{path}: write rows to a .csv or .json file")
    buf = io.StringIO()
    keys = list(rows[0]) if rows else []
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, buf.getvalue())


def _progress(label: str) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err.get(),
        transient=True,
        disable=not err.get().is_terminal,  # nothing at all, not even a blank line, off a terminal
    )


@contextmanager
def _counter() -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (shown on a terminal only) and the function that moves it."""
    with _progress("solving") as bar:
        task = bar.add_task("points", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield tick


@app.command()
def sweep(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    vary: Annotated[
        list[str],
        typer.Option(
            "--vary",
            help="PATH=FROM..TO:POINTS or PATH=A,B,C, e.g. constraints.power_w=5000..40000:8 "
            "(once or twice).",
        ),
    ],
    sets: SetOption = None,
    out_path: RowsOut = None,
    plot_path: PlotOut = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
    executor: ExecutorOption = ExecutorKind.local,
    jobs: JobsOption = None,
    address: AddressOption = None,
    no_timings: NoTimings = False,
) -> None:
    """Solve the problem over a range of one or two parameters: status, cost, throughput, power,
    tokens per joule and the chosen devices per point."""
    with user_errors():
        from planner.schema.yaml_io import read_yaml
        from planner.whatif.executor import Settings
        from planner.whatif.sweep import parse_vary
        from planner.whatif.sweep import sweep as run_sweep

        varies = [parse_vary(v) for v in vary]
        run_on = executor_of(executor, jobs, address)
        if out_path is not None:
            out_target(out_path, keep=problem, suffixes=ROW_SUFFIXES)  # before the sweep
        _chart_first(plot_path)
        doc = read_yaml(problem)
        # Sweep rows report each point's status; why a point is infeasible is `explain`'s job.
        settings = Settings(time_limit=time_limit, workers=workers, seed=seed)
        with _counter() as tick:
            done = run_sweep(doc, sets or [], varies, settings, run_on, tick, base=problem.parent)
        rows = done.rows
        if done.interrupted:
            interrupt.request()
        if no_timings:
            drop_timings(rows)
        if out_path is not None:
            _write_rows(out_path, rows)
        if plot_path is not None:
            from planner.report.plot import plot_sweep

            plot_sweep(
                rows,
                varies[0].path,
                ["tco_usd", "tokens_per_s", "power_w"],
                plot_path,
                title=f"{problem.stem}: sweep of {varies[0].path}",
                second=varies[1].path if len(varies) > 1 else None,
            )
        if fmt is Format.json:
            emit_json(rows)
        else:
            out.print(_rows_table(rows, [v.path for v in varies], f"sweep of {problem}"))


class Axis(StrEnum):
    cost = "cost"
    power = "power"
    tokens_per_s = "tokens_per_s"
    tokens_per_joule = "tokens_per_joule"


@app.command()
def frontier(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    x: Annotated[Axis, typer.Option("--x", help="Resource or benefit on the x axis.")] = Axis.cost,
    y: Annotated[
        Axis, typer.Option("--y", help="Resource or benefit on the y axis.")
    ] = Axis.tokens_per_s,
    points: Annotated[
        int, typer.Option("--points", min=2, max=100, help="Caps tried (evenly spaced).")
    ] = 10,
    sets: SetOption = None,
    out_path: RowsOut = None,
    plot_path: PlotOut = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
    executor: ExecutorOption = ExecutorKind.local,
    jobs: JobsOption = None,
    address: AddressOption = None,
    no_timings: NoTimings = False,
) -> None:
    """The Pareto frontier of cost or power against tokens/s or tokens per joule, every point
    proved optimal (epsilon-constraint: cap the resource, maximize the benefit)."""
    with user_errors():
        from planner.load import load_problem
        from planner.solve import Solver
        from planner.whatif.frontier import axis_column
        from planner.whatif.frontier import frontier as run_frontier

        if out_path is not None:
            out_target(out_path, keep=problem, suffixes=ROW_SUFFIXES)  # before the frontier
        _chart_first(plot_path)
        run_on = executor_of(executor, jobs, address)
        prob = load_problem(problem, sets or [])
        solver = Solver(time_limit=time_limit, workers=workers, seed=seed)
        fr = run_frontier(prob, x.value, y.value, points, solver, run_on)
        if no_timings:
            drop_timings(fr.points)
        xkey, ykey = axis_column(x.value), axis_column(y.value)
        if out_path is not None:
            _write_rows(out_path, fr.points)
        if plot_path is not None and fr.points:
            from planner.report.plot import plot_frontier

            plot_frontier(
                fr.points, xkey, ykey, plot_path, title=f"{prob.name}: {y.value} against {x.value}"
            )
        if fmt is Format.json:
            emit_json(
                {
                    "resource": fr.resource,
                    "benefit": fr.benefit,
                    "points": fr.points,
                    "dominated": fr.dominated,
                    "notes": fr.notes,
                }
            )
        else:
            _print_frontier(fr, points)
        if fr.status is not None:  # as solve: 3 proved infeasible, 4 no plan in time
            raise typer.Exit(3 if fr.status == "INFEASIBLE" else 4)


def _print_frontier(fr: "Frontier", points: int) -> None:
    cap = f"{fr.resource}_cap"
    out.print(_rows_table(fr.points, [cap], f"Pareto frontier: {fr.benefit} against {fr.resource}"))
    out.print(
        f"{len(fr.points)} Pareto-optimal points; {fr.dominated} of {points} caps gave "
        "a dominated or repeated plan"
    )
    for n in fr.notes:
        out.print(f"note: {n}")


@app.command()
def study(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    vary_dist: Annotated[
        list[str],
        typer.Option(
            "--vary-dist",
            help="TARGET=KIND:PARAMS, a random factor on prices.DEVICE, prices.*, electricity, "
            "demand or a numeric PATH; KIND: lognormal:SIGMA, normal:SD, uniform:LO..HI, "
            "triangular:LO..MODE..HI (repeatable).",
        ),
    ],
    samples: Annotated[
        int, typer.Option("--samples", min=1, max=5000, help="Variants drawn and solved.")
    ] = 100,
    draw_seed: Annotated[
        int,
        typer.Option(
            "--seed", min=0, max=2**63 - 1, help="Seed of the draws (sample i: the i-th child)."
        ),
    ] = 0,
    sets: SetOption = None,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Write every sample to a .csv or .json file.")
    ] = None,
    plot_path: PlotOut = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    workers: Workers = 1,
    solver_seed: Annotated[
        int, typer.Option("--solver-seed", min=0, max=MAX_SEED, help="Solver random seed.")
    ] = 0,
    executor: ExecutorOption = ExecutorKind.local,
    jobs: JobsOption = None,
    address: AddressOption = None,
    no_timings: NoTimings = False,
) -> None:
    """Monte-Carlo study of uncertain prices, demand and electricity: solve N random variants
    of the problem; the quantiles of the cost and how often each device is used and bought."""
    with user_errors():
        from planner.load import load_problem
        from planner.report.study import study_document, study_renderable
        from planner.whatif.executor import Settings
        from planner.whatif.study import parse_dist
        from planner.whatif.study import study as run_study

        dists = [parse_dist(d) for d in vary_dist]
        run_on = executor_of(executor, jobs, address)
        if out_path is not None:
            out_target(out_path, keep=problem, suffixes=ROW_SUFFIXES)  # before the study
        _chart_first(plot_path)
        prob = load_problem(problem, sets or [])
        settings = Settings(time_limit=time_limit, workers=workers, seed=solver_seed)
        with _counter() as tick:
            st = run_study(prob, dists, samples, draw_seed, settings, run_on, tick)
        if st.interrupted:
            interrupt.request()
        if no_timings:
            drop_timings(st.samples)
        if out_path is not None:
            flat = [{k: v for k, v in r.items() if k != "device_lines"} for r in st.samples]
            _write_rows(out_path, st.samples if out_path.suffix.lower() == ".json" else flat)
        if plot_path is not None:
            from planner.report.plot_study import plot_study

            costs = [r["tco_usd"] for r in st.samples if r.get("tco_usd") is not None]
            title = f"{prob.name}: {len(st.samples)} samples, seed {draw_seed}"
            plot_study(st.summary, costs, plot_path, title=title)
        if fmt is Format.json:
            emit_json(study_document(st, draw_seed, list(vary_dist)))
        else:
            out.print(study_renderable(st, f"study of {problem}"))


@app.command()
def explain(
    problem: Annotated[Path, typer.Argument(help="Problem file (YAML).")],
    sets: SetOption = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    seed: Seed = 0,
) -> None:
    """Why a problem has no plan and the smallest relaxation that gives one; or, for a feasible
    problem, which limits bind and what loosening each by 10 % is worth."""
    with user_errors():
        from planner.load import load_problem
        from planner.solve import Solver
        from planner.whatif.explain import explain as run_explain

        prob = load_problem(problem, sets or [])
        ex = run_explain(prob, Solver(time_limit=time_limit, seed=seed))
        if fmt is Format.json:
            emit_json(
                {
                    "feasible": ex.feasible,
                    "status": ex.plan.status if ex.plan else None,
                    "objective": ex.plan.objective if ex.plan else None,
                    "sentences": ex.sentences,
                    "core": ex.core,
                    "relaxations": ex.relaxations,
                    "marginal": ex.marginal,
                }
            )
            return
        head = "feasible" if ex.feasible else "infeasible"
        status = ex.plan.status if ex.plan else "?"
        out.print(f"[bold]{prob.name}[/]: {head} ({status})")
        for line in ex.sentences:
            out.print(f"  - {line}", highlight=False)


@app.command()
def compare(
    first: Annotated[Path, typer.Argument(help="A plan (.json) or a problem (.yaml).")],
    second: Annotated[
        Path | None, typer.Argument(help="Another plan or problem (or use --force-device).")
    ] = None,
    force_device: Annotated[
        str | None,
        typer.Option(
            "--force-device", help="Compare the problem with itself restricted to this device."
        ),
    ] = None,
    sets: SetOption = None,
    fmt: FormatOption = Format.table,
    time_limit: TimeLimit = 30.0,
    seed: Seed = 0,
) -> None:
    """Two plans side by side: what changed and by how much."""
    with user_errors():
        from planner.report.compare import compare_plans, comparison_dict, comparison_tables

        if (second is None) == (force_device is None):
            raise InputError("compare: give a second plan or problem, or --force-device DEVICE")
        if force_device is not None:  # a typo is an unknown device, not an infeasible plan
            from planner.catalog import load_catalog

            try:
                load_catalog().accelerator(force_device)
            except InputError as e:
                raise InputError(f"--force-device: {e}") from None
        a = _plan_of(first, sets or [], time_limit, seed)
        label_a, label_b = first.stem, second.stem if second else f"only {force_device}"
        if label_a == label_b:  # a/plan.json against b/plan.json: the paths tell them apart
            label_a, label_b = str(first), str(second)
        if second is not None:
            b = _plan_of(second, sets or [], time_limit, seed)
        else:
            b = _plan_of(first, sets or [], time_limit, seed, only=force_device)
        c = compare_plans(a, b, label_a=label_a, label_b=label_b)
        if fmt is Format.json:
            emit_json(comparison_dict(c))
            return
        for t in comparison_tables(c):
            out.print(t)


def _plan_of(
    path: Path, sets: list[str], time_limit: float, seed: int, only: str | None = None
) -> dict[str, Any]:
    """A plan dict: read from a JSON plan file and verified, or solved from a problem file
    (`only`: on that device type alone, its owned devices only, as solve.only_device)."""
    from planner.catalog import load_catalog

    if path.suffix.lower() == ".json":
        from planner.plan.io import read_plan
        from planner.verify_plan import verified

        if sets or only:
            raise InputError(f"{path}: --set applies to problem files, not to saved plans")
        return verified(read_plan(path), load_catalog())
    from planner.load import load_problem
    from planner.solve import only_device, solve_problem

    problem = load_problem(path, sets)
    if only is not None:
        from planner.load_network import assume_network

        # Restricted to whole machines, a problem that names no network is planned on their
        # built-in port, as if the file allowed them alone (planner.estimator.built_in_link).
        try:
            problem = assume_network(only_device(problem, only), load_catalog(), lambda _: "")
        except InputError as e:
            raise InputError(f"{path}: --force-device {only}: {e}") from None
    return solve_problem(problem, time_limit=time_limit, seed=seed).to_dict()


@app.command("verify")
def verify_cmd(
    plan_path: Annotated[Path, typer.Argument(help="A plan written by `planner solve --out`.")],
    problem_path: Annotated[
        Path | None,
        typer.Argument(help="The problem file (default: the problem embedded in the plan)."),
    ] = None,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            min=0.1,
            help="Seconds the re-solve that checks the plan's OPTIMAL (or bound) may take.",
        ),
    ] = 30.0,
    workers: Workers = 1,
    seed: Seed = 0,
    no_resolve: Annotated[
        bool,
        typer.Option(
            "--no-resolve",
            help="Check the plan's figures and constraints only, not its optimality claim "
            "(no re-solve).",
        ),
    ] = False,
) -> None:
    """Re-check a plan file: recompute every figure and constraint, then re-solve its problem
    to check its OPTIMAL (or bound); exit 5 if either fails."""
    with user_errors():
        from planner.catalog import load_catalog
        from planner.load import load_problem
        from planner.plan.io import read_plan
        from planner.verify_plan import PlanFailsVerification, verified

        pf = read_plan(plan_path)
        problem = load_problem(problem_path) if problem_path is not None else None
        cat = load_catalog()
        verified(pf, cat, problem)
        out.print(
            f"{plan_path}: the plan holds: every figure recomputed from the problem, the catalog "
            "and the estimator, every constraint checked",
            highlight=False,
        )
        if no_resolve:
            return
        from planner.whatif.optimality import check_claim

        claim = check_claim(
            pf.plan, problem or pf.problem, cat, time_limit=time_limit, workers=workers, seed=seed
        )
        if claim.verdict == "refuted":
            raise PlanFailsVerification(f"{plan_path}: {claim.message}")
        out.print(f"{plan_path}: {claim.message}", highlight=False, soft_wrap=True)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command()
def serve(
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on; other than loopback, anyone who reaches it may use the page."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            min=0.1,
            max=600,
            help="Seconds each request may take (its solves share them).",
        ),
    ] = 30.0,
    max_solves: Annotated[
        int, typer.Option("--max-solves", min=1, max=64, help="Solves running at once.")
    ] = 2,
    queue: Annotated[
        int,
        typer.Option(
            "--queue", min=0, max=1000, help="Requests waiting for a solve; more get 429."
        ),
    ] = 4,
    max_body_kib: Annotated[
        int,
        typer.Option(
            "--max-body-kib", min=1, max=65536, help="Largest request body (KiB); larger get 413."
        ),
    ] = 256,
    models_dir: Annotated[
        Path | None,
        typer.Option(
            "--models-dir",
            help="Folder that model paths in problems may name (config.json files); without "
            "it a problem sent to the page may name catalog models only.",
        ),
    ] = None,
    examples_dir: Annotated[
        Path | None,
        typer.Option("--examples", help="Folder of example problems offered on the page (*.yaml)."),
    ] = None,
) -> None:
    """Serve the explorer page: pick or upload a problem, move budget, power, latency, demand,
    price and electricity figures, and watch the verified plan change.

    Long because typer declares every option in the signature."""
    with user_errors():
        try:
            import uvicorn

            from planner.web.app import create_app
        except ImportError as e:
            raise PlannerError(
                f"planner serve needs the web extra ({e.name} is missing): "
                "pip install 'planner[web]'"
            ) from None
        from planner.catalog import load_catalog
        from planner.web.service import ServeConfig, default_examples_dir

        for name, folder in (("--models-dir", models_dir), ("--examples", examples_dir)):
            if folder is not None and not folder.is_dir():
                raise InputError(f"{name} {folder}: not a folder")
        if host not in LOOPBACK:
            err.print(
                f"warning: listening on {host}: anyone who can reach this address can use the "
                "page and its solver (there is no login)",
                highlight=False,
                markup=False,
            )
        cfg = ServeConfig(
            time_limit=time_limit,
            max_solves=max_solves,
            queue=queue,
            max_body_bytes=max_body_kib * 1024,
            models_dir=models_dir.resolve() if models_dir else None,
            examples_dir=examples_dir or default_examples_dir(),
        )
        load_catalog()  # a broken --catalog overlay fails now, not on the first request
        err.print(f"planner: serving on http://{host}:{port}/ (Ctrl-C stops)", highlight=False)
        uvicorn.run(create_app(cfg), host=host, port=port, log_level="warning")


@app.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of problem files (for editor completion)."""
    from planner.schema.problem import Problem

    emit_json(Problem.model_json_schema())


def main(started: float | None = None) -> None:
    """The `planner` command. Ctrl-C while typer parses the command line ends in exit code 130
    from typer itself, with no message: say "interrupted" then too. `started`: when the process
    began (monotonic), so a command's time limit counts its start-up too."""
    _process_began[:] = [] if started is None else [started]
    try:
        app()
    except SystemExit as e:
        if e.code == 130 and not interrupt.reported():
            sys.stderr.write("interrupted (Ctrl-C)\n")
        raise
    except (KeyboardInterrupt, Exception) as e:
        if _lost_output(e):  # outside a command's own guard: --help, usage errors, `schema`
            _say_output_lost(e)
            sys.exit(1)
        if not ctrl_c_in(e):
            raise
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)
    finally:
        _process_began.clear()


if __name__ == "__main__":
    main()
