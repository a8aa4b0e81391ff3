"""Hostile inputs against mixed weight files, hybrid linear-attention config.json files and the
built-in-port rule: each case a user could write that was planned silently (or with a message
that did not name the place and the fix), pinned by the message it gets now."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile_cli import run
from test_linear_attention import QWEN36_35B

from planner.catalog import load_catalog, use_overlays
from planner.estimator.designs import tp_degrees
from planner.hf_config import load_hf_config
from planner.load import load_problem
from planner.schema.model_params import split_heads, total_params

ROOT = Path(__file__).resolve().parent.parent

PROBLEM = """\
name: hostile
workloads:
  - name: chat
    kind: inference
    model: {model}
    weights: {weights}
    kv: bf16
    context_tokens: 4096
    prompt_tokens: 512
    output_tokens: 256
    concurrency: 1
constraints:
  allowed_devices: [m3-ultra-512gb]
objective: {{goal: min_cost}}
"""


def _four_owned_pis() -> str:
    """The problem on four owned Raspberry Pi 5s (Llama 3.1 8B in FP16), nothing to buy."""
    return PROBLEM.format(model="llama-3.1-8b", weights="fp16").replace(
        "allowed_devices: [m3-ultra-512gb]",
        "allowed_devices: [raspberry-pi-5-8gb]\n"
        "  inventory: [{device: raspberry-pi-5-8gb, count: 4}]\n  capex_usd: 0",
    )


def test_a_mix_with_an_experts_format_on_a_dense_model_is_refused(tmp_path: Path) -> None:
    """`mxfp4-experts+mlx-q8` on Llama 3.1 70B (no routed experts) was planned as plain MLX
    8-bit: the file the user named (experts in MXFP4) cannot exist for a dense model. The problem
    file, `--set` and `planner estimate` now refuse it, naming the one format to write."""
    path = tmp_path / "dense.yaml"
    path.write_text(PROBLEM.format(model="llama-3.1-70b", weights="mxfp4-experts+mlx-q8"))
    code, out = run("solve", str(path))
    assert code == 2, out
    assert f"{path}:6:" in out and "workloads[0].weights" in out
    assert "llama-3.1-70b has no routed experts (a dense model)" in out
    assert "write its one format, `mlx-q8`" in out
    # The same mix on a model with routed experts still plans (gpt-oss-120b: 128 experts).
    path.write_text(PROBLEM.format(model="gpt-oss-120b", weights="mxfp4-experts+mlx-q8"))
    code, out = run("solve", str(path))
    assert code == 0, out
    code, out = run("solve", str(path), "--set", "workloads.0.model=llama-3.1-8b")
    assert code == 2 and "llama-3.1-8b has no routed experts" in out, out
    code, out = run(
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--device",
        "m3-ultra-512gb",
        "--weights",
        "mlx-q4-experts+mlx-q8",
    )
    assert code == 2, out
    assert "--weights mlx-q4-experts+mlx-q8: weight format" in out
    assert "write its one format, `mlx-q8`" in out


def _hybrid_config(tmp_path: Path, **changes: object) -> Path:
    """Qwen3.6-35B-A3B's config.json (test_linear_attention.QWEN36_35B) with `changes` made to
    its text_config (a value of None removes the key)."""
    cfg = copy.deepcopy(QWEN36_35B)
    text = cfg["text_config"]
    assert isinstance(text, dict)
    for key, value in changes.items():
        if value is None:
            text.pop(key, None)
        else:
            text[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _estimate(path: Path) -> tuple[int, str]:
    return run("estimate", "--model", str(path), "--device", "h200-sxm", "--weights", "bf16")


@pytest.mark.parametrize(("value", "shown"), [("false", '"false"'), (2, "2"), ([True], "[true]")])
def test_a_gated_attention_switch_that_is_not_true_or_false_is_refused(
    tmp_path: Path, value: object, shown: str
) -> None:
    """`attn_output_gate: "false"` was read by Python's truth, so the quoted "false" counted
    the gate the user meant to leave out: a second query-sized projection in each of
    Qwen3.6-35B-A3B's 10 full-attention layers, 10 x 2,048 x (16 heads x 256) = 83.9 M
    parameters."""
    code, out = _estimate(_hybrid_config(tmp_path, attn_output_gate=value))
    assert code == 2, out
    assert "config.json: `attn_output_gate`: expected true or false" in out
    assert f"got {shown}" in out
    gated = total_params(load_hf_config(_hybrid_config(tmp_path, attn_output_gate=True)))
    plain = total_params(load_hf_config(_hybrid_config(tmp_path, attn_output_gate=False)))
    assert gated - plain == 10 * 2048 * 16 * 256


def test_layer_types_and_an_interval_that_disagree_are_refused(tmp_path: Path) -> None:
    """Qwen3.6's config.json gives both `layer_types` (three linear, then one full) and
    `full_attention_interval: 4`. With the interval changed to 2 the list alone was read (30
    linear layers) and the interval silently dropped, though it says 20; which the author meant
    is not knowable, so the file is refused at the first layer the two disagree on."""
    code, out = _estimate(_hybrid_config(tmp_path, full_attention_interval=2))
    assert code == 2, out
    assert (
        'config.json: `layer_types` entry 2 of 40 is "linear_attention", but '
        "`full_attention_interval` 2 makes layer 2 full attention" in out
    )
    assert "remove `full_attention_interval`" in out
    # The published pair agrees layer by layer: 30 of 40 layers linear, as the list says.
    arch = load_hf_config(_hybrid_config(tmp_path))
    assert arch.linear_attention is not None and arch.linear_attention.layers == 30
    # Without the interval the list alone decides, as in transformers.
    types = ["linear_attention", "full_attention"] * 20
    arch = load_hf_config(_hybrid_config(tmp_path, full_attention_interval=None, layer_types=types))
    assert arch.linear_attention is not None and arch.linear_attention.layers == 20


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        (
            {"layer_types": None, "full_attention_interval": 41},
            "`full_attention_interval` 41 is more than the 40 layers",
        ),
        (
            {"layer_types": ["linear_attention"] * 40, "full_attention_interval": None},
            'all 40 `layer_types` entries are "linear_attention"',
        ),
    ],
)
def test_a_hybrid_with_every_layer_linear_is_refused(
    tmp_path: Path, changes: dict[str, object], says: str
) -> None:
    """An interval past the last layer (41 for 40 layers) or a list of nothing but
    linear_attention made every layer Gated DeltaNet: the attention keys the file gives then
    described no layer and the model kept no KV cache at any context. Refused, with the fix."""
    code, out = _estimate(_hybrid_config(tmp_path, **changes))
    assert code == 2, out
    assert says in out and "leaving no full-attention layer" in out
    # The last layer full (interval 40) is still a hybrid: 39 linear layers.
    arch = load_hf_config(_hybrid_config(tmp_path, layer_types=None, full_attention_interval=40))
    assert arch.linear_attention is not None and arch.linear_attention.layers == 39


def test_a_catalog_hybrid_with_every_layer_linear_is_refused(tmp_path: Path) -> None:
    """The same slip in a user catalog's models.yaml (linear_attention.layers = num_layers)."""
    entry = (ROOT / "planner" / "catalog_data" / "models.yaml").read_text(encoding="utf-8")
    start = entry.index("  - id: qwen3.6-35b-a3b\n")
    end = entry.index("    notes:", start)
    (tmp_path / "models.yaml").write_text(
        "models:\n" + entry[start:end].replace("layers: 30", "layers: 40"), encoding="utf-8"
    )
    try:
        code, out = run(
            "--catalog",
            str(tmp_path),
            "estimate",
            "--model",
            "qwen3.6-35b-a3b",
            "--device",
            "h200-sxm",
        )
    finally:
        use_overlays([])  # the option lays the folder over every later load_catalog()
    assert code == 2, out
    assert "models.yaml" in out and "linear_attention.layers (40) leaves none of the 40" in out


