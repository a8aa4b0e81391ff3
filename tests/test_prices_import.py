"""`planner prices import`: SkyPilot catalogs (two clouds with their own column orders, GCP's
GPU rows priced with their host) and a gpuhunt CSV into a user catalog overlay, with the
per-device prices and the names and rows left out reported. The fixtures under tests/prices are
written for these tests (a few rows in each list's layout), not copies of published catalogs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog, use_overlays
from planner.cli import app
from planner.prices import Imported, catalog_id, cheapest, read_gpuhunt, read_skypilot
from planner.schema.yaml_io import read_yaml

FIXTURES = Path(__file__).parent / "prices"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_overlays() -> Iterator[None]:
    yield
    use_overlays([])


def test_skypilot_folder_per_device_prices() -> None:
    got = Imported()
    read_skypilot(FIXTURES / "skypilot" / "aws" / "vms.csv", got)
    read_skypilot(FIXTURES / "skypilot" / "gcp" / "vms.csv", got)
    best = {k: o.usd_per_device_hour for k, o in cheapest(got.offers).items()}
    # AWS, per instance over its accelerators: p5.48xlarge $98.32 and spot $39.60 for 8 H100;
    # the A100 rows told apart by GpuInfo's memory (81920 MiB: 80 GB, 40960 MiB: 40 GB).
    assert best[("h100-sxm", True)] == pytest.approx(39.60 / 8)
    assert best[("a100-80gb-sxm", False)] == pytest.approx(40.96 / 8)
    assert best[("a100-40gb-sxm", False)] == pytest.approx(32.77 / 8)
    assert best[("a100-40gb-sxm", True)] == pytest.approx(12.00 / 8)
    assert best[("l4", False)] == pytest.approx(0.805)
    # GCP's a3-highgpu-8g: $88.25 for 8 H100, below AWS's $12.29 a GPU.
    assert best[("h100-sxm", False)] == pytest.approx(88.25 / 8)
    # GCP GPU rows plus their n1-standard-8 host in the region: 4 x T4 ($1.40) + host ($0.38)
    # = $0.445 a T4, below 1 x T4 ($0.35 + $0.38); spot only for the 1 x T4 row: $0.14 + $0.08.
    assert best[("t4", False)] == pytest.approx((1.40 + 0.38) / 4)
    assert best[("t4", True)] == pytest.approx(0.14 + 0.08)
    # Empty prices: p4de and g6 spot (AWS), 4 x T4 and a3 spot (GCP); the asia-east1 T4 row
    # has no host row in its region (on demand and spot).
    assert got.empty_prices == 4 and got.no_host == 2
    assert dict(got.unmapped) == {"Trainium": 1, "TPU-V5E": 1}


def test_gpuhunt_per_device_prices() -> None:
    got = Imported()
    read_gpuhunt(FIXTURES / "gpuhunt.csv", got)
    best = {k: o.usd_per_device_hour for k, o in cheapest(got.offers).items()}
    assert best[("h100-sxm", False)] == pytest.approx(2.99)
    assert best[("h100-sxm", True)] == pytest.approx(1.75)
    assert best[("a100-80gb-sxm", False)] == pytest.approx(14.32 / 8)  # 8-GPU instance
    assert best[("rtx-4090", False)] == pytest.approx(0.35)
    assert got.empty_prices == 1 and dict(got.unmapped) == {"GTX1080": 1}


def test_names_map_through_the_table_only() -> None:
    assert catalog_id("a100", 80) == "a100-80gb-sxm" and catalog_id("A100", 40) == "a100-40gb-sxm"
    assert catalog_id("A100", None) == "a100-40gb-sxm"  # the first size when none is given
    assert catalog_id("H100-MEGA", None) == "h100-sxm"
    assert catalog_id("V100", 16) is None  # the catalog holds the 32 GB V100 only: not guessed


def test_import_writes_an_overlay_the_planner_reads(tmp_path: Path) -> None:
    r = runner.invoke(
        app,
        [
            "prices",
            "import",
            "--skypilot",
            str(FIXTURES / "skypilot"),
            "--gpuhunt",
            str(FIXTURES / "gpuhunt.csv"),
            "--out",
            str(tmp_path),
            "--date",
            "2026-11",
        ],
        terminal_width=200,
    )
    assert r.exit_code == 0, r.output
    assert "skipped: 5 empty prices" in r.output
    assert "skipped: 2 GCP GPU rows without a n1-standard-8 row" in r.output
    assert "unmapped names: GTX1080 (1 rows), TPU-V5E (1 rows), Trainium (1 rows)" in r.output
    doc = read_yaml(tmp_path / "accelerators.yaml").data
    h100 = next(e for e in doc["accelerators"] if e["id"] == "h100-sxm")
    # The lowest of every list: runpod's $2.99 on demand and $1.75 spot.
    assert h100["price"]["rent_usd_per_hour"] == pytest.approx(2.99)
    assert h100["price"]["spot_usd_per_hour"] == pytest.approx(1.75)
    assert h100["price"]["rent_date"] == "2026-11"
    assert h100["sources"]["price.rent"] == "price-import-2026-11"
    shipped = load_catalog().accelerator("h100-sxm")
    assert h100["price"]["purchase_usd"] == shipped.price.purchase_usd  # kept
    # Laid over the catalog, the imported rent is what plans pay.
    use_overlays([tmp_path])
    assert load_catalog().accelerator("h100-sxm").price.rent_usd_per_hour == pytest.approx(2.99)


def test_instances_of_several_devices_import_whole(tmp_path: Path) -> None:
    lists = ["--skypilot", str(FIXTURES / "skypilot"), "--gpuhunt", str(FIXTURES / "gpuhunt.csv")]
    r = runner.invoke(
        app,
        ["prices", "import", *lists, "--out", str(tmp_path), "--date", "2026-11"],
        terminal_width=200,
    )
    assert r.exit_code == 0, r.output
    doc = read_yaml(tmp_path / "instances.yaml").data
    by_id = {e["id"]: e for e in doc["instances"]}
    # The fixture's p5.48xlarge: 8 x H100 at $98.32 on demand, $39.60 spot, per instance.
    p5 = by_id["aws-p5.48xlarge"]
    assert (p5["device"], p5["devices"], p5["vcpus"]) == ("h100-sxm", 8, 192)
    assert p5["on_demand_usd_per_hour"] == pytest.approx(98.32)
    assert p5["spot_usd_per_hour"] == pytest.approx(39.60)
    # GCP's 4 x T4 row: the GPUs ($1.40) with their n1-standard-8 host ($0.38) in us-central1.
    assert by_id["gcp-n1-standard-8-4-x-t4"]["on_demand_usd_per_hour"] == pytest.approx(1.78)
    # Lambda rents its A100 80GB 8 at a time only: no per-device rent is written for it.
    acc = {e["id"] for e in read_yaml(tmp_path / "accelerators.yaml").data["accelerators"]}
    assert "a100-80gb-sxm" not in acc and "h100-sxm" in acc
    use_overlays([tmp_path])
    lam = load_catalog().instances["lambda-gpu-8x-a100-80gb-sxm4"]
    assert lam.on_demand_usd_per_hour == pytest.approx(14.32) and lam.devices == 8


def test_a_list_without_its_columns_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "vms.csv"
    bad.write_text("Name,Cost\nx,1\n", encoding="utf-8")
    r = runner.invoke(app, ["prices", "import", "--skypilot", str(bad), "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "vms.csv: no column InstanceType" in r.output
    assert "Traceback" not in r.output
