"""Models named by config.json in problem files, and user catalog overlays (--catalog,
PLANNER_CATALOG) that add or replace entries and are named in the plan."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import ENV_VAR, load_catalog, use_overlays
from planner.cli import app
from planner.errors import CatalogError, InputError
from planner.load import load_problem, parse_problem
from planner.schema.yaml_io import read_yaml
from planner.solve import solve_problem

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "problems" / "chat-70b.yaml"

# The published Qwen3-8B config.json (huggingface.co/Qwen/Qwen3-8B), the keys the reader uses.
QWEN3_8B = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}

# A device made up for the test: the MI300X's figures (and sources) as a PCIe card under a new id
# at a price no catalog device comes near, so a min-cost plan must buy it.
OVERLAY_DEVICE = """
accelerators:
  - id: acme-x1
    name: ACME X1 (test device)
    vendor: amd
    device_class: datacenter
    architecture: cdna3
    released: 2023-12
    memory: {size: 192, unit: GiB, type: HBM3, bandwidth_gb_s: 5300, bus_width_bits: 8192}
    dense_tflops: {fp32: 163.4, tf32: 653.7, bf16: 1307.4, fp16: 1307.4, fp8: 2614.9, int8: 2614.9}
    power: {tdp_w: 750, idle_w: 75}
    interconnect: {scale_up: infinity-fabric-mi300, scale_up_gb_s: 448, domain_size: 8, pcie_gen: 5, pcie_lanes: 16}
    ecc: true
    form_factor: pcie
    price: {purchase_usd: 900, purchase_date: 2026-05}
    embodied_kgco2e: 318
    sources: {spec: amd-mi300x}
"""


@pytest.fixture(autouse=True)
def _no_overlay(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    use_overlays([])
    yield
    use_overlays([])


def _problem_with_model(tmp_path: Path, model: str) -> Path:
    text = CHAT.read_text(encoding="utf-8").replace("model: llama-3.1-70b", f"model: {model}")
    assert f"model: {model}" in text
    path = tmp_path / "problem.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_problem_naming_a_config_json_solves(tmp_path: Path) -> None:
    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_text(json.dumps(QWEN3_8B), encoding="utf-8")
    for name in ("./qwen3-8b/config.json", "./qwen3-8b"):
        problem = load_problem(_problem_with_model(tmp_path, name))
        arch = load_catalog().model(name)
        assert arch.num_layers == 36 and arch.hidden_size == 4096
        plan = solve_problem(problem, time_limit=20)
        assert plan.status.has_plan, plan.notes
        assert plan.workloads[0].model == name


def test_missing_config_json_is_located(tmp_path: Path) -> None:
    path = _problem_with_model(tmp_path, "./nowhere/config.json")
    with pytest.raises(
        InputError, match=r"problem.yaml:\d+:\d+: workloads.0.model: .*no config.json"
    ):
        load_problem(path)


def test_model_path_refused_without_a_problem_file(tmp_path: Path) -> None:
    doc = read_yaml(_problem_with_model(tmp_path, "/etc/passwd"))
    with pytest.raises(InputError, match=r"model path .* not accepted"):
        parse_problem(doc)


def test_overlay_adds_a_device_that_a_plan_buys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = tmp_path / "my-catalog"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(OVERLAY_DEVICE, encoding="utf-8")
    assert "acme-x1" not in load_catalog().accelerators
    monkeypatch.setenv(ENV_VAR, str(overlay))
    cat = load_catalog()
    assert "acme-x1" in cat.accelerators and "h100-sxm" in cat.accelerators
    plan = solve_problem(load_problem(CHAT), time_limit=20)
    assert plan.status.has_plan
    assert {d.type for d in plan.devices} == {"acme-x1"}
    assert plan.devices[0].bought > 0
    assert f"catalog overlay: {overlay}" in plan.notes


def test_catalog_option_on_the_command_line(tmp_path: Path) -> None:
    overlay = tmp_path / "cat"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(OVERLAY_DEVICE, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["--catalog", str(overlay), "solve", str(CHAT), "--format", "json", "--no-timings"]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert "acme-x1" in json.dumps(plan["devices"])


def test_bad_overlay_is_refused_with_its_file(tmp_path: Path) -> None:
    overlay = tmp_path / "bad"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(
        OVERLAY_DEVICE.replace("amd-mi300x", "no-such-reference"), encoding="utf-8"
    )
    use_overlays([overlay])
    with pytest.raises(CatalogError, match="unknown reference `no-such-reference`"):
        load_catalog()
    use_overlays([tmp_path / "missing"])
    with pytest.raises(CatalogError, match="not a folder"):
        load_catalog()


@pytest.mark.parametrize(
    ("kind", "expect"),
    [("regions", "us-ca"), ("formats", "q4_k_m"), ("kv-formats", "q8_0"), ("hosts", "hgx-a100-8")],
)
def test_catalog_list_every_kind(kind: str, expect: str) -> None:
    result = CliRunner().invoke(app, ["catalog", "list", kind, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert expect in {row["id"] for row in json.loads(result.stdout)}


def test_an_overlay_mac_must_say_what_macos_lets_its_gpu_hold(tmp_path: Path) -> None:
    """Replacing or adding an Apple machine without memory.gpu_share would drop the cap macOS
    puts on its GPU (plans would fill 90 % where 75 % is usable): refused with its file."""
    cat = load_catalog()
    mac = cat.accelerator("m4-16gb").model_dump(mode="json", exclude_none=True)
    mac["memory"].pop("gpu_share")
    mac["sources"].pop("gpu_share")
    overlay = tmp_path / "mac"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(
        json.dumps({"accelerators": [mac]}), encoding="utf-8"
    )
    use_overlays([overlay])
    try:
        with pytest.raises(InputError, match=r"accelerators\.yaml.*gpu_share"):
            load_catalog()
    finally:
        use_overlays([])


def _overlay_entry(tmp_path: Path, kind: str, entry: dict[str, object]) -> None:
    overlay = tmp_path / kind
    overlay.mkdir()
    (overlay / f"{kind}.yaml").write_text(json.dumps({kind: [entry]}), encoding="utf-8")
    use_overlays([overlay])


def test_an_overlay_device_idling_above_its_tdp_is_refused(tmp_path: Path) -> None:
    """Idle 5,000 W against a 700 W TDP once planned an H100 drawing 2,262 W."""
    h100 = load_catalog().accelerator("h100-sxm").model_dump(mode="json", exclude_none=True)
    h100["power"]["idle_w"] = 5000
    _overlay_entry(tmp_path, "accelerators", h100)
    with pytest.raises(InputError, match=r"power\.idle_w: `h100-sxm` idles at 5000 W.*tdp_w"):
        load_catalog()


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [("bandwidth_gb_s", 1e-7, "under 1 Mb/s"), ("latency_us", 1e12, "over a second")],
)
def test_an_overlay_link_past_plausible_bounds_is_refused(
    tmp_path: Path, key: str, value: float, expect: str
) -> None:
    """A link of 1e-7 GB/s or 1e12 us once gave `OPTIMAL max_throughput = 1.2e-05`: catalog
    links keep the bounds a problem file's stated links do."""
    eth = load_catalog().links["eth-100g"].model_dump(mode="json", exclude_none=True)
    eth[key] = value
    _overlay_entry(tmp_path, "links", eth)
    with pytest.raises(InputError, match=rf"links\[0\]\.{key}: link `eth-100g` .*{expect}"):
        load_catalog()