PI5 = """\
accelerators:
  - id: raspberry-pi-5-8gb
    name: Raspberry Pi 5, 8GB
    vendor: raspberry-pi
    device_class: unified-memory
    architecture: bcm2712
    released: 2023-10
    memory: {{size: 8, unit: GiB, type: LPDDR4X, bandwidth_gb_s: 17.1, bus_width_bits: 32}}
    dense_tflops: {{fp32: 0.154, fp16: 0.307}}
    power: {{tdp_w: 12, idle_w: 3}}
    interconnect: {{scale_up: null, domain_size: 1, pcie_gen: null, pcie_lanes: null}}
    ecc: false
    form_factor: soc-system
    ports: {ports}
    price: {{purchase_usd: 80, purchase_date: 2023-10, condition: new}}
    sources: {{spec: raspberry-pi-5-brief, dense_tflops: arm-cortex-a76, ports: raspberry-pi-5-ports}}
"""


@pytest.mark.parametrize(
    ("ports", "says"),
    [
        ("[wifi-6]", "ports[0]: `wifi-6` is wireless"),
        ("[eth-1g, eth-1g]", "ports[1]: `eth-1g` is listed twice"),
        ("[eth-1g, pcie4]", "ports[1]: `pcie4` is a link inside one machine (pcie)"),
        ("[eth-3g]", "ports[0]: `eth-3g` is not a catalog link between machines; did you mean"),
    ],
)
def test_a_user_catalogs_ports_are_wired_ports_between_machines_listed_once(
    tmp_path: Path, ports: str, says: str
) -> None:
    """Four Pis whose user catalog entry listed `ports: [wifi-6]` were planned on Wi-Fi as "the
    slowest built-in wired port the machines share"; an intra-node link was refused with a
    suggestion of the same name (`nvlink4`: did you mean `nvlink4`?) and a doubled port was
    taken as is. Each is now refused at its entry and index."""
    (tmp_path / "accelerators.yaml").write_text(PI5.format(ports=ports), encoding="utf-8")
    path = tmp_path / "pis.yaml"
    path.write_text(_four_owned_pis())
    try:
        code, out = run("--catalog", str(tmp_path), "solve", str(path))
    finally:
        use_overlays([])
    assert code == 2, out
    assert f"{tmp_path / 'accelerators.yaml'}: raspberry-pi-5-8gb.{says}" in out


