"""Every id in a problem, a `--set` or an option is checked against the catalog, with the file,
the line and a did-you-mean that never crosses a magnitude; a "no plan" note names the
constraint that emptied the device list; meaningless workloads name their field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_cli import run

from planner.catalog import load_catalog
from planner.errors import nearest, same_magnitude

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"
CHAT = PROBLEMS / "chat-70b.yaml"
CAT = load_catalog()


def chat_with(tmp_path: Path, old: str, new: str) -> Path:
    text = CHAT.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "p.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_price_for_an_unknown_device_from_set() -> None:
    code, out = run("solve", str(CHAT), "--set", "market.prices.nonexist.purchase_usd=1")
    assert code == 2
    assert "--set market.prices.nonexist.purchase_usd=1" in out
    assert "unknown device `nonexist`" in out


def test_price_for_a_misspelt_device_in_the_file(tmp_path: Path) -> None:
    path = chat_with(
        tmp_path,
        "objective:",
        "market:\n  prices:\n    h100-sxn: {purchase_usd: 20000}\nobjective:",
    )
    code, out = run("solve", str(path))
    assert code == 2 and "p.yaml:26:5: market.prices.h100-sxn" in out
    assert "did you mean `h100-sxm`" in out


def test_capacity_for_an_unknown_device(tmp_path: Path) -> None:
    text = (PROBLEMS / "request-mix.yaml").read_text(encoding="utf-8")
    old = "      - {name: documents, input_tokens: 24k, output_tokens: 800, share: 10%}\n"
    assert old in text
    measured = "    capacity:\n      - {device: h100-sxn, class: chat, requests_per_s: 30}\n"
    path = tmp_path / "mix.yaml"
    path.write_text(text.replace(old, old + measured, 1), encoding="utf-8")
    code, out = run("solve", str(path))
    assert code == 2 and "mix.yaml:" in out and ".capacity[0].device" in out
    assert "unknown device `h100-sxn`; did you mean `h100-sxm`" in out


def test_unknown_carbon_region_is_located(tmp_path: Path) -> None:
    path = chat_with(tmp_path, "objective:", "carbon:\n  region: india\nobjective:")
    code, out = run("solve", str(path))
    assert code == 2 and "p.yaml:25:3: carbon.region: unknown region `india`" in out
    assert "did you mean `in`" in out


def test_duplicate_inventory_lines(tmp_path: Path) -> None:
    path = chat_with(
        tmp_path,
        "constraints:\n",
        "constraints:\n  inventory:\n    - {device: h100-sxm, count: 2}\n"
        "    - {device: h100-sxm, count: 3}\n",
    )
    code, out = run("solve", str(path))
    assert code == 2 and "p.yaml:19:" in out and "listed twice in the inventory" in out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("nosuchdevice:bandwidth=0.5", "`nosuchdevice` is neither a device id nor a device class"),
        ("nvidia:=1", "expected FACTOR=VALUE or DEVICE:FACTOR=VALUE"),
        ("=1", "expected FACTOR=VALUE"),
        ("bandwidth", "expected FACTOR=VALUE"),
        ("datacenter:bandwith=1", "unknown factor `bandwith`; did you mean `bandwidth`"),
        ("h100-sxn:compute=0.5", "did you mean `h100-sxm`"),
        ("bandwidth=inf", "not a finite number"),
        ("bandwidth=nan", "not a finite number"),
        ("bandwidth=half", "`half` is not a number"),
        ("bandwidth=5", "--efficiency `bandwidth=5`: bandwidth: Input should be less than"),
        ("bandwidth=-0", "--efficiency `bandwidth=-0`: bandwidth: Input should be greater"),
        # Read by the calibration alone (a run with DeepEP's dispatcher): no estimate reads it,
        # so a value given would change nothing; the message names the factor that does.
        ("moe_fused_share=0.5", "give moe_routed_ns to change the routing time"),
        ("datacenter:moe_fused_share=1", "the planner's training jobs run Megatron-Core's"),
    ],
)
def test_efficiency_option_is_checked(option: str, message: str) -> None:
    code, out = run("estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--efficiency", option)
    assert code == 2 and message in out, out


def test_efficiency_option_for_a_device_and_a_class_is_accepted() -> None:
    for option in ("h100-sxm:bandwidth=0.5", "datacenter:compute=0.5", "bandwidth=0.7"):
        code, out = run("estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--efficiency", option)
        assert code == 0, out


@pytest.mark.parametrize(
    ("name", "never"),
    [
        ("eth-2.5g", "eth-25g"),
        ("a100-40gb", "a100-80gb-sxm"),
        ("llama-3.1-8", "llama-3.1-70b"),
        ("llama-3-70b", "llama-3.2-3b"),
        ("eth-40g", "eth-400g"),
    ],
)
def test_did_you_mean_never_crosses_a_magnitude(name: str, never: str) -> None:
    pool = [*CAT.links, *CAT.models, *CAT.accelerators]
    assert never in pool
    assert not same_magnitude(name, never)
    assert never not in nearest(name, pool)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("llama-3-70b", "llama-3.1-70b"),
        ("rtx-3090-24gb", "rtx-3090"),
        ("h100", "h100-sxm"),
        ("eth-100", "eth-100g"),
    ],
)
def test_did_you_mean_still_helps(name: str, hint: str) -> None:
    assert hint in nearest(name, [*CAT.links, *CAT.models, *CAT.accelerators])


def test_unknown_link_with_a_magnitude_slip_lists_the_links() -> None:
    # eth-0.25g: eth-25g with a stray point (eth-2.5g is a catalog link of its own)
    code, out = run("solve", str(CHAT), "--set", "constraints.network=eth-0.25g")
    assert code == 2 and "unknown link `eth-0.25g`" in out
    assert "did you mean" not in out and "eth-25g" in out  # listed among the links, not offered


@pytest.mark.parametrize(
    ("sets", "culprit"),
    [
        (["constraints.vendors=[apple]"], "constraints.require_ecc"),
        (
            ["constraints.allowed_devices=[h100-sxm]", "constraints.excluded_devices=[h100-sxm]"],
            "constraints.excluded_devices",
        ),
        (["constraints.vendors=[nvidia]", "constraints.allowed_devices=[mi300x]"], "vendors"),
    ],
)
def test_no_plan_note_names_the_constraint_that_emptied_the_devices(
    sets: list[str], culprit: str
) -> None:
    args = ["solve", str(CHAT)]
    for s in sets:
        args += ["--set", s]
    code, out = run(*args)
    assert code == 3
    assert f"no device is left to plan with: {culprit}" in out or culprit in out
    assert "has a price and a host" not in out


def test_wrong_cause_for_a_training_micro_batch() -> None:
    args = ["solve", str(PROBLEMS / "qlora-8b-deadline.yaml")]
    code, out = run(*args, "--set", "workloads.0.micro_batch=1024")
    assert code == 3
    assert "micro_batch (1,024)" in out and "concurrency" not in out


def test_wrong_cause_for_a_ttft_of_one_microsecond() -> None:
    code, out = run("solve", str(CHAT), "--set", "workloads.chat.max_ttft_s=1 us")
    assert code == 3
    assert "max_ttft_s (1e-06 s)" in out


def test_an_optimal_plan_has_a_gap_of_zero() -> None:
    from planner.plan.types import Plan
    from planner.schema.status import Status

    # A max_throughput objective read back through the scale: 1e-6 apart, proved optimal.
    proved = Plan("p", Status.OPTIMAL, "max_throughput", 5344.000001, 5344.0, 0.1)
    assert proved.gap == 0.0
    stopped = Plan("p", Status.FEASIBLE, "max_throughput", 5000.0, 5344.0, 0.1)
    assert stopped.gap is not None and abs(stopped.gap - 344 / 5000) < 1e-12


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # A NUL once showed as "`chat` is not a valid name": the name looked right.
        ('"ch\\0at"', "`ch\\u0000at` is not a valid name"),
        # A right-to-left override reordered the rest of the message on a terminal.
        ('"chat\\u202e"', "`chat\\u202e` is not a valid name"),
        # An escape sequence (here: red text) was sent to the terminal as it was.
        ('"\\e[31mchat"', "`\\u001b[31mchat` is not a valid name"),
    ],
)
def test_characters_a_terminal_hides_are_shown_as_code_points(
    tmp_path: Path, raw: str, shown: str
) -> None:
    code, out = run("solve", str(chat_with(tmp_path, "name: chat\n", f"name: {raw}\n")))
    assert code == 2
    assert "p.yaml:6:5: workloads[0].name: " + shown in out
    assert "\x00" not in out and "\u202e" not in out and "\x1b" not in out


def test_letters_of_other_scripts_are_shown_as_they_are() -> None:
    code, out = run("solve", str(CHAT), "--set", "workloads.chat.model=ллама-3")
    assert code == 2
    assert "unknown model `ллама-3`" in out