@pytest.mark.parametrize("published", [8.03e3, 8.03e15, 7.0e9])
def test_an_overlay_model_published_params_far_from_its_architecture_is_refused(
    tmp_path: Path, published: float
) -> None:
    """published_params is checked against the count the architecture implies, within 5 %."""
    llama = load_catalog().model("llama-3.1-8b").model_dump(mode="json", exclude_none=True)
    llama["published_params"] = published
    _overlay_entry(tmp_path, "models", llama)
    with pytest.raises(CatalogError, match=r"llama-3\.1-8b\.published_params: .*8\.03e\+09"):
        load_catalog()


def test_an_overlay_model_published_params_rounded_as_cards_do_is_accepted(
    tmp_path: Path,
) -> None:
    llama = load_catalog().model("llama-3.1-8b").model_dump(mode="json", exclude_none=True)
    llama["published_params"] = 8e9  # the card's "8B", 0.4 % under 8.03B
    _overlay_entry(tmp_path, "models", llama)
    assert load_catalog().model("llama-3.1-8b").published_params == 8e9


def test_an_overlay_figure_of_infinity_is_refused_with_its_line(tmp_path: Path) -> None:
    """An H100 replaced by a copy whose fp16 rate is `.inf` passed every `gt=0` bound and
    `planner estimate` printed `decode throughput nan tokens/s`, exit 0."""
    overlay = tmp_path / "inf"
    overlay.mkdir()
    (overlay / "accelerators.yaml").write_text(
        OVERLAY_DEVICE.replace("id: acme-x1", "id: h100-sxm").replace("fp16: 1307.4", "fp16: .inf"),
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        ["--catalog", str(overlay), "estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm"],
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "accelerators.yaml:10:" in text
    assert "accelerators[0].dense_tflops.fp16: got" in text
    assert "write a finite number" in text
    assert "tokens/s" not in text