def test_a_plan_whose_assumed_link_note_was_changed_fails_verification(tmp_path: Path) -> None:
    """Three Raspberry Pi 5s hold Llama 3.1 8B in FP16 (16 GB over 8 GB boards) and name no
    network: the plan is made on their Gigabit Ethernet and says so in a note. The note was
    not checked, so a plan whose note claimed Thunderbolt 5 while its hops ran at 1 Gb/s
    verified; such a note now fails like the figures (exit 5)."""
    path = tmp_path / "pis.yaml"
    path.write_text(_four_owned_pis())
    out_path = tmp_path / "plan.json"
    code, out = run("solve", str(path), "--format", "json", "--out", str(out_path))
    assert code == 0, out
    doc = json.loads(out_path.read_text(encoding="utf-8"))
    (note,) = [n for n in doc["notes"] if n.startswith("link assumed: ")]
    assert note.startswith("link assumed: eth-1g (")
    code, out = run("verify", str(out_path), "--no-resolve")
    assert code == 0, out
    doc["notes"] = [
        n.replace("eth-1g (", "thunderbolt5 (") if n == note else n for n in doc["notes"]
    ]
    out_path.write_text(json.dumps(doc), encoding="utf-8")
    code, out = run("verify", str(out_path), "--no-resolve")
    assert code == 5, out
    assert "`notes." in out and "the built-in-port rule notes `link assumed: eth-1g (" in out


def test_eager_vllm_runs_every_format_vllm_runs_on_nvidia() -> None:
    """vllm-eager is vLLM with --enforce-eager, which changes how kernels are launched and not
    which quantization methods load; its rows copied vLLM's NVIDIA rows but not the MXFP8 one, so
    `--weights mxfp8 --engine vllm-eager` on a B200 was refused while vLLM ran it. Every
    (architecture, weights, KV) vLLM's non-experimental CUDA rows list is now eager's too."""
    cat = load_catalog()

    def combos(engine: str) -> set[tuple[str, str, str]]:
        return {
            (a, w, k)
            for r in cat.support
            if r.engine == engine and r.backend == "cuda" and not r.experimental
            for a in r.architectures
            for w in r.weights
            for k in r.kv
        }

    assert combos("vllm") == combos("vllm-eager")
    code, out = run(
        "estimate",
        "-m",
        "qwen3.6-35b-a3b",
        "-d",
        "b200",
        "--weights",
        "mxfp8",
        "--engine",
        "vllm-eager",
    )
    assert code == 0, out


def test_a_window_without_layer_types_on_a_hybrid_names_the_keys(tmp_path: Path) -> None:
    """Qwen3.6's config.json with `sliding_window: 4096` and no `layer_types`: the window rule
    (every layer local, as Mistral 7B) and the interval (30 of 40 linear) claim 70 layers, and
    the file was refused with the catalog's field names at "(top level)": `local_layers (40) and
    linear_attention.layers (30) together exceed num_layers (40)`. It now names the file's own
    keys and both fixes."""
    code, out = _estimate(_hybrid_config(tmp_path, layer_types=None, sliding_window=4096))
    assert code == 2, out
    assert (
        "config.json: `sliding_window` 4096 without `layer_types` makes 40 of the 40 layers "
        "sliding-window attention, but 30 are linear attention" in out
    )
    assert "give `layer_types`" in out and "`use_sliding_window: false`" in out
    assert "top level" not in out
    # Told which layer is which, the same window reads: 10 windowed layers, 30 linear.
    types = ["linear_attention"] * 3 + ["sliding_attention"]
    arch = load_hf_config(_hybrid_config(tmp_path, layer_types=types * 10, sliding_window=4096))
    assert arch.local_layers == 10 and arch.linear_attention is not None
    assert arch.linear_attention.layers == 30


def test_one_owned_machine_that_rents_more_is_no_pool_of_one(tmp_path: Path) -> None:
    """One owned c3d-highcpu-30 VM, nothing bought (capex 0), but on-demand rent allowed at a
    price the problem gives: the rule took "nothing bought, one owned" for a pool of one and
    asked for no network, so Llama 3.1 70B in FP16 (141 GB) was planned over three VMs on the
    default 100 Gb/s Ethernet, five times the 20 Gb/s the VMs get (gcp-vpc-zone), without a
    note. Rentable machines now count: the problem must name its network."""
    path = tmp_path / "vms.yaml"
    text = PROBLEM.format(model="llama-3.1-70b", weights="fp16").replace(
        "allowed_devices: [m3-ultra-512gb]",
        "allowed_devices: [gcp-c3d-highcpu-30]\n"
        "  inventory: [{device: gcp-c3d-highcpu-30, count: 1}]\n  capex_usd: 0",
    )
    path.write_text(
        text
        + "horizon: {procurement: [buy, on_demand]}\n"
        + "market: {prices: {gcp-c3d-highcpu-30: {rent_usd_per_hour: 1.2}}}\n"
    )
    code, out = run("solve", str(path))
    assert code == 2, out
    assert f"{path}:12:" in out and "no network is named" in out
    assert "name the link the machines are joined by in constraints.network" in out
    # Named, the three VMs hop over it.
    code, out = run(
        "solve", str(path), "--set", "constraints.network=gcp-vpc-zone", "--format", "json"
    )
    assert code == 0, out
    plan = json.loads(out)
    assert plan["devices"][0]["on_demand"] == 3 and "gcp-vpc-zone" in plan["links"]
    # Without rent the one owned VM is a pool of one and needs no network, as before.
    path.write_text(text)
    code, out = run("solve", str(path))
    assert code == 3, out  # 141 GB do not fit one VM's memory: infeasible, not an input error


@pytest.mark.parametrize(
    "field", ["launch_us_per_layer", "launch_us_per_step", "rpc_round_trip_us"]
)
def test_an_engine_time_of_more_than_a_second_is_refused_as_a_unit_slip(
    tmp_path: Path, field: str
) -> None:
    """A user catalog's vllm-eager with `launch_us_per_layer: 5000000` (5 s of host launch per
    block: seconds or nanoseconds written as microseconds) was planned at 0.0 tokens/s, the
    estimate calling decode "memory-bound". No engine's fixed time per hop, exchange, token,
    block or step is a second; larger figures are refused at their line."""
    shipped = (ROOT / "planner" / "catalog_data" / "support.yaml").read_text(encoding="utf-8")
    (line,) = [x for x in shipped.splitlines() if x.startswith("  - {id: vllm-eager,")]
    line = line.replace("launch_us_per_layer: 339", f"{field}: 5000000")
    (tmp_path / "support.yaml").write_text(f"engines:\n{line}\n", encoding="utf-8")
    try:
        code, out = run(
            "--catalog", str(tmp_path), "estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm",
            "--engine", "vllm-eager",
        )  # fmt: skip
    finally:
        use_overlays([])
    assert code == 2, out
    assert "support.yaml:2:" in out
    assert f"engines[0].{field}: must be at most 1,000,000, got 5,000,000" in out


def test_a_pool_left_to_one_vendor_of_whole_machines_follows_the_rule(tmp_path: Path) -> None:
    """`vendors: [apple]` names no device, yet leaves only Macs, every one a whole machine. The
    rule read the pool as every catalog device (cards among them), so it kept the 100 Gb/s
    default: Llama 3.1 405B in Q4_K_M was planned over three Mac Studios on eth-100g, a port no
    Mac has. The pool is now the devices the constraints leave, as design enumeration takes
    them: here Macs some of which record no port, so the problem must name its network."""
    path = tmp_path / "apple.yaml"
    path.write_text(
        PROBLEM.format(model="llama-3.1-405b", weights="q4_k_m").replace(
            "allowed_devices: [m3-ultra-512gb]",
            "vendors: [apple]\n  excluded_devices: [m3-ultra-512gb, m3-ultra-256gb]",
        )
    )
    code, out = run("solve", str(path))
    assert code == 2, out
    assert "no network is named and the catalog records no built-in network port for m1-" in out
    # Left to the Macs whose ports are recorded, the pool gets their slowest shared one.
    allowed = "allowed_devices: [m4-max-128gb, m4-pro-64gb]"
    path.write_text(
        PROBLEM.format(model="llama-3.1-405b", weights="q4_k_m").replace(
            "allowed_devices: [m3-ultra-512gb]", f"vendors: [apple]\n  {allowed}"
        )
    )
    code, out = run("solve", str(path), "--format", "json")
    assert code == 0, out
    plan = json.loads(out)
    assert any(n.startswith("link assumed: eth-1g (") for n in plan["notes"]), plan["notes"]


def test_tensor_parallelism_divides_a_hybrids_linear_attention_key_heads(tmp_path: Path) -> None:
    """Qwen3.6-35B-A3B's config.json with 12 linear-attention key heads (24 value heads): its 16
    attention heads let tensor parallelism 8 through, yet vLLM gives each rank num_k_heads //
    tp_size = 1 of the 12 key heads and views its projections by that share, so no engine runs
    the layout the planner offered. A degree must now divide both head counts: 1, 2 and 4."""
    path = _hybrid_config(tmp_path, linear_num_key_heads=12, linear_num_value_heads=24)
    arch = load_hf_config(path)
    assert split_heads(arch) == 4  # gcd(16, 12)
    code, out = run("estimate", "--model", str(path), "--device", "h100-sxm", "--tp", "8")
    assert code == 2, out
    assert "16 attention heads" in out and "its 12 linear-attention key heads" in out
    code, out = run("estimate", "--model", str(path), "--device", "h100-sxm", "--tp", "4")
    assert code == 0, out
    cat = load_catalog()
    problem = load_problem(ROOT / "problems" / "chat-70b.yaml")
    h100 = cat.accelerator("h100-sxm")
    assert tp_degrees(h100, cat, problem, arch) == [1, 2, 4]
    assert tp_degrees(h100, cat, problem, cat.model("qwen3.6-35b-a3b")) == [1, 2, 4, 8]


def test_compare_forced_onto_whole_machines_plans_them_on_their_built_in_port(
    tmp_path: Path,
) -> None:
    """Llama 3.1 405B in Q4_K_M, Macs and H100s allowed: the pool holds cards, so the problem
    keeps the 100 Gb/s default and its plan (three Mac Studios M4 Max) pays eth-100g ports
    through adapters. `compare --force-device m4-max-128gb` restricted the problem to the Macs
    but kept that network, though a pool of Macs naming no network is planned on their slowest
    shared built-in port (eth-10g): the forced side now is, without the adapters' ports."""
    path = tmp_path / "mixed-pool.yaml"
    path.write_text(
        PROBLEM.format(model="llama-3.1-405b", weights="q4_k_m").replace(
            "allowed_devices: [m3-ultra-512gb]",
            "allowed_devices: [m4-max-128gb, h100-sxm]\n  budget_usd: 100000",
        )
    )
    code, out = run("compare", str(path), "--force-device", "m4-max-128gb", "--format", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert "same devices" in doc["summary"]
    capex = {m["metric"]: m for m in doc["metrics"]}["capex_usd"]
    assert capex["b"] < capex["a"]  # the same three Macs, no 100 Gb/s ports to adapt
    solo = tmp_path / "macs.yaml"
    solo.write_text(path.read_text().replace("[m4-max-128gb, h100-sxm]", "[m4-max-128gb]"))
    code, out = run("solve", str(solo), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["capex_usd"] == pytest.approx(capex["b"])  # as if the file said so
